"""The KRaft controller: the metadata state machine on top of the Raft log.

Every controller applies committed records to `committed` (its image of the cluster). The active
controller (the Raft leader) also keeps `working`: the committed image plus the records it has
appended but not yet committed, so that one change builds on the previous one (it is
single-threaded, the protocol description §6.3). Answers to brokers are sent only once the records
they depend on are committed; if leadership is lost first they are never sent, and brokers retry.

Broker lifecycle (§6.5.1): registration grants a new broker epoch (the offset of its
RegisterBrokerRecord) only after the previous one was fenced; a registration without the previous
epoch marks an unclean shutdown, which removes the broker from every ELR (KIP-966); heartbeats keep
the session alive; a broker silent for broker.session.timeout.ms is fenced; a fenced broker that has
caught up with the metadata log is unfenced; a controlled shutdown moves leadership away and takes
the broker out of ISRs before it is told to stop.

Log directories (KIP-858): a broker registers its directories and reports in every heartbeat those
that failed; the first heartbeat naming one takes the broker out of the ISR and leadership of every
partition with a replica there, then records the directories left online
(`_handle_directories_offline`). A replica in an offline directory is not an acceptable leader
(partition_change.py). New replicas are placed in directories by log_dirs.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from actors.contract import Envelope, Output
from actors.settings import ClusterSettings
from observability.events import (
    AlterPartitionRejected,
    BrokerChange,
    BrokerFenced,
    BrokerUnfenced,
    ControllerActive,
    Election,
    PartitionChange,
    ReassignmentCancelled,
    ReassignmentCompleted,
    ReassignmentStarted,
    RegistrationAccepted,
    TopicCreated,
    TopicDeleted,
    UncleanRecoveryElected,
    UncleanRecoveryStarted,
)

from .messages import LogEntry
from .metadata import (
    DEFAULT_DIR,
    RECOVERED,
    RECOVERING,
    BrokerRegistration,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataImage,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    new_topic_id,
)
from .log_dirs import DirectoryPlacer
from .partition_change import ChangePolicy, change_partition, topic_min_isr, topic_setting
from .placement import PlacementError, assign_replicas
from .raft import RaftNode
from .reassignment import ReassignmentError, reassignment_to, revert, validate_target
from .requests import (
    DUPLICATE_BROKER_REGISTRATION,
    ELECTION_NOT_NEEDED,
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    PREFERRED_LEADER_NOT_AVAILABLE,
    TOPIC_ALREADY_EXISTS,
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_REQUEST,
    INVALID_UPDATE_VERSION,
    NOT_CONTROLLER,
    STALE_BROKER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    AdminError,
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
MAX_ELECTIONS_PER_PASS = 1_000


class Controller:
    def __init__(self, local: str, settings: ClusterSettings) -> None:
        self.local = local
        self.settings = settings
        self.raft: RaftNode | None = None  # set by the owning role
        self.committed = MetadataImage()
        self.working: MetadataImage | None = None
        self.last_contact_ms: dict[int, float] = {}
        # What each broker's latest heartbeat said it has applied of the metadata log (exclusive),
        # and the offset of the last record that started a broker's controlled shutdown.
        self.metadata_offsets: dict[int, int] = {}
        self.controlled_shutdown_offsets: dict[int, int] = {}
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
        # A new active controller gives every broker a full session before fencing it.
        self.last_contact_ms = {b: now_ms for b in working.brokers}
        self.metadata_offsets = {}
        # A new active controller (as Kafka's, whose heartbeat manager starts empty) takes a broker
        # already in controlled shutdown as having entered it at the log's end.
        self.controlled_shutdown_offsets = {b.broker_id: working.offset - 1 for b in working.brokers.values() if b.in_controlled_shutdown}
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

    # --- proposing ---------------------------------------------------------------------------------

    def _propose(self, records: list[Any], now_ms: float, out: Output) -> int:
        """Append records and apply them to the working image; returns the last one's offset."""
        last = self.raft.append(records, now_ms, out)
        assert last is not None, "only the active controller proposes"
        first = last - len(records) + 1
        for i, rec in enumerate(records):
            self.working.apply(first + i, rec)
        return last

    def _answer(self, env: Envelope, after_offset: int | None, out: Output) -> None:
        if after_offset is None or after_offset < self.committed.offset:
            out.send(env)
        else:
            self.replies.append((after_offset, env))

    def _next_offset(self) -> int:
        return self.raft.log.end_offset + len(self.raft.pending)

    # --- policy ------------------------------------------------------------------------------------

    def policy(self, topic: str, image: MetadataImage | None = None, replication_factor: int | None = None) -> ChangePolicy:
        """The rules for a partition of `topic` (dynamic config first, then the cluster's)."""
        image = image or self.working or self.committed
        cfg = self.settings.config
        unclean = topic_setting(image, cfg, topic, "unclean.leader.election.enable", "unclean_leader_election_enable")
        if replication_factor is None:
            replication_factor = next((len(p.replicas) for (t, _), p in image.partitions.items() if t == topic), 1)
        return ChangePolicy(
            min_isr=topic_min_isr(image, cfg, topic, replication_factor),
            elr_enabled=self.settings.protocol.elr,
            unclean_leader_election=bool(unclean),
            last_known_leader_only=cfg.unclean_recovery_strategy == "last_known_leader",
        )

    def _change(self, part: PartitionRecord, now_ms: float, out: Output, **kwargs) -> PartitionRecord | None:
        new = change_partition(part, self.working.brokers, self.policy(part.topic, replication_factor=len(part.replicas)), **kwargs)
        if new is not None:
            self._propose_change(part, new, now_ms, out)
        return new

    def _propose_change(self, old: PartitionRecord, new: PartitionRecord, now_ms: float, out: Output) -> int:
        """Propose a partition's new state, and say when it starts, changes or ends a reassignment."""
        last = self._propose([new], now_ms, out)
        was = (old.replicas, old.adding_replicas, old.removing_replicas)
        now = (new.replicas, new.adding_replicas, new.removing_replicas)
        if now != was and (new.adding_replicas or new.removing_replicas):
            target = tuple(b for b in new.replicas if b not in new.removing_replicas)
            out.emit(ReassignmentStarted(new.topic, new.partition, target, new.adding_replicas, new.removing_replicas))
        elif (old.adding_replicas or old.removing_replicas) and not (new.adding_replicas or new.removing_replicas):
            event = ReassignmentCancelled if new.reason == "reassignment_cancelled" else ReassignmentCompleted
            out.emit(event(new.topic, new.partition, tuple(new.replicas), tuple(new.isr), new.leader))
        return last

    def _remove_broker_everywhere(self, broker: int, reason: str, now_ms: float, out: Output) -> None:
        for part in list(self.working.partitions.values()):
            if broker in part.isr or part.leader == broker:
                self._change(part, now_ms, out, reason=reason, remove=broker)

    def _fence(self, b: BrokerRegistration, now_ms: float, out: Output) -> None:
        """Fence a broker whose session expired. As Kafka's ReplicationControlManager
        .handleBrokerFenced: the partition changes taking it out of every ISR and leadership come
        first (computed as if it were fenced already), then the fencing record. A large fencing
        spans many records that may commit in several parts; in this order no committed prefix
        shows a fenced broker in an ISR (NoFencedInIsr, seen at 10,000 partitions)."""
        brokers = {**self.working.brokers, b.broker_id: replace(b, fenced=True)}
        for part in list(self.working.partitions.values()):
            if b.broker_id in part.isr or part.leader == b.broker_id:
                new = change_partition(part, brokers, self.policy(part.topic, replication_factor=len(part.replicas)), reason="broker_fenced", remove=b.broker_id)
                if new is not None:
                    self._propose_change(part, new, now_ms, out)
        self._propose([BrokerRegistrationChangeRecord(b.broker_id, b.epoch, fenced=True)], now_ms, out)

    def _elect_offline_with(self, broker: int, now_ms: float, out: Output) -> None:
        for part in list(self.working.partitions.values()):
            if part.leader is None and broker in part.replicas:
                self._change(part, now_ms, out, reason="broker_unfenced")

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
        old = self.working.brokers.get(req.broker_id)
        if old is not None and not old.fenced:
            # §6.5.1: no new epoch until the previous one has been fenced.
            out.send(self._reply(env, BrokerRegistrationResponse(DUPLICATE_BROKER_REGISTRATION, request_id=req.request_id)))
            return
        epoch = self._next_offset()
        self._propose([RegisterBrokerRecord(req.broker_id, epoch, req.rack, fenced=True, log_dirs=tuple(req.log_dirs))], now_ms, out)
        clean = old is not None and req.previous_broker_epoch == old.epoch
        out.emit(RegistrationAccepted(req.broker_id, epoch, clean))
        if old is not None and not clean:
            # KIP-966: a broker back from an unclean shutdown leaves every ELR (its log may have
            # lost committed records) and is remembered in the LastKnownELR.
            for part in list(self.working.partitions.values()):
                if req.broker_id in part.elr:
                    self._change(part, now_ms, out, reason="unclean_shutdown", unclean_shutdown=frozenset({req.broker_id}))
        self.last_contact_ms[req.broker_id] = now_ms
        self._answer(self._reply(env, BrokerRegistrationResponse(None, epoch, request_id=req.request_id)), self._next_offset() - 1, out)

    def _on_heartbeat(self, env: Envelope, req: BrokerHeartbeatRequest, now_ms: float, out: Output) -> None:
        if not self.active:
            out.send(self._reply(env, BrokerHeartbeatResponse(NOT_CONTROLLER, controller=self.raft.leader)))
            return
        b = self.working.brokers.get(req.broker_id)
        if b is None or b.epoch != req.broker_epoch:
            out.send(self._reply(env, BrokerHeartbeatResponse(STALE_BROKER_EPOCH)))
            return
        self.last_contact_ms[req.broker_id] = now_ms
        self.metadata_offsets[req.broker_id] = req.metadata_offset
        before = self._next_offset()
        should_shut_down = False
        if req.want_shutdown:
            should_shut_down = self._controlled_shutdown(b, now_ms, out)
        elif b.fenced and req.metadata_offset >= b.epoch:
            self._propose([BrokerRegistrationChangeRecord(b.broker_id, b.epoch, fenced=False)], now_ms, out)
            out.emit(BrokerUnfenced(b.broker_id, b.epoch))
            self._elect_offline_with(b.broker_id, now_ms, out)
        self._handle_directories_offline(b.broker_id, req.offline_log_dirs, now_ms, out)
        after = self._next_offset()
        fenced = self.working.brokers[b.broker_id].fenced
        answer = self._reply(env, BrokerHeartbeatResponse(None, is_fenced=fenced, should_shut_down=should_shut_down))
        self._answer(answer, after - 1 if after > before else None, out)

    def _handle_directories_offline(self, broker_id: int, offline_dirs: tuple[int, ...], now_ms: float, out: Output) -> None:
        """Kafka's ReplicationControlManager.handleDirectoriesOffline, which processBrokerHeartbeat
        calls after the broker's state transition: for the reported directories still online in the
        registration (`directoryIntersection`), every partition with a replica of this broker there
        gets the changes of generateLeaderAndIsrUpdates with the broker as `brokerToRemove` (out of
        the ISR, into the ELR if the ISR falls below MinISR, and never the leader), then one
        BrokerRegistrationChangeRecord keeps the directories left (`directoryDifference`). A
        heartbeat naming no new directory changes nothing: the broker repeats them until it
        restarts."""
        reg = self.working.brokers[broker_id]
        newly_offline = [d for d in offline_dirs if reg.has_online_dir(d)]
        if not newly_offline:
            return
        online = tuple(d for d in reg.log_dirs if d not in offline_dirs)
        # Judged as if the record below were applied, so that no replica in those directories is an
        # acceptable leader (Kafka excludes brokerToRemove from leadership in the same way).
        brokers = {**self.working.brokers, broker_id: replace(reg, log_dirs=online)}
        for part in list(self.working.partitions.values()):
            if broker_id in part.replicas and part.dir_of(broker_id) in newly_offline:
                policy = self.policy(part.topic, replication_factor=len(part.replicas))
                new = change_partition(part, brokers, policy, reason="log_dir_offline", remove=broker_id)
                if new is not None:
                    self._propose_change(part, new, now_ms, out)
        self._propose([BrokerRegistrationChangeRecord(broker_id, reg.epoch, log_dirs=online)], now_ms, out)

    def _controlled_shutdown(self, b: BrokerRegistration, now_ms: float, out: Output) -> bool:
        """Whether a broker asking to shut down may go now (Kafka's BrokerHeartbeatManager
        .calculateNextBrokerState). A fenced broker goes at once; one that leads nothing is fenced
        and goes at once. One that leads enters controlled shutdown: its leaderships move and it leaves every ISR; it may
        go on a later heartbeat, once it leads nothing and every active broker has applied the
        metadata up to the records that moved them (`lowestActiveOffset`), so that no partition
        is left with a leader nobody knows yet. The registration keeps `in_controlled_shutdown`
        until the broker registers again."""
        if b.fenced:
            return True

        def leads() -> bool:
            return any(p.leader == b.broker_id for p in self.working.partitions.values())

        if not b.in_controlled_shutdown:
            if not leads():
                # UNFENCED -> SHUTDOWN_NOW: fenced at once (handleBrokerFenced), never flagged.
                out.emit(BrokerFenced(b.broker_id, b.epoch, "controlled_shutdown"))
                self._fence(b, now_ms, out)
                return True
            self._propose([BrokerRegistrationChangeRecord(b.broker_id, b.epoch, in_controlled_shutdown=True)], now_ms, out)
            self._remove_broker_everywhere(b.broker_id, "controlled_shutdown", now_ms, out)
            self.controlled_shutdown_offsets[b.broker_id] = self._next_offset() - 1
            return False
        if leads() or self.controlled_shutdown_offsets.get(b.broker_id, -1) >= self._lowest_active_offset():
            return False
        self.controlled_shutdown_offsets.pop(b.broker_id, None)
        self._propose([BrokerRegistrationChangeRecord(b.broker_id, b.epoch, fenced=True)], now_ms, out)
        return True

    def _lowest_active_offset(self) -> int:
        """The least metadata offset (exclusive) that the active brokers (unfenced, not shutting
        down) said in their heartbeats they have applied."""
        active = [self.metadata_offsets.get(b.broker_id, 0) for b in self.working.brokers.values() if b.active]
        return min(active, default=1 << 62)

    def _on_alter_partition(self, env: Envelope, req: AlterPartitionRequest, now_ms: float, out: Output) -> None:
        echo = {"request_leader_epoch": req.leader_epoch, "request_partition_epoch": req.partition_epoch, "request_attempt": req.attempt}

        def fail(error: str) -> None:
            out.emit(AlterPartitionRejected(req.topic, req.partition, error, req.broker_id))
            out.send(self._reply(env, AlterPartitionResponse(error, req.topic, req.partition, controller=self.raft.leader, **echo)))

        if not self.active:
            return fail(NOT_CONTROLLER)
        w = self.working
        sender = w.brokers.get(req.broker_id)
        if sender is None or sender.epoch != req.broker_epoch:
            return fail(STALE_BROKER_EPOCH)
        part = w.partitions.get((req.topic, req.partition))
        if part is None:
            return fail(UNKNOWN_TOPIC_OR_PARTITION)
        if part.leader != req.broker_id or part.leader_epoch != req.leader_epoch:
            return fail(FENCED_LEADER_EPOCH)
        if part.partition_epoch != req.partition_epoch:
            return fail(INVALID_UPDATE_VERSION)  # §6.3: the leader worked from a stale view
        new_isr = tuple(b for b, _ in req.new_isr)
        if req.broker_id not in new_isr or not set(new_isr) <= set(part.replicas) or len(set(new_isr)) != len(new_isr):
            return fail(INVALID_REQUEST)
        if part.leader_recovery_state == RECOVERING and req.leader_recovery_state == RECOVERING and len(new_isr) > 1:
            return fail(INVALID_REQUEST)  # KIP-704: no ISR expansion before the leader recovered
        for broker, broker_epoch in req.new_isr:
            if broker in part.isr:
                continue
            reg = w.brokers.get(broker)
            stale = self.settings.protocol.broker_epoch_in_alter_partition and (reg is None or reg.epoch != broker_epoch)
            if reg is None or not reg.active or stale:
                return fail(INELIGIBLE_REPLICA)  # §6.5.1 case 3, KIP-903
        new = change_partition(
            part,
            w.brokers,
            self.policy(req.topic, replication_factor=len(part.replicas)),
            reason="alter_partition",
            target_isr=tuple(b for b in part.replicas if b in new_isr),
            recovery_state=RECOVERED if req.leader_recovery_state == RECOVERED else None,
        )
        if new is None:
            out.send(self._reply(env, AlterPartitionResponse(None, req.topic, req.partition, part, **echo)))
            return
        last = self._propose_change(part, new, now_ms, out)
        self._answer(self._reply(env, AlterPartitionResponse(None, req.topic, req.partition, new, **echo)), last, out)

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
            self._propose([new], now_ms, out)
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
        timeout = self.settings.config.broker_session_timeout_ms
        deadlines = [
            self.last_contact_ms.get(b.broker_id, 0.0) + timeout
            for b in self.working.brokers.values()
            if not b.fenced
        ]
        recovery = self.recovery.next_deadline(self.recovery.now_ms)
        if recovery is not None:
            deadlines.append(recovery)
        if self.unclean_check_at_ms is not None:
            deadlines.append(self.unclean_check_at_ms)
        if self.rebalance_at_ms is not None:
            deadlines.append(self.rebalance_at_ms)
        return min(deadlines) if deadlines else None

    def tick(self, now_ms: float, out: Output) -> None:
        if not self.active:
            return
        timeout = self.settings.config.broker_session_timeout_ms
        for b in sorted(self.working.brokers.values(), key=lambda r: r.broker_id):
            if not b.fenced and now_ms >= self.last_contact_ms.get(b.broker_id, 0.0) + timeout:
                out.emit(BrokerFenced(b.broker_id, b.epoch, "session_timeout"))
                self._fence(b, now_ms, out)
        self.maybe_recover_uncleanly(now_ms, out)
        if self.unclean_check_at_ms is not None and now_ms >= self.unclean_check_at_ms:
            self.unclean_check_at_ms = None
            if self._elect_unclean_leaders(now_ms, out) >= MAX_ELECTIONS_PER_PASS:
                self.unclean_check_at_ms = now_ms + UNCLEAN_CHECK_AGAIN_MS
        self._maybe_schedule_unclean_check(now_ms)
        if self.rebalance_at_ms is not None and now_ms >= self.rebalance_at_ms:
            interval_ms = self.settings.config.leader_imbalance_check_interval_seconds * 1000.0
            capped = self._elect_preferred_leaders(now_ms, out) >= MAX_ELECTIONS_PER_PASS
            self.rebalance_at_ms = now_ms + (UNCLEAN_CHECK_AGAIN_MS if capped else interval_ms)

    def _elect_preferred_leaders(self, now_ms: float, out: Output) -> int:
        """ReplicationControlManager.maybeBalancePartitionLeaders: a preferred election for each
        partition led by a replica other than its first (`imbalancedPartitions`), where the first
        can lead. Returns the changes made (at most MAX_ELECTIONS_PER_PASS)."""
        changed = 0
        for part in list(self.working.partitions.values()):
            if changed >= MAX_ELECTIONS_PER_PASS:
                break
            if part.replicas and part.leader != part.replicas[0]:
                if self._change(part, now_ms, out, reason="leader_rebalance", election="preferred") is not None:
                    changed += 1
        return changed

    # --- unclean leader election of leaderless partitions ---------------------------------------

    def _maybe_schedule_unclean_check(self, now_ms: float) -> None:
        """As Kafka's QuorumController.maybeScheduleNextElectUncleanLeaders after every write event:
        while some partition has no leader, look again `unclean.leader.election.interval.ms` later
        (Kafka's default: 5 minutes). So a topic whose `unclean.leader.election.enable` is turned on
        while it is offline gets a leader within that interval, not only when a broker comes back."""
        if self.active and self.unclean_check_at_ms is None and self.working.leaderless:
            self.unclean_check_at_ms = now_ms + self.settings.config.unclean_leader_election_interval_ms

    def _elect_unclean_leaders(self, now_ms: float, out: Output) -> int:
        """ReplicationControlManager.maybeTriggerUncleanLeaderElectionForLeaderlessPartitions: each
        leaderless partition whose topic allows unclean elections gets a live replica as leader (the
        change's usual election: the ISR, the ELR, then any live replica). Returns the changes made."""
        w = self.working
        changed = 0
        for key in [k for k in w.partitions if k in w.leaderless]:
            part = w.partitions[key]
            if changed >= MAX_ELECTIONS_PER_PASS:
                break
            if self.policy(part.topic, replication_factor=len(part.replicas)).unclean_leader_election:
                if self._change(part, now_ms, out, reason="unclean_election_check") is not None:
                    changed += 1
        return changed

    # --- admin calls (on the active controller) ---------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        assignment: dict[int, list[int]] | None,
        config: dict[str, Any],
        now_ms: float,
        out: Output,
    ) -> AdminError | None:
        """CreateTopics (Kafka's ReplicationControlManager.createTopic): None when the records were
        proposed, else Kafka's error."""
        if not self.active:
            return AdminError(NOT_CONTROLLER)
        w = self.working
        if name in w.topics:
            return AdminError(TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions < 1:
            return AdminError(INVALID_PARTITIONS, f"the number of partitions must be at least 1, got {partitions}")
        replicas, error = self._new_replicas(range(partitions), replication_factor, assignment)
        if error is not None:
            return error
        topic_id = new_topic_id(name, self._next_offset())
        records: list[Any] = [TopicRecord(name, topic_id)]
        records += [ConfigRecord("topic", name, k, v) for k, v in config.items() if v is not None]
        placer = self._directory_placer()
        records += [self._new_partition(name, p, reps, placer) for p, reps in zip(range(partitions), replicas, strict=True)]
        self._propose(records, now_ms, out)
        out.emit(TopicCreated(name, tuple(tuple(r) for r in replicas), topic_id))
        return None

    def delete_topic(self, name: str, now_ms: float, out: Output) -> AdminError | None:
        """DeleteTopics (Kafka's ReplicationControlManager.deleteTopic): one RemoveTopicRecord; the
        brokers delete the topic's replicas when it commits."""
        if not self.active:
            return AdminError(NOT_CONTROLLER)
        topic_id = self.working.topics.get(name)
        if topic_id is None:
            return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name}")
        self._propose([RemoveTopicRecord(name, topic_id)], now_ms, out)
        return None

    def create_partitions(self, topic: str, count: int, assignment: dict[int, list[int]] | None, now_ms: float, out: Output) -> AdminError | None:
        """CreatePartitions (Kafka's ReplicationControlManager.createPartitions): the topic grows
        to `count` partitions, placed as its existing ones are replicated."""
        if not self.active:
            return AdminError(NOT_CONTROLLER)
        w = self.working
        if topic not in w.topics:
            return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
        existing = sorted(p for (t, p) in w.partitions if t == topic)
        if count < len(existing):
            return AdminError(INVALID_PARTITIONS, f"topic currently has {len(existing)} partitions, which is higher than the requested {count}")
        if count == len(existing):
            return AdminError(INVALID_PARTITIONS, f"topic already has {len(existing)} partition(s)")
        new = range(len(existing), count)
        if assignment is not None:
            assignment = {p: r for p, r in assignment.items()}
            if set(assignment) != set(new):
                return AdminError(INVALID_REPLICA_ASSIGNMENT, f"the assignment must name exactly the new partitions {list(new)}, got {sorted(assignment)}")
        rf = len(w.partitions[(topic, existing[0])].replicas)
        replicas, error = self._new_replicas(new, rf, assignment)
        if error is not None:
            return error
        placer = self._directory_placer()
        self._propose([self._new_partition(topic, p, reps, placer) for p, reps in zip(new, replicas, strict=True)], now_ms, out)
        return None

    def _new_replicas(self, partitions: range, replication_factor: int, assignment: dict[int, list[int]] | None) -> tuple[list[list[int]], AdminError | None]:
        """Each new partition's replicas: the assignment's, checked as Kafka's
        validateManualPartitionAssignment does, or Kafka's placement over the active brokers."""
        w = self.working
        if assignment is None:
            usable = {b.broker_id: b.rack for b in w.brokers.values() if b.active}
            try:
                return assign_replicas(len(partitions), replication_factor, usable), None
            except PlacementError as exc:
                return [], AdminError(INVALID_REPLICATION_FACTOR, str(exc))
        out = []
        for p in partitions:
            reps = list(assignment.get(p, []))
            try:
                validate_target(tuple(reps), w.brokers)
            except ReassignmentError as exc:
                return [], AdminError(exc.error, f"partition {p}: {exc}")
            if len(reps) != replication_factor:
                return [], AdminError(INVALID_REPLICA_ASSIGNMENT, f"partition {p} has {len(reps)} replicas, the others {replication_factor}")
            if not any(w.is_active(b) for b in reps):
                return [], AdminError(INVALID_REPLICA_ASSIGNMENT, f"every broker of partition {p}'s assignment {reps} is fenced or shutting down")
            out.append(reps)
        return out, None

    def _directory_placer(self) -> DirectoryPlacer:
        """Where the new replicas of one admin call go among their brokers' log directories."""
        return DirectoryPlacer(self.working, self.settings.log_dirs)

    def _new_partition(self, topic: str, partition: int, replicas: list[int], placer: DirectoryPlacer) -> PartitionRecord:
        """A new partition: its active replicas are the ISR, the first of them leads; each replica
        goes to the log directory `placer` chooses."""
        isr = tuple(b for b in replicas if self.working.is_active(b))
        dirs = placer.place(replicas)
        directories = tuple(dirs.get(b, DEFAULT_DIR) for b in replicas)
        if all(d == DEFAULT_DIR for d in directories):
            directories = ()  # as PartitionRecord keeps them: none when all in the default one
        return PartitionRecord(topic, partition, tuple(replicas), isr, (), (), isr[0] if isr else None, 0, 0, RECOVERED, "create", "clean",
                               directories=directories)

    def _admin_partition(self, topic: str, partition: int) -> PartitionRecord | AdminError:
        """The partition an admin call names, or the error that answers it."""
        if not self.active:
            return AdminError(NOT_CONTROLLER)
        part = self.working.partitions.get((topic, partition))
        return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}") if part is None else part

    def elect_leaders(self, topic: str, partition: int, election: str, now_ms: float, out: Output) -> AdminError | None:
        """ElectLeaders (Kafka's ReplicationControlManager.electLeader): ELECTION_NOT_NEEDED when
        the preferred replica already leads (preferred) or the partition has a leader (unclean);
        a build that changes nothing is PREFERRED_LEADER_NOT_AVAILABLE or
        ELIGIBLE_LEADERS_NOT_AVAILABLE."""
        part = self._admin_partition(topic, partition)
        if isinstance(part, AdminError):
            return part
        if (election == "preferred" and part.replicas and part.leader == part.replicas[0]) or (election == "unclean" and part.leader is not None):
            return AdminError(ELECTION_NOT_NEEDED, f"{topic}-{partition} is led by {part.leader}")
        if self._change(part, now_ms, out, reason=f"elect_{election}", election=election) is None:
            error = PREFERRED_LEADER_NOT_AVAILABLE if election == "preferred" else ELIGIBLE_LEADERS_NOT_AVAILABLE
            return AdminError(error, f"no {'preferred ' if election == 'preferred' else ''}leader can be elected for {topic}-{partition}")
        return None

    def reassign(self, topic: str, partition: int, target: list[int], now_ms: float, out: Output) -> AdminError | None:
        """AlterPartitionReassignments with a target (§6.7, Kafka's changePartitionReassignment):
        one record grows the replica set, or completes at once when the ISR already allows it;
        a reassignment in progress is replaced by the new target. The leader's ISR expansions
        complete it (`reassignment.complete_if_ready`, inside `change_partition`)."""
        part = self._admin_partition(topic, partition)
        if isinstance(part, AdminError):
            return part
        try:
            assignment = reassignment_to(part, tuple(target), self.working.brokers)
        except ReassignmentError as exc:
            return AdminError(exc.error, str(exc))
        joining = [b for b in assignment.replicas if b not in part.replicas]
        self._change(part, now_ms, out, reason="reassignment", assignment=assignment, new_directories=self._directory_placer().place(joining))
        return None

    def cancel_reassignment(self, topic: str, partition: int, now_ms: float, out: Output) -> AdminError | None:
        """AlterPartitionReassignments without a target (Kafka's cancelPartitionReassignment): back to
        the replicas before the reassignment. NO_REASSIGNMENT_IN_PROGRESS when there is none;
        INVALID_REPLICA_ASSIGNMENT when going back needs an unclean election the topic does not allow."""
        part = self._admin_partition(topic, partition)
        if isinstance(part, AdminError):
            return part
        try:
            back = revert(part)
        except ReassignmentError as exc:
            return AdminError(exc.error, str(exc))
        policy = self.policy(part.topic, replication_factor=len(back.assignment.replicas))
        if back.unclean and not policy.unclean_leader_election:
            return AdminError(INVALID_REPLICA_ASSIGNMENT, f"reverting {topic}-{partition} would need an unclean leader election")
        new = change_partition(
            part, self.working.brokers, policy, reason="reassignment_cancelled", target_isr=back.isr,
            assignment=back.assignment, election="unclean" if policy.unclean_leader_election else "clean",
        )
        if new is not None:
            self._propose_change(part, new, now_ms, out)
        return None

    def alter_config(self, topic: str | None, config: dict[str, Any], now_ms: float, out: Output) -> AdminError | None:
        """IncrementalAlterConfigs. As Kafka's ConfigurationControlManager, a topic key set to the
        value it already has writes no record (`!Objects.equals(currentValue, newValue) ||
        type == BROKER`), so nothing that follows a config record (the ELR clearing below)
        happens; the cluster's keys are always written."""
        if not self.active:
            return AdminError(NOT_CONTROLLER)
        resource, name = ("topic", topic) if topic is not None else ("cluster", "")
        if topic is not None and topic not in self.working.topics:
            return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
        if topic is not None:
            current = self.working.topic_configs.get(topic, {})
            config = {k: v for k, v in config.items() if current.get(k) != v}
        if not config:
            return None
        self._propose([ConfigRecord(resource, name, k, v) for k, v in config.items()], now_ms, out)
        if "min.insync.replicas" in config:
            # A dynamic MinISR change clears the ELR of the partitions it applies to (KIP-966).
            for part in list(self.working.partitions.values()):
                if (topic is None or part.topic == topic) and (part.elr or part.last_known_elr):
                    new = replace(part, elr=(), last_known_elr=(), partition_epoch=part.partition_epoch + 1, reason="min_isr_changed", election=None)
                    self._propose([new], now_ms, out)
        return None
