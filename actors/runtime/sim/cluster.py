"""A scenario's cluster in the simulator: the `ClusterRuntime` the scenario runner drives, built
from plain `RunSettings` (workloads/drivers.py makes them from a scenario).

Every broker and controller node gets its own emulated host (its own failure domain and disk), as
on a real cluster with one process per machine. Before the steps run, the cluster is brought up:
the quorum elects a leader, every broker registers and is unfenced, and the scenario's topics are
created through the active controller (their partitions elect leaders).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from actors.clients.consumer import ConsumerNode
from actors.clients.producer import ProducerNode
from actors.contract import Output
from actors.roles import role_factories
from actors.runtime.api import ADMIN_STEPS, ProtocolCommand, RunSettings, StepFailed
from actors.runtime.clients import Clients
from actors.runtime.readout import RoleCluster
from observability.events import Fault
from observability.fault_rows import link_target, network_fault_target, partition_target, undone_target
from storage.modes import CrashKind, StorageMode

from .history import report_survivors
from .simulator import SimConfig, Simulator
from .trace import EventSink

BOOTSTRAP_TIMEOUT_MS = 60_000.0


class SimCluster(RoleCluster):
    bootstrap_timeout_ms = BOOTSTRAP_TIMEOUT_MS
    unknown_grace_ms = 0.0
    fault_backend = "sim"

    def __init__(self, run: RunSettings, event_sinks: Sequence[EventSink] = ()) -> None:
        self.settings = run.cluster
        self.topics = run.topics
        self.sim = Simulator(
            SimConfig(
                seed=run.seed,
                latency=run.network_latency,
                fsync_latency=run.fsync_latency,
                background_flush_interval_ms=run.background_flush_interval_ms,
                dirty_expire_ms=run.dirty_expire_ms,
            )
        )
        self.sim.trace.sinks.extend(event_sinks)
        self.watch_history(run.disruption_checks)
        for check in self.checks.check_sets:
            self.sim.add_invariant_set(check)
        report_survivors(self.sim)
        mode = self.settings.storage
        factories = role_factories(self.settings)
        for name in factories:
            self.sim.add_host(name, mode)
        for name, factory in factories.items():
            self.sim.add_node(name, name, factory, start=False)
        for name in factories:
            self.sim.start(name)
        self.clients: Clients | None = None
        self.bootstrap()
        self.clients = Clients(self)

    # --- for tests: the roles themselves (nothing in a run reads them) ---------------------------

    def role(self, name: str) -> Any:
        return self.sim.nodes[name].role

    def image(self):
        """The most advanced running voter's committed metadata image."""
        best = None
        for v in self.settings.voters:
            role = self.sim.nodes[v].role
            if role is not None and role.raft is not None:
                img = role.controller.committed
                if best is None or img.offset > best.offset:
                    best = img
        return best

    # --- ClusterRuntime -----------------------------------------------------------------------

    @property
    def now_ms(self) -> float:
        return self.sim.now_ms

    # --- what the shared clients need -------------------------------------------------------------

    def add_client(self, name: str, kind: str, producer_id: int = 0) -> None:
        """A client node on a host of its own (clients never crash in scenarios)."""
        brokers = [f"b{i}" for i in range(1, self.settings.brokers + 1)]
        if kind == "producer":
            factory = lambda ctx: ProducerNode(ctx, brokers, producer_id)
        else:
            factory = lambda ctx: ConsumerNode(ctx, brokers)
        self.sim.add_host(name, StorageMode.PAGE_CACHE)
        self.sim.add_node(name, name, factory)

    def invoke(self, name: str, fn) -> Any:
        """A local call on a running node: an `Output` it returns is carried out, anything else is
        returned; from `(Output, value)` the output is carried out and the value returned."""
        result: list[Any] = []

        def call(role, now):
            value = fn(role, now)
            if isinstance(value, Output):
                return value
            if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], Output):
                result.append(value[1])
                return value[0]
            result.append(value)
            return None

        self.sim.invoke(name, call)
        return result[0] if result else None

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
        self.sim.record(Fault("restart", node, backend="sim"))
        self.sim.start(node)

    def shutdown(self, node: str, timeout_ms: float, wait: bool = True) -> None:
        if not self.sim.is_running(node):
            raise StepFailed(f"{node} is not running")
        self.sim.request_shutdown(node)
        if not wait:
            return
        # Done when the history says so (its process_stop reached the view), not just the actor.
        if not self.run_until(lambda: not self.sim.is_running(node) and not self.view().running.get(node, False), timeout_ms):
            raise StepFailed(f"{node} did not finish its controlled shutdown within {timeout_ms:g} ms")

    def isolate(self, node: str) -> None:
        self.sim.network.isolate(node)
        self.sim.record(Fault("isolate", node, backend="sim"))

    def partition(self, groups: Sequence[Sequence[str]]) -> None:
        self.sim.network.partition(groups)
        self.sim.record(Fault("partition", partition_target(groups), backend="sim"))

    def link(self, src: str, dst: str, drop: float, delay_ms: float) -> None:
        self.sim.network.link(src, dst, drop=drop, delay_ms=delay_ms)
        self.sim.record(Fault("link", link_target(src, dst), drop, delay_ms, backend="sim"))

    def heal(self, node: str | None) -> None:
        self.sim.network.heal(node)
        self.sim.record(Fault("heal", node or "all", backend="sim"))

    def undo_network_fault(self, fault: str, target: tuple) -> None:
        self.sim.network.undo(fault, target)
        self.sim.record(Fault("heal", undone_target(fault, network_fault_target(fault, target)), backend="sim"))

    def protocol_step(self, kind: str, args: ProtocolCommand) -> None:
        if kind in ADMIN_STEPS:
            return self.admin_step(kind, args)
        if kind == "produce":
            return self.clients.produce(args)
        if kind == "list_offsets":
            state = self.view().partition(f"{args.topic}-{args.partition}")
            return self.clients.list_offsets(args, None if state is None else state.leader)
        if kind == "consume":
            return self.clients.consume(args)
        if kind == "load":
            return self.clients.load(args, {t.name: t.partitions for t in self.topics})
        if kind == "pause_load":
            return self.clients.pause_load(args)
        raise StepFailed(
            f"step `{kind}` needs the brokers' data plane or a controller feature this version does not have yet"
        )

    def record(self, event: Any) -> None:
        self.sim.record(event)

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
