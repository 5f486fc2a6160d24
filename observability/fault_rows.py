"""What the history's `fault` rows mean (observability/events.py's `Fault`): the fault kinds, how
a row's `target` names nodes, links and partitions, and when a later row ends a fault. The drivers
write the targets with these functions and every reader of fault windows (the metrics, the
report, windows.py in Spark) ends them by this rule, so that all agree on one reading.
"""

from __future__ import annotations

import re

FAULTS = ("crash_process", "crash_os", "crash_disk", "restart", "shutdown", "isolate", "partition", "link", "heal", "fail_log_dir")
# Faults that stop a node until a `restart` of the same target, and network faults that `heal` ends.
NODE_FAULTS = ("crash_process", "crash_os", "crash_disk", "shutdown")
NETWORK_FAULTS = ("isolate", "partition", "link")
# A failed log directory (KIP-858) stays offline until its broker restarts; its process may run on.
DIRECTORY_FAULTS = ("fail_log_dir",)
# Every fault that a `restart` of its target ends.
RESTART_ENDED_FAULTS = NODE_FAULTS + DIRECTORY_FAULTS
# What separates the nodes a network fault's target names: `b1,c1|b2,b3`, `b1->b2`.
FAULT_TARGET_SEPARATORS = r"\||,|->"


def fault_undone_by(fault: str, target: str, later_fault: str, later_target: str) -> bool:
    """Whether a later `fault` row ends an active fault, the rule every reader of fault windows
    shares (windows.py says it in Spark): a node fault ends at `restart` of the same node; a network
    fault at `heal` of `all`, of any node its target names, since healing a node removes every
    network fault touching it (a partition healed for one of its nodes counts as ended), or of that
    fault alone (`undone_target`: a generated schedule's `undo`)."""
    if fault in RESTART_ENDED_FAULTS:
        return later_fault == "restart" and later_target == target
    return later_fault == "heal" and (later_target in ("all", undone_target(fault, target))
                                      or later_target in re.split(FAULT_TARGET_SEPARATORS, target))


def undone_target(fault: str, target: str) -> str:
    """The `heal` row's target that ends one network fault and no other: `isolate:b2`,
    `partition:b1,c1|b2,b3`, `link:b1->b2`."""
    return f"{fault}:{target}"


def partition_target(groups) -> str:
    """A network partition's `target`: the groups, `b1,c1|b2,b3`."""
    return "|".join(",".join(g) for g in groups)


def link_target(src: str, dst: str) -> str:
    return f"{src}->{dst}"


def network_fault_target(fault: str, target: tuple) -> str:
    """A network fault's `target` from what it names: (node,), (src, dst) or the groups."""
    if fault == "isolate":
        return target[0]
    return link_target(*target) if fault == "link" else partition_target(target)
