"""A scenario's cluster in the simulator: the `ClusterRuntime` the scenario runner drives.

Every broker and controller node gets its own emulated host (its own failure domain and disk),
as on a real cluster with one process per machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from actors.roles import role_factories
from actors.runtime.network import LatencyModel
from kraftlab.scenario.schema import LatencySpec, Scenario
from storage.modes import CrashKind, StorageMode
from workloads.cluster_view import UNKNOWN, BrokerState, PartitionState, QuorumState, ReplicaState
from workloads.runtime_api import StepFailed

from .simulator import SimConfig, Simulator
from .trace import EventSink


def _latency(spec: LatencySpec) -> LatencyModel:
    return LatencyModel(spec.kind, spec.low_ms, spec.high_ms, spec.mean_ms)


class SimClusterView:
    """What can be observed of the simulated cluster. With the idle placeholder roles, only
    process liveness and the (empty) client history are known."""

    def __init__(self, cluster: SimCluster) -> None:
        self._cluster = cluster

    def partitions(self) -> dict[str, PartitionState]:
        return {}

    def replica(self, partition: str, broker: int) -> ReplicaState | None:
        return None

    def brokers(self) -> dict[int, BrokerState]:
        sim = self._cluster.sim
        return {i: BrokerState(alive=sim.is_running(f"b{i}")) for i in range(1, self._cluster.scenario.cluster.brokers + 1)}

    def quorum(self) -> QuorumState:
        return QuorumState()

    def history(self) -> dict[str, int]:
        # No client has run: nothing was acknowledged, failed, lost or consumed. Elections are
        # unknown until the controller exists.
        return {
            "acked": 0,
            "failed": 0,
            "acked_lost": 0,
            "consumed": 0,
            "elections_clean": UNKNOWN,
            "elections_unclean": UNKNOWN,
            "quorum_elections": UNKNOWN,
        }


class SimCluster:
    def __init__(self, scenario: Scenario, event_sinks: Sequence[EventSink] = ()) -> None:
        self.scenario = scenario
        spec = scenario.cluster
        self.sim = Simulator(
            SimConfig(
                seed=scenario.seed,
                latency=_latency(spec.network.latency),
                fsync_latency=_latency(spec.disk.fsync_latency),
                background_flush_interval_ms=spec.disk.background_flush_interval_ms,
                dirty_expire_ms=spec.disk.dirty_expire_ms,
            )
        )
        self.sim.trace.sinks.extend(event_sinks)
        mode = StorageMode(spec.storage)
        factories = role_factories(spec.brokers, spec.controllers)
        for name in factories:
            self.sim.add_host(name, mode)
        for name, factory in factories.items():
            self.sim.add_node(name, name, factory, start=False)
        for name in factories:
            self.sim.start(name)
        self._view = SimClusterView(self)

    # --- ClusterRuntime -----------------------------------------------------------------------

    @property
    def now_ms(self) -> float:
        return self.sim.now_ms

    def view(self) -> SimClusterView:
        return self._view

    def run_for(self, duration_ms: float) -> None:
        self.sim.run_for(duration_ms)

    def run_until(self, condition: Callable[[], bool], timeout_ms: float) -> bool:
        return self.sim.run_for(timeout_ms, stop=condition)

    def crash(self, node: str, mode: str) -> None:
        if not self.sim.is_running(node) and mode == "process":
            raise StepFailed(f"{node} is not running")
        self.sim.crash(node, CrashKind(mode))

    def restart(self, node: str) -> None:
        if self.sim.is_running(node):
            raise StepFailed(f"{node} is already running")
        self.sim.start(node)

    def shutdown(self, node: str, timeout_ms: float) -> None:
        if not self.sim.is_running(node):
            raise StepFailed(f"{node} is not running")
        self.sim.request_shutdown(node)
        if not self.run_until(lambda: not self.sim.is_running(node), timeout_ms):
            raise StepFailed(f"{node} did not finish its controlled shutdown within {timeout_ms:g} ms")

    def isolate(self, node: str) -> None:
        self.sim.network.isolate(node)
        self.sim.record("runner", "fault_isolate", node=node)

    def partition(self, groups: Sequence[Sequence[str]]) -> None:
        self.sim.network.partition(groups)
        self.sim.record("runner", "fault_partition", groups=[list(g) for g in groups])

    def link(self, src: str, dst: str, drop: float, delay_ms: float) -> None:
        self.sim.network.link(src, dst, drop=drop, delay_ms=delay_ms)
        self.sim.record("runner", "fault_link", src=src, dst=dst, drop=drop, delay_ms=delay_ms)

    def heal(self, node: str | None) -> None:
        self.sim.network.heal(node)
        self.sim.record("runner", "heal", node=node)

    def protocol_step(self, kind: str, args: Any) -> None:
        raise StepFailed(
            f"step `{kind}` needs the broker and controller roles, which this version does not have yet "
            "(nodes run the idle placeholder role)"
        )

    def record(self, kind: str, **fields: Any) -> None:
        self.sim.record("runner", kind, **fields)

    def violations(self) -> list[dict[str, Any]]:
        return [v.as_dict() for v in self.sim.violations.values()]

    def stats(self) -> dict[str, Any]:
        trace = self.sim.trace
        return {
            "events": trace.event_count,
            "messages_delivered": trace.delivery_count,
            "messages_dropped": trace.drop_count,
            "sim_ms": round(self.sim.now_ms, 3),
            "trace_hash": self.sim.trace_hash(),
        }
