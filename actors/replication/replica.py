"""One partition replica on a broker: its log, its high watermark, and its part as leader or follower.

Sections cited are the protocol description's. As Kafka's Partition, in three modules: this one
(roles, produce, the high watermark, the follower's appends and truncation), follower_fetches.py
(the leader's answers to its followers' fetches and what it learns from them) and isr_changes.py
(the ISR state machine: Maximal ISR, shrink, expand, AlterPartition), mixed into PartitionReplica.

Leader (`become_leader`):
- records its Leader Epoch Start Offset (LESO = its LEO when elected) in the epoch cache (§6.4.2);
- tracks each follower's LEO (a fetch at offset x confirms everything below x), last caught-up
  time and broker epoch, all reset at every new leader epoch;
- advances the high watermark exactly under §6.5.4: every Maximal ISR member has reached it and the
  committed ISR has at least the effective MinISR members (`maybe_advance_high_watermark`);
- shrinks the ISR of followers that have not caught up for replica.lag.time.max.ms and expands it
  with followers that reached max(local HWM, LESO) with a fetch in the current leader epoch, through
  AlterPartition carrying the partition epoch and the added replicas' broker epochs; the Maximal
  ISR (current + proposed) is applied eagerly, committed on success, rolled back on rejection
  (§6.5.2);
- answers ListOffsets(latest) with OFFSET_NOT_AVAILABLE while its HWM is below its LESO (§6.4.2);
- acknowledges acks=all produce requests once the HWM passes them, rejects them up front with
  NOT_ENOUGH_REPLICAS while the ISR is below MinISR, and fails the waiting ones with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrinks below MinISR.

Follower (`become_follower`): fetches from the leader (the broker's fetcher does the I/O), appends
what it gets, takes the HWM from the response (so its local HWM may go down, §6.4), and truncates
where the leader says its log diverges (§6.6). With `leader_epoch_truncation: false` it truncates
to its local HWM on becoming a follower instead (Kafka before KIP-101).

Protocol switches (docs/reference `protocol`): maximal_isr, strict_min_isr,
broker_epoch_in_alter_partition, leader_epoch_truncation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from actors.contract import Envelope, Flush, Output
from controller_quorum.metadata import RECOVERED, RECOVERING, MetadataImage, PartitionRecord
from observability.events import (
    Appended,
    BecomeFollower,
    BecomeLeader,
    ListOffsets,
    ReplicaFetchFailed,
    ReplicaHwm,
    ReplicationQuorum,
    Truncated,
)
from storage.partition_log import NO_PRODUCER, PartitionLog

from .follower_fetches import FollowerFetches, FollowerState
from .isr_changes import IsrChanges
from .messages import (
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_NOT_AVAILABLE,
    OFFSET_OUT_OF_RANGE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    REQUEST_TIMED_OUT,
    UNEXPECTED_APPEND_OFFSET,
    FetchedPartition,
    FetchPartition,
    ListOffsetsResponse,
    ProduceRequest,
    ProduceResponse,
)
from .purgatory import Purgatory

if TYPE_CHECKING:
    from actors.settings import ClusterSettings

class ReplicaEnv(Protocol):
    """What a replica needs from its broker."""

    node_id: str
    broker_id: int
    settings: ClusterSettings

    @property
    def broker_epoch(self) -> int | None: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def sync_flush(self) -> bool:
        """True when a write must be durable before it counts toward the HWM or an ack (fsync
        storage, or log.flush.interval.messages = 1)."""
        ...

    def min_isr(self, topic: str, replication_factor: int) -> int: ...

    def send_to_controller(self, payload: object, out: Output) -> None: ...


@dataclass
class WaitingProduce:
    required_offset: int  # acknowledged once HWM >= this (the batch's next offset)
    reply_to: str
    request: ProduceRequest
    base_offset: int
    deadline_ms: float


class PartitionReplica(FollowerFetches, IsrChanges):
    def __init__(self, env: ReplicaEnv, topic: str, partition: int, log: PartitionLog, hwm: int) -> None:
        self.env = env
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self.log = log
        # Invariant: hwm <= log.end_offset. A follower's may go down (taken from the leader).
        self.hwm = min(hwm, log.end_offset)
        self.role = "none"  # none | leader | follower
        # A follower got a batch it cannot append (on_fetched): its fetcher leaves the partition
        # until the next leader epoch, as Kafka's AbstractFetcherThread.markPartitionFailed.
        self.fetch_failed = False
        self.state: PartitionRecord | None = None  # the metadata this replica acts on
        self.topic_id: str | None = None  # the topic its log belongs to (partition.metadata)
        self.leader_epoch = -1
        # --- leader ---
        self.leso = -1
        self.isr: tuple[int, ...] = ()  # committed ISR (from metadata or an accepted AlterPartition)
        self.partition_epoch = -1
        self.pending_isr: tuple[int, ...] | None = None  # proposed, not yet committed
        self.pending_recovery: str | None = None
        self.awaiting_metadata = False  # a proposal was refused as stale: wait for the metadata log
        self.alter_sent_ms = 0.0
        self.alter_attempt = 0  # the number of the latest AlterPartition attempt sent
        self.followers: dict[int, FollowerState] = {}
        self.durable_end = log.end_offset  # the leader's own LEO counted toward the HWM
        self.waiting: Purgatory[WaitingProduce] = Purgatory()  # acks=all produces until the HWM passes them
        self.unflushed_messages = 0
        self.hwm_advances = 0
        self._reported_quorum: tuple | None = None  # (ISR, replication quorum) last reported
        # What a call changed that the replica manager must act on: the replica sets them, the
        # manager reads and clears them when the call returns (ReplicaManager._settle).
        # `deadline_moved`: the replica may have gained an earlier deadline (a produce waits, an
        # ISR proposal is out): the manager keeps the replicas' deadlines in an index instead of
        # asking every replica; deadlines only move later without it. `answer_changed`: its
        # answer to a follower's fetch may have changed (its log end, HWM, role or partition
        # state): the fetch sessions holding it process it again at their next fetch.
        self.deadline_moved = False
        self.answer_changed = False

    # --- derived state ---------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role == "leader"

    @property
    def leo(self) -> int:
        return self.log.end_offset

    def min_isr(self) -> int:
        replicas = self.state.replicas if self.state else (self.env.broker_id,)
        return self.env.min_isr(self.topic, len(replicas))

    # --- transitions -----------------------------------------------------------------------------

    def _take_role(self, role: str, rec: PartitionRecord, out: Output) -> None:
        """Start a new leader epoch in `role`: requests waiting on the old one fail, proposals of
        the old one are forgotten."""
        self._fail_waiting(NOT_LEADER_OR_FOLLOWER, out)
        self.role = role
        self.state = rec
        self.leader_epoch = rec.leader_epoch
        self.partition_epoch = rec.partition_epoch
        self.isr = rec.isr
        self.pending_isr = None
        self.pending_recovery = None
        self.awaiting_metadata = False
        self.followers = {}
        self._reported_quorum = None
        self.fetch_failed = False
        self.answer_changed = True

    def become_leader(self, rec: PartitionRecord, now_ms: float, out: Output) -> None:
        me = self.env.broker_id
        self._take_role("leader", rec, out)
        self.leso = self.log.end_offset
        self.log.assign_epoch(rec.leader_epoch, self.leso, out)
        self.durable_end = self.log.end_offset
        self.followers = {
            b: FollowerState(last_caught_up_ms=now_ms if b in rec.isr else 0.0) for b in rec.replicas if b != me
        }
        out.emit(BecomeLeader(self.topic, self.partition, rec.leader_epoch, self.leso, self.hwm, tuple(rec.isr), topic_id=self.topic_id))
        if rec.leader_recovery_state == RECOVERING:
            # KIP-704: after an unclean election the new leader's log is the partition's log from
            # now on; it tells the controller so before the ISR can grow.
            self._propose_isr(rec.isr, now_ms, out, recovery=RECOVERED)
        self.maybe_advance_high_watermark(now_ms, out)

    def become_follower(self, rec: PartitionRecord, now_ms: float, out: Output) -> None:
        was = self.role
        self._take_role("follower", rec, out)
        if not self.env.settings.protocol.leader_epoch_truncation and self.log.end_offset > self.hwm:
            # Before KIP-101 a follower cut its log to its local HWM before fetching again.
            self._truncate(self.hwm, "become_follower_hwm", out)
        out.emit(BecomeFollower(self.topic, self.partition, rec.leader, rec.leader_epoch, was, self.leo, self.hwm, topic_id=self.topic_id))

    def stop(self, out: Output, error: str = NOT_LEADER_OR_FOLLOWER) -> None:
        """No longer a replica the broker serves (removed, the broker is shutting down, or its log
        directory failed: `error` KAFKA_STORAGE_ERROR); requests waiting on it fail with `error`."""
        self._fail_waiting(error, out)
        self.role = "none"
        self.followers = {}
        self.pending_isr = None
        self.answer_changed = True

    def on_partition_change(self, rec: PartitionRecord, now_ms: float, out: Output) -> None:
        """Metadata for the same leader epoch: the committed ISR and partition epoch moved on (a
        controller-side change, or our own AlterPartition seen through the log)."""
        if rec.partition_epoch <= self.partition_epoch:
            return
        self.state = rec
        self.partition_epoch = rec.partition_epoch
        self.isr = rec.isr
        self.answer_changed = True
        if self.is_leader:
            self.pending_isr = None  # the committed state replaces any proposal (Kafka does too)
            self.pending_recovery = None
            self.awaiting_metadata = False
            for b in rec.replicas:
                if b != self.env.broker_id and b not in self.followers:
                    self.followers[b] = FollowerState()
            for b in list(self.followers):
                if b not in rec.replicas:
                    del self.followers[b]
            self._after_isr_change(now_ms, out)

    # --- produce -----------------------------------------------------------------------------

    def on_produce(self, src: str, req: ProduceRequest, now_ms: float, out: Output) -> None:
        def reply(error: str | None, base_offset: int = -1) -> None:
            if req.acks != 0:
                resp = ProduceResponse(req.request_id, req.topic, req.partition, error, base_offset, self.topic_id)
                out.send(Envelope(self.env.node_id, src, resp, after_flush=self.env.sync_flush and error is None))

        if not self.is_leader:
            return reply(NOT_LEADER_OR_FOLLOWER)
        if req.acks == -1 and len(self.isr) < self.min_isr():
            return reply(NOT_ENOUGH_REPLICAS)
        batch = req.batch
        if batch.producer_id != NO_PRODUCER:
            # A retry of one of the producer's last five batches (kraftlab's producer keeps one in
            # flight per partition; a Kafka client may keep five): answer with where it went
            # (idempotence, KIP-98).
            seen = self.log.producers.get(batch.producer_id)
            original = seen.offset_of(batch.base_sequence) if seen is not None else None
            if original is not None:
                return self._after_append(src, req, original, original + batch.count, now_ms, out, duplicate=True)
            # A producer the log holds nothing of (a new id, or its batches lost with a page cache
            # or truncated away) may start at any sequence, as in Kafka >= 2.5 (KIP-360); else the
            # batch must follow its last one.
            if seen is not None and batch.base_sequence != seen.last_sequence + 1:
                return reply(OUT_OF_ORDER_SEQUENCE_NUMBER)
        base = self.log.end_offset
        self.log.append(batch.stamped(base, self.leader_epoch), out)
        out.emit(Appended(self.topic, self.partition, base, batch.count, self.leader_epoch, batch.crc, topic_id=self.topic_id))
        self.answer_changed = True
        self._after_append(src, req, base, base + batch.count, now_ms, out)
        self._maybe_flush(batch.count, out)
        self.maybe_advance_high_watermark(now_ms, out)

    def _after_append(self, src, req, base, end, now_ms, out, duplicate=False) -> None:
        if req.acks == 0:
            return
        if req.acks == 1 or self.hwm >= end:
            resp = ProduceResponse(req.request_id, req.topic, req.partition, None, base, self.topic_id)
            out.send(Envelope(self.env.node_id, src, resp, after_flush=self.env.sync_flush))
            return
        self.waiting.watch(WaitingProduce(end, src, req, base, now_ms + req.timeout_ms))
        self.deadline_moved = True

    def _maybe_flush(self, messages: int, out: Output) -> None:
        """fsync storage flushes every append before it counts; page_cache flushes per
        log.flush.interval.messages (the interval timer is the broker's)."""
        if self.env.sync_flush:
            out.write(Flush(("log", self.topic, self.partition, self.log.end_offset)))
            return
        every = self.env.settings.config.log_flush_interval_messages
        if every is not None:
            self.unflushed_messages += messages
            if self.unflushed_messages >= every:
                self.unflushed_messages = 0
                out.write(Flush())

    def on_flushed(self, end_offset: int, now_ms: float, out: Output) -> None:
        if end_offset > self.durable_end:
            self.durable_end = min(end_offset, self.log.end_offset)
            self.maybe_advance_high_watermark(now_ms, out)

    def _fail_waiting(self, error: str, out: Output) -> None:
        self._answer_produces(self.waiting.take_all(), error, out)

    # --- the high watermark ------------------------------------------------------------------

    def own_end(self) -> int:
        return self.durable_end if self.env.sync_flush else self.log.end_offset

    def maybe_advance_high_watermark(self, now_ms: float, out: Output) -> bool:
        """§6.5.4: HWM = the smallest LEO among the replication quorum (the leader's own included),
        and only while the committed ISR has at least the effective MinISR members
        (`strict_min_isr`, Kafka >= 3.7). Kafka's Partition.maybeIncrementLeaderHW also waits for a
        follower outside the quorum that is caught up (at the leader's log end, or within
        replica.lag.time.max.ms of it) and eligible to join the ISR (`shouldWaitForReplicaToJoinIsr`):
        it is about to join, and records it lacks would be committed without it
        (PartitionTest.testHighWatermarkIncreasesWithFencedOrShutdownFollower)."""
        if not self.is_leader:
            return False
        self._maybe_report_quorum(out)
        if self.env.settings.protocol.strict_min_isr and len(self.isr) < self.min_isr():
            return False
        me = self.env.broker_id
        leader_end = self.log.end_offset
        new = min(self.own_end(), leader_end)
        quorum = self.replication_quorum()
        for b in quorum:
            if b != me:
                f = self.followers.get(b)
                new = min(new, f.leo if f is not None else -1)
        # Both rules came with the Maximal ISR's Kafka: `maximal_isr: false` restores the HWM of
        # before them (§6.5.2's example, which loses acknowledged records).
        lag = self.env.settings.config.replica_lag_time_max_ms
        for b, f in self.followers.items() if self.env.settings.protocol.maximal_isr else ():
            if (b not in quorum and 0 <= f.leo < new and f.fetch_epoch == self.leader_epoch
                    and (f.leo == leader_end or now_ms - f.last_caught_up_ms <= lag) and self._isr_eligible(b, f)):
                new = f.leo
        if new <= self.hwm:
            return False
        self.hwm = new
        self.hwm_advances += 1
        out.emit(ReplicaHwm(self.topic, self.partition, new, topic_id=self.topic_id))
        self.answer_changed = True
        self._answer_produces(self.waiting.complete(lambda w: w.required_offset <= new), None, out)
        return True

    def _maybe_report_quorum(self, out: Output) -> None:
        """Tell the history when the committed ISR or the replication quorum changed (the checks
        judge the HWM's moves against them)."""
        now = (self.isr, tuple(sorted(self.replication_quorum())))
        if now != self._reported_quorum:
            self._reported_quorum = now
            out.emit(ReplicationQuorum(self.topic, self.partition, tuple(self.isr), now[1], topic_id=self.topic_id))

    def _answer_produces(self, done: list[WaitingProduce], error: str | None, out: Output) -> None:
        """Answer acks=all produce requests taken out of the purgatory, with `error` (None: acknowledged)."""
        for w in done:
            resp = ProduceResponse(w.request.request_id, self.topic, self.partition, error, w.base_offset, self.topic_id)
            out.send(Envelope(self.env.node_id, w.reply_to, resp))

    # --- ListOffsets -------------------------------------------------------------------------

    def list_offsets_latest(self, request_id: int, out: Output) -> ListOffsetsResponse:
        if not self.is_leader:
            return ListOffsetsResponse(request_id, self.topic, self.partition, NOT_LEADER_OR_FOLLOWER)
        if self.hwm < self.leso:
            # §6.4.2: the local HWM may still be stale; "I don't know" rather than a value that
            # could go back.
            out.emit(ListOffsets(self.topic, self.partition, self.hwm, self.leso, None, topic_id=self.topic_id))
            return ListOffsetsResponse(request_id, self.topic, self.partition, OFFSET_NOT_AVAILABLE)
        out.emit(ListOffsets(self.topic, self.partition, self.hwm, self.leso, self.hwm, topic_id=self.topic_id))
        return ListOffsetsResponse(request_id, self.topic, self.partition, None, self.hwm)

    # --- the follower side ---------------------------------------------------------------------

    def on_fetched(self, fp: FetchedPartition, now_ms: float, out: Output) -> None:
        """Apply the leader's answer to this follower's fetch."""
        if self.role != "follower":
            return
        if fp.diverging_epoch is not None:
            epoch, end = fp.diverging_epoch
            local_epoch, local_end = self.log.end_offset_for_epoch(epoch)
            target = min(end, local_end) if local_epoch >= 0 else min(end, self.hwm)
            self._truncate(max(target, 0), "diverging_epoch", out)
            return
        if fp.error == OFFSET_OUT_OF_RANGE:
            if self.log.end_offset > fp.log_end_offset >= 0:
                self._truncate(fp.log_end_offset, "offset_out_of_range", out)
            return
        if fp.error is not None:
            return
        appended = 0
        for b in fp.batches:
            if b.base_offset < self.log.end_offset:
                if b.base_offset + b.count > self.log.end_offset:
                    # The log ends inside the leader's batch: a batch is appended whole or not at
                    # all, so it cannot go on (Kafka's UnexpectedAppendOffsetException, raised by
                    # UnifiedLog.append for a follower). Only a cut inside one of the leader's
                    # batches does this: a truncation to the local HWM, before KIP-101.
                    self.fetch_failed = True
                    out.emit(ReplicaFetchFailed(self.topic, self.partition, UNEXPECTED_APPEND_OFFSET, self.log.end_offset, b.base_offset, topic_id=self.topic_id))
                    return
                continue  # already held
            if b.base_offset != self.log.end_offset:
                break  # a gap: fetch again from the LEO
            self.log.append(b, out)
            out.emit(Appended(self.topic, self.partition, b.base_offset, b.count, b.leader_epoch, b.crc, topic_id=self.topic_id))
            appended += b.count
        if appended:
            self._maybe_flush_follower(appended, out)
        hwm = min(fp.high_watermark, self.log.end_offset)
        if hwm != self.hwm:
            self.hwm = hwm
            out.emit(ReplicaHwm(self.topic, self.partition, hwm, topic_id=self.topic_id))

    def _maybe_flush_follower(self, messages: int, out: Output) -> None:
        if self.env.sync_flush:
            return  # the next fetch is sent after a flush (it acknowledges what it confirms)
        every = self.env.settings.config.log_flush_interval_messages
        if every is not None:
            self.unflushed_messages += messages
            if self.unflushed_messages >= every:
                self.unflushed_messages = 0
                out.write(Flush())

    def fetch_position(self) -> FetchPartition:
        # The epoch of the last batch held (Kafka's LastFetchedEpoch); -1 disables the divergence
        # check, as before KIP-101.
        truncation = self.env.settings.protocol.leader_epoch_truncation
        last_epoch = self.log.last_epoch_of_batches() if truncation else -1
        return FetchPartition(self.topic, self.partition, self.leader_epoch, self.log.end_offset, last_epoch)

    def _truncate(self, offset: int, reason: str, out: Output) -> None:
        before = self.log.end_offset
        after = self.log.truncate_to(offset, out)
        self.hwm = min(self.hwm, after)
        self.durable_end = min(self.durable_end, after)
        self.answer_changed = True
        if after < before:
            out.emit(Truncated(self.topic, self.partition, reason, before, after, topic_id=self.topic_id))

    # --- timers --------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        if not self.is_leader:
            return None
        waiting = self.waiting.next_deadline()
        deadlines = [waiting] if waiting is not None else []
        if self.pending_isr is not None:
            deadlines.append(self.alter_sent_ms + self._alter_retry_ms())
        return min(deadlines) if deadlines else None

    def tick(self, now_ms: float, out: Output) -> None:
        if not self.is_leader:
            return
        self._answer_produces(self.waiting.expire(now_ms), REQUEST_TIMED_OUT, out)
        if self.pending_isr is not None and now_ms >= self.alter_sent_ms + self._alter_retry_ms():
            self._send_alter_partition(now_ms, out)

    def log_info(self) -> tuple[int, int]:
        """(last epoch, LEO): what the controller compares in unclean recovery."""
        return (self.log.last_epoch_of_batches(), self.log.end_offset)

