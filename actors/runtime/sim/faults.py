"""Carrying out a fault schedule's actions (workloads/faults.py) in the simulator, then the heal phase."""

from __future__ import annotations

from collections.abc import Iterable

from actors.runtime.api import FaultAction
from observability.events import Fault
from observability.fault_rows import link_target, partition_target
from storage.modes import CrashKind

from .simulator import Simulator

_CRASHES = {"crash_os": CrashKind.OS, "crash_process": CrashKind.PROCESS, "crash_disk": CrashKind.DISK}


def apply_fault(sim: Simulator, a: FaultAction) -> None:
    if a.action in _CRASHES:
        (node,) = a.nodes
        if sim.is_running(node):
            sim.crash(node, _CRASHES[a.action])  # records the fault
    elif a.action == "restart":
        (node,) = a.nodes
        if not sim.is_running(node):
            sim.record(Fault("restart", node, backend="sim"))
            sim.start(node)
    elif a.action == "isolate":
        sim.network.isolate(a.nodes[0])
        sim.record(Fault("isolate", a.nodes[0], backend="sim"))
    elif a.action == "partition":
        sim.network.partition(a.groups)
        sim.record(Fault("partition", partition_target(a.groups), backend="sim"))
    elif a.action == "link":
        sim.network.link(a.nodes[0], a.nodes[1], drop=a.drop, delay_ms=a.delay_ms)
        sim.record(Fault("link", link_target(a.nodes[0], a.nodes[1]), a.drop, a.delay_ms, backend="sim"))
    elif a.action == "heal":
        sim.network.heal(a.nodes[0] if a.nodes else None)
        sim.record(Fault("heal", a.nodes[0] if a.nodes else "all", backend="sim"))
    else:
        raise ValueError(f"unknown fault action {a.action!r}")


def schedule_faults(sim: Simulator, actions: Iterable[FaultAction], start_ms: float = 0.0) -> None:
    for a in actions:
        sim.call_at(start_ms + a.at_ms, lambda a=a: apply_fault(sim, a))


def heal_everything(sim: Simulator, nodes) -> None:
    """The end of the safety phase: no network fault, every node running."""
    sim.network.heal()
    sim.record(Fault("heal", "all", backend="sim"))
    for node in nodes:
        if not sim.is_running(node):
            sim.record(Fault("restart", node, backend="sim"))
            sim.start(node)
