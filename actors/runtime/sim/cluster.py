"""A scenario's cluster in the simulator: the `ClusterRuntime` the scenario runner drives.

Every broker and controller node gets its own emulated host (its own failure domain and disk), as
on a real cluster with one process per machine. Before the steps run, the cluster is brought up:
the quorum elects a leader, every broker registers and is unfenced, and the scenario's topics are
created through the active controller (their partitions elect leaders).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from actors.roles import role_factories
from actors.runtime.network import LatencyModel
from actors.settings import ClusterSettings
from controller_quorum.metadata import MetadataImage
from controller_quorum.metadata_invariants import MetadataInvariants
from kraftlab.scenario.schema import LatencySpec, Scenario, split_partition_ref
from storage.modes import CrashKind, StorageMode
from workloads.cluster_view import UNKNOWN, BrokerState, PartitionState, QuorumState, ReplicaState
from workloads.runtime_api import StepFailed

from .clients import SimClients
from .partition_watch import PartitionInvariants
from .quorum_watch import watch_quorum
from .simulator import SimConfig, Simulator
from .trace import EventSink

BOOTSTRAP_TIMEOUT_MS = 60_000.0


def _latency(spec: LatencySpec) -> LatencyModel:
    return LatencyModel(spec.kind, spec.low_ms, spec.high_ms, spec.mean_ms)


class SimClusterView:
    """The cluster as conditions and the summary see it: the controller's committed metadata (the
    most advanced running voter's image), process liveness, the quorum's states."""

    def __init__(self, cluster: SimCluster) -> None:
        self._cluster = cluster

    def image(self) -> MetadataImage | None:
        best = None
        for v in self._cluster.settings.voters:
            role = self._cluster.sim.nodes[v].role
            if role is not None and role.raft is not None:
                img = role.controller.committed
                if best is None or img.offset > best.offset:
                    best = img
        return best

    def partitions(self) -> dict[str, PartitionState]:
        img = self.image()
        if img is None:
            return {}
        ctl = self._cluster.any_controller()
        out = {}
        for (topic, p), rec in sorted(img.partitions.items()):
            min_isr = ctl.policy(topic, img, len(rec.replicas)).min_isr if ctl else 1
            out[f"{topic}-{p}"] = PartitionState(
                leader=rec.leader,
                leader_epoch=rec.leader_epoch,
                partition_epoch=rec.partition_epoch,
                replicas=list(rec.replicas),
                isr=list(rec.isr),
                elr=list(rec.elr),
                last_known_elr=list(rec.last_known_elr),
                hwm=self._leader_hwm(topic, p, rec),
                offline=rec.leader is None,
                under_min_isr=len(rec.isr) < min_isr,
            )
        return out

    def _leader_hwm(self, topic: str, p: int, rec) -> Any:
        if rec.leader is None:
            return None
        replica = self._cluster.acting_leader(rec)
        return UNKNOWN if replica is None else replica.hwm  # UNKNOWN: not taken over yet, or down

    def replica(self, partition: str, broker: int) -> ReplicaState | None:
        topic, p = split_partition_ref(partition)
        replica = self._cluster.replica_on(broker, topic, p)
        if replica is None:
            return None
        img = self.image()
        rec = img.partitions.get((topic, p)) if img else None
        return ReplicaState(leo=replica.leo, hwm=replica.hwm, in_sync=rec is not None and broker in rec.isr)

    def brokers(self) -> dict[int, BrokerState]:
        sim, img = self._cluster.sim, self.image()
        out = {}
        for i in range(1, self._cluster.settings.brokers + 1):
            reg = img.brokers.get(i) if img else None
            out[i] = BrokerState(
                fenced=UNKNOWN if reg is None else reg.fenced,
                epoch=UNKNOWN if reg is None else reg.epoch,
                alive=sim.is_running(f"b{i}"),
            )
        return out

    def quorum(self) -> QuorumState:
        sim = self._cluster.sim
        states, leaders = {}, []
        for v in self._cluster.settings.voters:
            role = sim.nodes[v].role
            if role is None or role.raft is None:
                continue
            states[int(v[1:])] = role.raft.state.value
            if role.raft.is_leader():
                leaders.append((role.raft.epoch, int(v[1:])))
        epochs = [sim.nodes[v].role.raft.epoch for v in self._cluster.settings.voters if sim.nodes[v].role is not None]
        leader = max(leaders)[1] if leaders else None
        return QuorumState(leader=leader, epoch=max(epochs) if epochs else None, states=states)

    def history(self) -> dict[str, Any]:
        ctl = self._cluster.most_advanced_controller()
        counters = self._cluster.clients.counters() if self._cluster.clients else {}
        return {
            "acked": counters.get("acked", 0),
            "failed": counters.get("failed", 0),
            "acked_lost": counters.get("acked_lost", 0),
            "consumed": counters.get("consumed", 0),
            "elections_clean": ctl.elections["clean"] if ctl else UNKNOWN,
            "elections_unclean": ctl.elections["unclean"] if ctl else UNKNOWN,
            "quorum_elections": self._cluster.quorum_elections,
        }


class SimCluster:
    def __init__(self, scenario: Scenario, event_sinks: Sequence[EventSink] = ()) -> None:
        self.scenario = scenario
        spec = scenario.cluster
        self.settings = ClusterSettings.from_spec(spec)
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
        self.quorum_elections = 0
        self.sim.trace.sinks.append(self._count)
        self.quorum_invariants = watch_quorum(self.sim, self.settings.voters, prevote=self.settings.protocol.prevote)
        mode = StorageMode(spec.storage)
        factories = role_factories(self.settings)
        for name in factories:
            self.sim.add_host(name, mode)
        for name, factory in factories.items():
            self.sim.add_node(name, name, factory, start=False)
        for name in factories:
            self.sim.start(name)
        self._view = SimClusterView(self)
        metadata_checks = MetadataInvariants(
            self._view.image, lambda topic, img, rf: self.any_controller().policy(topic, img, rf), elr_enabled=self.settings.protocol.elr
        )
        self.sim.add_invariant_set(metadata_checks.check)
        self.clients: SimClients | None = None
        self.bootstrap()
        self.clients = SimClients(self)
        self.partition_invariants = PartitionInvariants(self)
        self.sim.add_invariant_set(self.partition_invariants.check)

    def _count(self, record) -> None:
        if record[2] == "raft_leader_elected":
            self.quorum_elections += 1

    # --- the data plane as checks and conditions see it ------------------------------------------

    def broker_role(self, broker: int):
        node = self.sim.nodes.get(f"b{broker}")
        return None if node is None else node.role

    def replica_on(self, broker: int, topic: str, partition: int):
        role = self.broker_role(broker)
        return None if role is None else role.data_plane.replicas.get((topic, partition))

    def acting_leader(self, rec):
        """The replica of `rec`'s leader once it acts as leader in `rec`'s leader epoch, else None
        (not taken over yet, down, or a zombie of an older epoch)."""
        if rec.leader is None:
            return None
        r = self.replica_on(rec.leader, rec.topic, rec.partition)
        return r if r is not None and r.is_leader and r.leader_epoch == rec.leader_epoch else None

    def partition_logs(self) -> dict[tuple[str, int], tuple[Any, list[Any]]]:
        """Per partition: the current leader's log (None when offline or not yet taken over) and
        the logs of every running replica."""
        img = self._view.image()
        out: dict[tuple[str, int], tuple[Any, list[Any]]] = {}
        if img is None:
            return out
        for key, rec in img.partitions.items():
            logs = [r.log for b in rec.replicas if (r := self.replica_on(b, *key)) is not None]
            leader = self.acting_leader(rec)
            out[key] = (leader.log if leader is not None else None, logs)
        return out

    # --- bring-up -------------------------------------------------------------------------------

    def active_controller(self):
        for v in self.settings.voters:
            role = self.sim.nodes[v].role
            if role is not None and role.raft is not None and role.controller.active:
                return v, role
        return None, None

    def any_controller(self):
        _, role = self.active_controller()
        if role is not None:
            return role.controller
        return self.most_advanced_controller()

    def most_advanced_controller(self):
        best = None
        for v in self.settings.voters:
            role = self.sim.nodes[v].role
            if role is not None and role.raft is not None:
                if best is None or role.controller.committed.offset > best.committed.offset:
                    best = role.controller
        return best

    def _all_brokers_unfenced(self) -> bool:
        img = self._view.image()
        if img is None:
            return False
        return all(
            (reg := img.brokers.get(i)) is not None and not reg.fenced for i in range(1, self.settings.brokers + 1)
        )

    def bootstrap(self) -> None:
        if not self.sim.run_for(BOOTSTRAP_TIMEOUT_MS, stop=self._all_brokers_unfenced):
            raise RuntimeError(f"the cluster did not come up within {BOOTSTRAP_TIMEOUT_MS:g} ms (brokers not all registered and unfenced)")
        for topic in self.scenario.topics:
            self.create_topic(topic)
        wanted = {(t.name, p) for t in self.scenario.topics for p in range(t.partitions)}

        def topics_ready() -> bool:
            img = self._view.image()
            return img is not None and all(k in img.partitions and img.partitions[k].leader is not None for k in wanted)

        if not self.sim.run_for(BOOTSTRAP_TIMEOUT_MS, stop=topics_ready):
            raise RuntimeError("the scenario's topics did not get leaders within the bootstrap timeout")
        self.sim.record("runner", "cluster_ready")

    def create_topic(self, topic) -> None:
        def call(ctl, now, out):
            config = topic.config.model_dump(by_alias=True, exclude_none=True)
            return ctl.create_topic(topic.name, topic.partitions, topic.replication_factor, topic.assignment, config, now, out)

        self.admin(call)

    def admin(self, call) -> None:
        """Run an admin call on the active controller, waiting (bounded) for one to exist."""
        if not self.sim.run_for(BOOTSTRAP_TIMEOUT_MS, stop=lambda: self.active_controller()[0] is not None):
            raise StepFailed("no active controller to take the admin call")
        name, _ = self.active_controller()
        self.sim.invoke(name, lambda role, now: role.admin(call, now))
        error = self.sim.nodes[name].role.last_admin_error
        if error is not None:
            raise StepFailed(f"the controller refused: {error}")

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
        if kind == "elect":
            topic, p = split_partition_ref(args.partition)
            self.admin(lambda ctl, now, out: ctl.elect_leaders(topic, p, args.type, now, out))
            return
        if kind == "alter_config":
            config = dict(args.config)
            self.admin(lambda ctl, now, out: ctl.alter_config(args.topic, config, now, out))
            return
        if kind == "reassign":
            topic, p = split_partition_ref(args.partition)
            target = list(args.replicas)
            self.admin(lambda ctl, now, out: ctl.reassign(topic, p, target, now, out))
            return
        if kind == "produce":
            return self.clients.produce(args)
        if kind == "list_offsets":
            state = self._view.partitions().get(args.partition)
            return self.clients.list_offsets(args, None if state is None else state.leader)
        if kind == "consume":
            return self.clients.consume(args)
        if kind == "load":
            return self.clients.load(args, {t.name: t.partitions for t in self.scenario.topics})
        raise StepFailed(
            f"step `{kind}` needs the brokers' data plane or a controller feature this version does not have yet"
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
