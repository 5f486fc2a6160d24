"""Reading a cluster's state from its roles, the same way in both runtimes.

Conditions, the run summary and the invariant checks read roles: the controller's committed image,
the replicas' logs, the clients' histories. In the simulator `sim.nodes[name].role` is the live
role; on Ray it is the newest copy of the role the driver collected from its actor (see
actors/runtime/ray/mirror.py). `RoleCluster` is what both clusters share on top of that.
"""

from __future__ import annotations

from typing import Any

from controller_quorum.metadata import MetadataImage
from kraftlab.scenario.schema import split_partition_ref
from workloads.cluster_view import UNKNOWN, BrokerState, PartitionState, QuorumState, ReplicaState
from workloads.committed_history import CommittedHistory


class RoleCluster:
    """Needs `self.sim` (with `nodes[name].role` and `is_running`), `self.settings` and
    `self.clients` (None until the clients exist)."""

    sim: Any
    settings: Any
    clients: Any

    def role(self, name: str) -> Any:
        return self.sim.nodes[name].role

    def view(self) -> RoleClusterView:
        return self._view

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
        img = self.view().image()
        out: dict[tuple[str, int], tuple[Any, list[Any]]] = {}
        if img is None:
            return out
        for key, rec in img.partitions.items():
            logs = [r.log for b in rec.replicas if (r := self.replica_on(b, *key)) is not None]
            leader = self.acting_leader(rec)
            out[key] = (leader.log if leader is not None else None, logs)
        return out

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

    # --- bring-up (both runtimes) --------------------------------------------------------------

    bootstrap_timeout_ms = 60_000.0

    def cluster_ready_fields(self) -> dict[str, Any]:
        return {}

    def bootstrap(self) -> None:
        """Bring the cluster up before the steps: every broker registered and unfenced, then the
        scenario's topics created through the active controller and given leaders."""
        timeout = self.bootstrap_timeout_ms
        if not self.run_until(self.all_brokers_unfenced, timeout):
            raise RuntimeError(f"the cluster did not come up within {timeout:g} ms (brokers not all registered and unfenced)")
        for topic in self.scenario.topics:
            self.create_topic(topic)
        wanted = {(t.name, p) for t in self.scenario.topics for p in range(t.partitions)}

        def topics_ready() -> bool:
            img = self.view().image()
            return img is not None and all(k in img.partitions and img.partitions[k].leader is not None for k in wanted)

        if not self.run_until(topics_ready, timeout):
            raise RuntimeError("the scenario's topics did not get leaders within the bootstrap timeout")
        self.sim.record("runner", "cluster_ready", **self.cluster_ready_fields())

    def create_topic(self, topic) -> None:
        def call(ctl, now, out):
            config = topic.config.model_dump(by_alias=True, exclude_none=True)
            return ctl.create_topic(topic.name, topic.partitions, topic.replication_factor, topic.assignment, config, now, out)

        self.admin(call)

    def all_brokers_unfenced(self) -> bool:
        img = self.view().image()
        if img is None:
            return False
        return all(
            (reg := img.brokers.get(i)) is not None and not reg.fenced for i in range(1, self.settings.brokers + 1)
        )


class RoleClusterView:
    """The cluster as conditions and the summary see it: the controller's committed metadata (the
    most advanced running voter's image), process liveness, the quorum's states."""

    def __init__(self, cluster: RoleCluster) -> None:
        self._cluster = cluster
        self.committed_states = CommittedHistory()
        cluster.sim.trace.sinks.append(self.committed_states)

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
            fields = {**rec.state_fields(), "under_min_isr": len(rec.isr) < min_isr}
            out[f"{topic}-{p}"] = PartitionState.committed(fields, hwm=self._leader_hwm(topic, p, rec))
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


