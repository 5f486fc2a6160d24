"""Every committed partition state, in the order the controller voters reported them.

A `wait_for` on a partition waits for a state of the controller's committed metadata (contract.md,
"Conditions"). The simulator's runner looks at the cluster after every event; on Ray it looks at
copies polled every few tens of milliseconds, and a committed state that lasts less than a poll
would go unseen: KIP-966's step 7, a leader elected from the ELR with ISR [2], lasts only until the
old leader has caught up and rejoins the ISR. Each voter reports every partition record it commits
as a `partition_state` event (controller.py, `_report_partition_committed`), and both drivers hand
every event to their sinks, polls or not: so a wait also holds once a state reported since it
began matches.

Only the keys a partition record carries can be judged this way; `hwm` is the leader's, not the
controller's, and is read from the cluster as it is now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kraftlab.scenario.schema import Condition

from .cluster_view import UNKNOWN, PartitionState
from .conditions import matches

EventRecord = tuple[float, str, str, dict[str, Any]]

RECORD_KEYS = frozenset(
    {"leader", "leader_epoch", "partition_epoch", "replicas", "isr", "elr", "last_known_elr", "offline", "under_min_isr"}
)


class PartitionHistory:
    """An event sink. Invariant: `states` holds each committed state once, in arrival order: every
    voter reports each one, and a partition epoch names one committed state, so a report of an
    epoch already seen for the partition adds nothing."""

    def __init__(self) -> None:
        self.states: list[tuple[str, PartitionState]] = []
        self._newest_epoch: dict[str, int] = {}

    def __call__(self, record: EventRecord) -> None:
        _at_ms, _node, kind, f = record
        if kind != "partition_state":
            return
        name = f["partition"]
        if f["partition_epoch"] <= self._newest_epoch.get(name, -1):
            return
        self._newest_epoch[name] = f["partition_epoch"]
        self.states.append((name, PartitionState.committed(f, hwm=UNKNOWN)))

    def reported_from_now(self, cond: Condition) -> Callable[[], bool]:
        """A check that turns (and stays) true once a state reported after this call satisfies
        every key of `cond`; always false for a condition these states cannot judge."""
        checks = cond.checks()
        if cond.partition is None or not checks.keys() <= RECORD_KEYS:
            return lambda: False
        position = len(self.states)
        seen = False

        def check() -> bool:
            nonlocal position, seen
            while not seen and position < len(self.states):
                name, state = self.states[position]
                position += 1
                seen = name == cond.partition and all(matches(want, getattr(state, key), key) for key, want in checks.items())
            return seen

        return check
