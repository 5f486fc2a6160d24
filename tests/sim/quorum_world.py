"""A simulated KRaft quorum (controller voters only) with its invariants watched."""

from __future__ import annotations

from actors.controller_node import ControllerNode
from actors.runtime.sim.history import report_survivors
from actors.runtime.sim.simulator import SimConfig, Simulator
from observability.checks import QuorumChecks
from storage.modes import StorageMode
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec


def quorum_world(seed: int = 0, *, voters: int = 3, storage: str = "page_cache", **protocol) -> Simulator:
    spec = ClusterSpec.model_validate({"brokers": 1, "controllers": voters, "storage": storage, "protocol": protocol})
    settings = cluster_settings(spec)
    sim = Simulator(SimConfig(seed=seed))
    for v in settings.voters:
        sim.add_host(v, StorageMode(storage))
        sim.add_node(v, v, lambda ctx: ControllerNode(ctx, settings), start=False)
    checks = QuorumChecks(settings.voters, prevote=settings.protocol.prevote)
    sim.trace.sinks.append(checks)
    sim.add_invariant_set(checks.check)
    report_survivors(sim)
    for v in settings.voters:
        sim.start(v)
    return sim


def rafts(sim: Simulator) -> dict:
    return {name: n.role.raft for name, n in sim.nodes.items() if n.role is not None and hasattr(n.role, "raft")}


def leader_of(sim: Simulator) -> str | None:
    leaders = [name for name, r in rafts(sim).items() if r.is_leader()]
    return max(leaders, key=lambda n: rafts(sim)[n].epoch) if leaders else None


def propose(sim: Simulator, node: str, records: list) -> None:
    sim.invoke(node, lambda role, now: role.propose(records, now))
