"""The steps of a generated fault schedule (a campaign's `faults.swarm`; docs/reference, steps):
`fault`, `undo` and `trigger`, and the time of the run, through which armed faults fire.

A `fault` names its nodes by name or by role (the steps' selectors, resolved when it fires). It
strikes at once, or, with `armed_ms`, at the first moment within that span that its selectors
name somebody (and a crash's node runs), while the steps after it go on: FoundationDB's BUGGIFY
sites, armed for a while and striking when the state they wait for comes. A fault whose role
never comes about within its span is skipped (a `fault_skipped` row), never failing the run. So
every wait of the run (`wait`, `wait_for`, `trigger`) goes through `run_for` and `run_until`
here, which fire what has come due; a protocol step's own waits (a produce waiting for its
acknowledgements) do not.

Lossy crashes of brokers (an OS crash, a disk loss) carry the run's budget (`lossy_budget`):
past it, a crash loses nothing (a process crash), so that a schedule stays within the protocol's
tolerance of lossy unclean shutdowns (protocol-facts.md, NoCommittedRecordLostGlobally). The
tolerance counts a lossy replica until it is back in the ISR, caught up (the checks' rule,
observability/checks/partitions.py), so the budget counts the lossy crashes outstanding: a
broker's counts until, running again, it is back in the ISR of every partition it held when it
crashed, by a partition change made after the crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors.runtime.api import ClusterRuntime, StepFailed
from observability import events
from observability.fault_rows import link_target, partition_target
from observability.states import UNKNOWN

from .scenario.step_spec import LOSSY_CRASHES, FaultArgs, TriggerArgs


@dataclass
class Armed:
    """A fault waiting for its targets until `deadline_ms`."""

    args: FaultArgs
    deadline_ms: float


class FaultSteps:
    """What a run's generated faults did, and the faults armed now. `resolve` is the step runner's
    (a name, or a selector resolved now; StepFailed when it names nobody)."""

    def __init__(self, runtime: ClusterRuntime, resolve: Callable[[str], str]) -> None:
        self.runtime = runtime
        self.resolve = resolve
        # id -> (kind, what it named once resolved: (node,), (src, dst) or a partition's groups),
        # or None when it was skipped
        self.made: dict[int, tuple[str, tuple] | None] = {}
        self.crashed: set[str] = set()  # the nodes the faults crashed that no undo restarted yet
        # The brokers an OS crash or disk loss of theirs has not yet been made good for: the
        # partitions each held then, with their partition epochs at the crash (a rejoin of the
        # ISR after it raises the epoch).
        self.lossy_outstanding: dict[str, dict[str, int]] = {}
        self.armed: list[Armed] = []

    # --- the steps ------------------------------------------------------------------------------

    def fault(self, a: FaultArgs) -> None:
        nodes, why = self._targets(a)
        if nodes is not None:
            self._strike(a, nodes)
        elif a.armed_ms:
            self.armed.append(Armed(a, self.runtime.now_ms + a.armed_ms))
        else:
            self._skip(a, why)

    def undo(self, which: int | str) -> None:
        """Restart what a fault crashed, heal what it cut (docs/reference, `undo`); that fault,
        armed and not yet struck, is disarmed. `all`: what every fault did (the armed ones stay
        armed until their span ends)."""
        rt = self.runtime
        if which == "all":
            rt.heal(None)
            for node in sorted(self.crashed):
                self._restart_if_down(node)
            self.crashed.clear()
            return
        for armed in [x for x in self.armed if x.args.id == which]:
            self.armed.remove(armed)
            self._skip(armed.args, "undone before its target came about")
        made = self.made.get(int(which))
        if made is None:  # skipped, or never struck
            return
        kind, target = made
        if kind.startswith("crash_"):
            self._restart_if_down(target[0])
            self.crashed.discard(target[0])
        else:  # that fault alone: another fault on the same nodes goes on
            rt.undo_network_fault(kind, target)

    def trigger(self, a: TriggerArgs) -> None:
        """Wait for the protocol state `a` names, at most its timeout; record whether it came."""
        rt = self.runtime
        holds = trigger_condition(a, rt.view())
        started = rt.now_ms
        fired = holds() or self.run_until(holds, a.timeout_ms)
        rt.record(events.Trigger(a.state, a.partition or "", fired, round(rt.now_ms - started, 3)))

    # --- the run's time -------------------------------------------------------------------------

    def run_for(self, duration_ms: float) -> None:
        if not self.armed:
            self.runtime.run_for(duration_ms)
            return
        self.run_until(lambda: False, duration_ms)

    def run_until(self, condition: Callable[[], bool], timeout_ms: float) -> bool:
        """The runtime's `run_until`, striking each armed fault when its targets come about and
        skipping it at its deadline meanwhile."""
        rt = self.runtime
        if not self.armed:
            return rt.run_until(condition, timeout_ms)
        end = rt.now_ms + timeout_ms
        held = [False]

        def ready() -> bool:
            if condition():
                held[0] = True
                return True
            return any(self._targets(x.args)[0] is not None for x in self.armed)

        while True:
            horizon = min([end, *(x.deadline_ms for x in self.armed)])
            rt.run_until(ready, max(0.0, horizon - rt.now_ms))
            self._strike_or_expire()
            if held[0]:
                return True
            if rt.now_ms >= end:
                return False
            if not self.armed:
                return rt.run_until(condition, max(0.0, end - rt.now_ms))

    def _strike_or_expire(self) -> None:
        for armed in list(self.armed):
            nodes, why = self._targets(armed.args)
            if nodes is not None:
                self.armed.remove(armed)
                self._strike(armed.args, nodes)
            elif self.runtime.now_ms >= armed.deadline_ms:
                self.armed.remove(armed)
                self._skip(armed.args, why)

    # --- the faults -----------------------------------------------------------------------------

    def _targets(self, a: FaultArgs) -> tuple[dict[str, str] | None, str]:
        """The nodes the fault names now (each reference's), or None and why not."""
        refs = [ref for ref in (a.node, a.to) if ref is not None] + [n for g in a.groups or [] for n in g]
        try:
            nodes = {ref: self.resolve(ref) for ref in refs}
        except StepFailed as exc:
            return None, str(exc)
        if a.crash_mode() is not None and not self.runtime.view().is_running(nodes[a.node]):
            return None, f"{nodes[a.node]} is not running"
        if a.kind == "link" and nodes[a.node] == nodes[a.to]:
            return None, f"both ends of the link are {nodes[a.node]}"
        return nodes, ""

    def _strike(self, a: FaultArgs, nodes: dict[str, str]) -> None:
        rt = self.runtime
        mode = a.crash_mode()
        if mode is not None:
            node = nodes[a.node]
            if a.kind in LOSSY_CRASHES and node.startswith("b"):
                if a.lossy_budget is not None and self._lossy_outstanding() >= a.lossy_budget:
                    mode = "process"  # past the budget: a crash that loses nothing
                else:
                    self.lossy_outstanding[node] = self._held_partitions(int(node[1:]))
            rt.crash(node, mode)
            self.crashed.add(node)
        elif a.kind == "isolate":
            rt.isolate(nodes[a.node])
        elif a.kind == "link":
            rt.link(nodes[a.node], nodes[a.to], a.drop, a.delay_ms)
        else:  # partition: a node named twice (two selectors, one node) stays in its first group
            seen: set[str] = set()
            groups = []
            for group in a.groups or []:
                members = tuple(nodes[n] for n in group if nodes[n] not in seen)
                seen.update(members)
                groups.append(members)
            groups = [g for g in groups if g]
            rt.partition(groups)
            self.made[a.id] = (a.kind, tuple(groups))
            return
        self.made[a.id] = (a.kind, tuple(nodes[ref] for ref in (a.node, a.to) if ref is not None))

    def _held_partitions(self, broker: int) -> dict[str, int]:
        """The partitions whose replicas include the broker, with their partition epochs now."""
        return {name: state.partition_epoch for name, state in self.runtime.view().partitions().items() if broker in state.replicas}

    def _lossy_outstanding(self) -> int:
        """How many lossy crashes of brokers count against the budget now: those whose broker is
        not yet running and back in the ISR of every partition it held (a partition since
        deleted, or the broker since moved out of its replicas, holds nothing of it)."""
        view = self.runtime.view()
        for node, held in list(self.lossy_outstanding.items()):
            broker = int(node[1:])
            states = {name: view.partition(name) for name in held}
            if view.is_running(node) and all(state is None or broker not in state.replicas
                                             or (broker in state.isr and state.partition_epoch > held[name])
                                             for name, state in states.items()):
                del self.lossy_outstanding[node]
        return len(self.lossy_outstanding)

    def _skip(self, a: FaultArgs, why: str) -> None:
        if a.groups is not None:
            target = partition_target(a.groups)
        else:
            target = link_target(a.node, a.to) if a.to else str(a.node)
        self.runtime.record(events.FaultSkipped(a.kind, target, why))
        self.made[a.id] = None

    def _restart_if_down(self, node: str) -> None:
        if not self.runtime.view().is_running(node):
            self.runtime.restart(node)


def trigger_condition(a: TriggerArgs, view: Any) -> Callable[[], bool]:
    """A test of the view for the state a `trigger` step waits for; the states that are changes
    (leader_change, controller_change) compare with the epoch when the step starts."""
    if a.state == "broker_fenced":
        return lambda: any(state.fenced is True for state in view.brokers().values())
    if a.state == "controller_change":
        start = view.quorum().epoch
        return lambda: _known(view.quorum().epoch) and (not _known(start) or view.quorum().epoch > start)
    partition = a.partition
    if a.state == "under_min_isr":
        return lambda: (state := view.partition(partition)) is not None and state.under_min_isr is True
    if a.state == "isr_leader_only":
        return lambda: (state := view.partition(partition)) is not None and state.leader is not None and list(state.isr) == [state.leader]
    first = view.partition(partition)
    start = None if first is None else first.leader_epoch  # leader_change
    return lambda: (state := view.partition(partition)) is not None and (start is None or state.leader_epoch > start)


def _known(value: Any) -> bool:
    return value is not None and value is not UNKNOWN
