"""The KRaft controller: the metadata state machine on top of the Raft log.

Every controller applies committed records to `committed` (its image of the cluster). The active
controller (the Raft leader) also keeps `working`: the committed image plus the records it has
appended but not yet committed, so that one change builds on the previous one (it is
single-threaded, the protocol description §6.3). Answers to brokers are sent only once the records
they depend on are committed; if leadership is lost first they are never sent, and brokers retry.

As Kafka's QuorumController, it decides nothing itself: each request, timer or admin call is one
operation of a control manager, which makes its records and events in a Proposal (proposal.py) and
returns its answer; the controller appends the records, emits the events and answers after commit.
The managers: cluster_control.py (registration, heartbeats, sessions, controlled shutdown: Kafka's
ClusterControlManager), replication_control.py (ISR changes and elections, AlterPartition,
log directories, reassignments, topics: ReplicationControlManager), configuration_control.py
(IncrementalAlterConfigs: ConfigurationControlManager). The unclean recovery of KIP-966
(unclean_recovery.py) asks the brokers for their logs, so it stays here, where messages are sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.contract import Envelope, Output
from actors.settings import ClusterSettings
from observability.events import (
    AlterPartitionRejected,
    BrokerChange,
    ControllerActive,
    Election,
    PartitionChange,
    TopicDeleted,
    UncleanRecoveryElected,
    UncleanRecoveryStarted,
)

from . import admin_requests, configuration_control
from .cluster_control import ClusterControl
from .messages import LogEntry
from .metadata import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataImage,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
)
from .partition_change import ChangePolicy, topic_min_isr
from .proposal import Proposal
from .raft import RaftNode
from .replication_control import MAX_ELECTIONS_PER_PASS, ReplicationControl
from .requests import (
    NOT_CONTROLLER,
    AdminError,
    AdminRequest,
    AdminResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
)
from .unclean_recovery import (
    INSPECTION_WINDOW_MS,
    Inquiry,
    LogInfo,
    UncleanRecovery,
    choose_leader,
    plan_recovery,
    recovered_partition,
)

# Kafka's QuorumController: a pass of unclean elections that hit its cap is run again at once (10 ms
# later, as Kafka defers an immediate event); maxElectionsPerImbalance is the cap.
UNCLEAN_CHECK_AGAIN_MS = 10.0


class Controller:
    def __init__(self, local: str, settings: ClusterSettings) -> None:
        self.local = local
        self.settings = settings
        self.raft: RaftNode | None = None  # set by the owning role
        self.committed = MetadataImage()
        self.working: MetadataImage | None = None
        self.replication = ReplicationControl(settings)
        self.cluster = ClusterControl(settings, self.replication)
        self.replies: list[tuple[int, Envelope]] = []  # (offset that must commit first, answer)
        # Elections committed, by kind (metadata.PartitionRecord.election).
        self.elections = {"clean": 0, "elr": 0, "preferred": 0, "unclean": 0, "last_known_leader": 0}
        self.recovery = UncleanRecovery(settings.config.unclean_recovery_strategy)
        # When the active controller next looks for leaderless partitions whose topic allows an
        # unclean election (None: not scheduled). Invariant: None unless active.
        self.unclean_check_at_ms: float | None = None
        # When the active controller next elects preferred leaders (auto.leader.rebalance.enable;
        # None: never). Invariant: None unless active.
        self.rebalance_at_ms: float | None = None

    # --- RaftListener ---------------------------------------------------------------------------

    def on_commit(self, entries: list[LogEntry], now_ms: float, out: Output) -> None:
        for e in entries:
            self.committed.apply(e.offset, e.record)
            self._report_committed(e.offset, e.record, out)
        ready = [r for r in self.replies if r[0] < self.committed.offset]
        if ready:
            self.replies = [r for r in self.replies if r[0] >= self.committed.offset]
            for _, env in ready:
                out.send(env)

    def _report_committed(self, offset: int, rec: object, out: Output) -> None:
        """Report a committed partition or broker state (the history's `partition_change`,
        `election`, `broker_change`). Every voter reports each one; readers keep the first report
        of each metadata offset (the earliest moment the cluster knew it)."""
        if isinstance(rec, PartitionRecord):
            self._report_partition_committed(offset, rec, out)
        elif isinstance(rec, ConfigRecord) and rec.key == "min.insync.replicas":
            # A partition's MinISR (and so whether it is under it) changes with the config, not
            # only with its own records: report the partitions it applies to again.
            for part in self.committed.partitions.values():
                if rec.resource == "cluster" or part.topic == rec.name:
                    self._report_partition_state(offset, part, out)
        elif isinstance(rec, RegisterBrokerRecord | BrokerRegistrationChangeRecord):
            b = self.committed.brokers[rec.broker_id]
            offline_dirs = tuple(d for d in range(self.settings.log_dirs) if not b.has_online_dir(d))
            out.emit(BrokerChange(b.broker_id, b.epoch, b.fenced, offset, b.in_controlled_shutdown, offline_dirs))
        elif isinstance(rec, RemoveTopicRecord):
            out.emit(TopicDeleted(rec.name, rec.topic_id, offset))

    def _report_partition_committed(self, offset: int, rec: PartitionRecord, out: Output) -> None:
        """Count the election it records, if any, and report the committed state."""
        if rec.election in self.elections and rec.reason != "create":
            self.elections[rec.election] += 1
            out.emit(Election(rec.topic, rec.partition, rec.leader, rec.leader_epoch, rec.election, offset, self.committed.topics.get(rec.topic)))
        self._report_partition_state(offset, rec, out)

    def _report_partition_state(self, offset: int, rec: PartitionRecord, out: Output) -> None:
        min_isr = topic_min_isr(self.committed, self.settings.config, rec.topic, len(rec.replicas))
        out.emit(PartitionChange(
            topic=rec.topic, partition=rec.partition, leader=rec.leader, leader_epoch=rec.leader_epoch,
            partition_epoch=rec.partition_epoch, replicas=tuple(rec.replicas), isr=tuple(rec.isr), elr=tuple(rec.elr),
            last_known_elr=tuple(rec.last_known_elr), metadata_offset=offset, under_min_isr=len(rec.isr) < min_isr,
            min_isr=min_isr, recovery_state=rec.leader_recovery_state, reason=rec.reason,
            adding_replicas=tuple(rec.adding_replicas), removing_replicas=tuple(rec.removing_replicas),
            topic_id=self.committed.topics.get(rec.topic), directories=tuple(rec.directories),
        ))

    def on_become_leader(self, epoch: int, now_ms: float, out: Output) -> None:
        working = self.committed.copy()
        for e in self.raft.log.entries[working.offset :]:
            working.apply(e.offset, e.record)
        self.working = working
        self.cluster.activate(working, now_ms)
        self.recovery.reset()
        self.unclean_check_at_ms = None
        self._maybe_schedule_unclean_check(now_ms)
        cfg = self.settings.config
        self.rebalance_at_ms = now_ms + cfg.leader_imbalance_check_interval_seconds * 1000.0 if cfg.auto_leader_rebalance_enable else None
        out.emit(ControllerActive(epoch))

    def on_lose_leadership(self, now_ms: float, out: Output) -> None:
        self.working = None
        self.replies = []
        self.recovery.reset()
        self.unclean_check_at_ms = None
        self.rebalance_at_ms = None

    @property
    def active(self) -> bool:
        return self.working is not None

    # --- operations: a manager's proposal, appended, and its answer after commit -------------------

    def _write(self, operation: Callable[[Proposal], Any], now_ms: float, out: Output) -> tuple[Any, int | None]:
        """Run one operation of a control manager on the working image and append what it made
        (Kafka's QuorumController.appendWriteEvent). Returns its answer and the offset of its last
        record (None: it made none)."""
        p = Proposal(self.working, self._next_offset())
        answer = operation(p)
        for event in p.events:
            out.emit(event)
        if p.records:
            last = self.raft.append(p.records, now_ms, out)
            assert last == p.last_offset, "only the active controller proposes, at the log's end"
        return answer, p.last_offset

    def _answer(self, env: Envelope, after_offset: int | None, out: Output) -> None:
        if after_offset is None or after_offset < self.committed.offset:
            out.send(env)
        else:
            self.replies.append((after_offset, env))

    def _next_offset(self) -> int:
        return self.raft.log.end_offset + len(self.raft.pending)

    def policy(self, topic: str, image: MetadataImage | None = None, replication_factor: int | None = None) -> ChangePolicy:
        """The rules for a partition of `topic` (dynamic config first, then the cluster's), on the
        working image when active, else the committed one."""
        return self.replication.policy(image or self.working or self.committed, topic, replication_factor)

    # --- requests from brokers ---------------------------------------------------------------------

    def handle(self, env: Envelope, now_ms: float, out: Output) -> bool:
        p = env.payload
        if isinstance(p, BrokerRegistrationRequest):
            self._on_registration(env, p, now_ms, out)
        elif isinstance(p, BrokerHeartbeatRequest):
            self._on_heartbeat(env, p, now_ms, out)
        elif isinstance(p, AlterPartitionRequest):
            self._on_alter_partition(env, p, now_ms, out)
        elif isinstance(p, GetReplicaLogInfoResponse):
            self._on_replica_log_info(p, now_ms, out)
        elif isinstance(p, AdminRequest):
            self._on_admin_request(env, p, now_ms, out)
        else:
            return False
        self.maybe_recover_uncleanly(now_ms, out)
        self._maybe_schedule_unclean_check(now_ms)
        return True

    def _reply(self, env: Envelope, payload: Any) -> Envelope:
        return Envelope(self.local, env.src, payload)

    def _on_registration(self, env: Envelope, req: BrokerRegistrationRequest, now_ms: float, out: Output) -> None:
        if not self.active:
            out.send(self._reply(env, BrokerRegistrationResponse(NOT_CONTROLLER, controller=self.raft.leader, request_id=req.request_id)))
            return
        answer, last = self._write(lambda p: self.cluster.register(p, req, now_ms), now_ms, out)
        self._answer(self._reply(env, answer), last, out)

    def _on_heartbeat(self, env: Envelope, req: BrokerHeartbeatRequest, now_ms: float, out: Output) -> None:
        if not self.active:
            out.send(self._reply(env, BrokerHeartbeatResponse(NOT_CONTROLLER, controller=self.raft.leader)))
            return
        answer, last = self._write(lambda p: self.cluster.heartbeat(p, req, now_ms), now_ms, out)
        self._answer(self._reply(env, answer), last, out)

    def _on_alter_partition(self, env: Envelope, req: AlterPartitionRequest, now_ms: float, out: Output) -> None:
        if not self.active:
            echo = {"request_leader_epoch": req.leader_epoch, "request_partition_epoch": req.partition_epoch, "request_attempt": req.attempt}
            out.emit(AlterPartitionRejected(req.topic, req.partition, NOT_CONTROLLER, req.broker_id))
            out.send(self._reply(env, AlterPartitionResponse(NOT_CONTROLLER, req.topic, req.partition, controller=self.raft.leader, **echo)))
            return
        answer, last = self._write(lambda p: self.replication.alter_partition(p, req, self.raft.leader), now_ms, out)
        self._answer(self._reply(env, answer), last, out)

    def _on_admin_request(self, env: Envelope, req: AdminRequest, now_ms: float, out: Output) -> None:
        """A Kafka client's admin request forwarded by a broker (KIP-590): answered, as Kafka's
        controller answers, once its records commit (never if leadership is lost first: the broker's
        client times out). validate_only runs the checks on a copy of the working image and writes
        nothing; ListPartitionReassignments reads the committed image."""
        if not self.active:
            out.send(self._reply(env, AdminResponse(req.request_id, NOT_CONTROLLER, client=req.client, controller=self.raft.leader)))
            return
        if req.call == "list_reassignments":
            out.send(self._reply(env, admin_requests.list_reassignments(self.committed, req)))
            return
        run = admin_requests.operation(self.replication, self.settings, req)
        if req.validate_only:
            p = Proposal(self.working.copy(), self._next_offset())
            error, last, image = run(p), None, p.image
        else:
            error, last = self._write(run, now_ms, out)
            image = self.working
        answer = AdminResponse(req.request_id, None if error is None else error.error, "" if error is None else error.message, req.client)
        if req.call == "create_topic":
            answer = admin_requests.created(image, req, answer)
        self._answer(self._reply(env, answer), last, out)

    # --- unclean recovery (KIP-966) -------------------------------------------------------------

    def maybe_recover_uncleanly(self, now_ms: float, out: Output) -> None:
        """Start, advance or finish the unclean recovery of leaderless partitions
        (`controller_quorum.unclean_recovery`)."""
        if not self.active or not self.settings.protocol.elr:
            return
        w, rec = self.working, self.recovery
        rec.now_ms = now_ms
        if not rec.inquiries and w.offset == rec.scanned_offset:
            return  # no recovery under way and nothing changed since the last look (the hot path)
        rec.scanned_offset = w.offset
        strategy = rec.strategy
        # Only partitions without a leader or under inquiry can start or drop one; taken in the
        # image's order (a scan of every partition at every change cost O(partitions)).
        for key in [k for k in rec.inquiries if k not in w.partitions]:
            del rec.inquiries[key]  # its topic was deleted
        candidates = rec.inquiries.keys() | w.leaderless.keys()
        for key in [k for k in w.partitions if k in candidates] if candidates else ():
            part = w.partitions[key]
            inq = rec.inquiries.get(key)
            if inq is not None and inq.partition_epoch != part.partition_epoch:
                del rec.inquiries[key]
                inq = None
            if inq is None and part.leader is None:
                candidates = plan_recovery(part, w.brokers, strategy)
                if candidates:
                    rec.inquiries[key] = Inquiry(part.partition_epoch, candidates, now_ms)
                    out.emit(UncleanRecoveryStarted(key[0], key[1], strategy, tuple(candidates)))
        for key, broker, request_id in rec.to_ask(now_ms, w.brokers):
            out.send(Envelope(self.local, f"b{broker}", GetReplicaLogInfoRequest(request_id, key[0], key[1])))
        for key, inq in list(rec.inquiries.items()):
            part = w.partitions[key]
            leader = choose_leader(inq.candidates, inq.answers, w.brokers, strategy, window_over=now_ms >= inq.started_ms + INSPECTION_WINDOW_MS, part=part)
            if leader is None:
                continue
            del rec.inquiries[key]
            new = recovered_partition(part, leader, strategy)
            self._write(lambda p, new=new: p.add(new), now_ms, out)
            answers = sorted(inq.answers.items())
            out.emit(UncleanRecoveryElected(
                key[0], key[1], strategy, leader, tuple(b for b, _ in answers), tuple(a.last_epoch for _, a in answers),
                tuple(a.log_end_offset for _, a in answers),
            ))

    def _on_replica_log_info(self, resp: GetReplicaLogInfoResponse, now_ms: float, out: Output) -> None:
        inq = self.recovery.inquiries.get((resp.topic, resp.partition))
        if inq is None or inq.request_ids.get(resp.broker_id) != resp.request_id or resp.error is not None:
            return
        inq.answers[resp.broker_id] = LogInfo(resp.broker_id, resp.broker_epoch, resp.last_epoch, resp.log_end_offset)

    # --- timers --------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        if not self.active:
            return None
        deadlines = [self.cluster.next_session_deadline(self.working), self.recovery.next_deadline(self.recovery.now_ms),
                     self.unclean_check_at_ms, self.rebalance_at_ms]
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    def tick(self, now_ms: float, out: Output) -> None:
        if not self.active:
            return
        self._write(lambda p: self.cluster.fence_expired_sessions(p, now_ms), now_ms, out)
        self.maybe_recover_uncleanly(now_ms, out)
        if self.unclean_check_at_ms is not None and now_ms >= self.unclean_check_at_ms:
            self.unclean_check_at_ms = None
            changed, _ = self._write(self.replication.elect_unclean_leaders, now_ms, out)
            if changed >= MAX_ELECTIONS_PER_PASS:
                self.unclean_check_at_ms = now_ms + UNCLEAN_CHECK_AGAIN_MS
        self._maybe_schedule_unclean_check(now_ms)
        if self.rebalance_at_ms is not None and now_ms >= self.rebalance_at_ms:
            interval_ms = self.settings.config.leader_imbalance_check_interval_seconds * 1000.0
            changed, _ = self._write(self.replication.elect_preferred_leaders, now_ms, out)
            self.rebalance_at_ms = now_ms + (UNCLEAN_CHECK_AGAIN_MS if changed >= MAX_ELECTIONS_PER_PASS else interval_ms)

    def _maybe_schedule_unclean_check(self, now_ms: float) -> None:
        """As Kafka's QuorumController.maybeScheduleNextElectUncleanLeaders after every write event:
        while some partition has no leader, look again `unclean.leader.election.interval.ms` later
        (Kafka's default: 5 minutes). So a topic whose `unclean.leader.election.enable` is turned on
        while it is offline gets a leader within that interval, not only when a broker comes back."""
        if self.active and self.unclean_check_at_ms is None and self.working.leaderless:
            self.unclean_check_at_ms = now_ms + self.settings.config.unclean_leader_election_interval_ms

    # --- admin calls (on the active controller; None when done, else Kafka's error) ----------------

    def _admin(self, operation: Callable[[Proposal], AdminError | None], now_ms: float, out: Output) -> AdminError | None:
        if not self.active:
            return AdminError(NOT_CONTROLLER)
        error, _ = self._write(operation, now_ms, out)
        return error

    def create_topic(self, name: str, partitions: int, replication_factor: int, assignment: dict[int, list[int]] | None,
                     config: dict[str, Any], now_ms: float, out: Output) -> AdminError | None:
        return self._admin(lambda p: self.replication.create_topic(p, name, partitions, replication_factor, assignment, config), now_ms, out)

    def delete_topic(self, name: str, now_ms: float, out: Output) -> AdminError | None:
        return self._admin(lambda p: self.replication.delete_topic(p, name), now_ms, out)

    def create_partitions(self, topic: str, count: int, assignment: dict[int, list[int]] | None, now_ms: float, out: Output) -> AdminError | None:
        return self._admin(lambda p: self.replication.create_partitions(p, topic, count, assignment), now_ms, out)

    def elect_leaders(self, topic: str, partition: int, election: str, now_ms: float, out: Output) -> AdminError | None:
        return self._admin(lambda p: self.replication.elect_leaders(p, topic, partition, election), now_ms, out)

    def reassign(self, topic: str, partition: int, target: list[int], now_ms: float, out: Output) -> AdminError | None:
        return self._admin(lambda p: self.replication.reassign(p, topic, partition, target), now_ms, out)

    def cancel_reassignment(self, topic: str, partition: int, now_ms: float, out: Output) -> AdminError | None:
        return self._admin(lambda p: self.replication.cancel_reassignment(p, topic, partition), now_ms, out)

    def alter_config(self, topic: str | None, config: dict[str, Any], now_ms: float, out: Output) -> AdminError | None:
        return self._admin(lambda p: configuration_control.alter_config(p, topic, config), now_ms, out)
