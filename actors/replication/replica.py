"""One partition replica on a broker: its log, its high watermark, and its part as leader or follower.

Sections cited are the protocol description's.

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

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from actors.contract import Envelope, Flush, Output
from controller_quorum.metadata import RECOVERED, RECOVERING, MetadataImage, PartitionRecord
from controller_quorum.requests import (
    INVALID_UPDATE_VERSION,
    NOT_CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from observability.events import (
    Appended,
    BecomeFollower,
    BecomeLeader,
    IsrChangeRejected,
    IsrCommitted,
    IsrExpandProposed,
    IsrShrinkProposed,
    ListOffsets,
    ReplicaFetchFailed,
    ReplicaHwm,
    ReplicationQuorum,
    Truncated,
)
from storage.partition_log import NO_PRODUCER, PartitionLog

from .messages import (
    FENCED_LEADER_EPOCH,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_NOT_AVAILABLE,
    OFFSET_OUT_OF_RANGE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    REQUEST_TIMED_OUT,
    STALE_BROKER_EPOCH,
    UNEXPECTED_APPEND_OFFSET,
    UNKNOWN_LEADER_EPOCH,
    FetchedPartition,
    FetchPartition,
    ListOffsetsResponse,
    ProduceRequest,
    ProduceResponse,
)

if TYPE_CHECKING:
    from actors.settings import ClusterSettings

MAX_FETCH_BATCHES = 256
ALTER_PARTITION_RETRY_MS = 1_000
STALE_PROPOSAL_RETRY_MS = 5_000  # after a stale-version refusal, if no metadata update came


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
class FollowerState:
    """What the leader knows of one follower in the current leader epoch."""

    leo: int = -1  # -1: no fetch yet in this epoch
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_leo: int = -1
    broker_epoch: int = -1
    fetch_epoch: int = -1  # the leader epoch of the last fetch received


@dataclass
class WaitingProduce:
    required_offset: int  # acknowledged once HWM >= this (the batch's next offset)
    reply_to: str
    request: ProduceRequest
    base_offset: int
    deadline_ms: float


def _no_timer() -> None:
    pass


class PartitionReplica:
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
        self.waiting: list[WaitingProduce] = []
        self.unflushed_messages = 0
        self.hwm_advances = 0
        self._reported_quorum: tuple | None = None  # (ISR, replication quorum) last reported
        # Called when this replica may have gained an earlier deadline (a produce waits, an ISR
        # proposal is out), once the deadline is set: the manager keeps the replicas' deadlines
        # in a heap instead of asking every replica. Deadlines only move later without a call.
        self.on_timer: Callable[[], None] = _no_timer
        # Called when this replica's answer to a follower's fetch may have changed (its log end,
        # HWM, role or partition state): the fetch sessions holding it process it again.
        self.on_change: Callable[[], None] = _no_timer

    # --- derived state ---------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role == "leader"

    @property
    def leo(self) -> int:
        return self.log.end_offset

    def maximal_isr(self) -> frozenset[int]:
        """§6.5.2: the union of the committed and the proposed ISR."""
        if self.pending_isr is None:
            return frozenset(self.isr)
        return frozenset(self.isr) | frozenset(self.pending_isr)

    def replication_quorum(self) -> frozenset[int]:
        """Whose fetch offsets bound the HWM. With the Maximal ISR: current + proposed. Without it
        (switch off): the leader applies a shrink at once and an expansion only once committed, the
        behaviour §6.5.2 shows losing acknowledged data."""
        if self.env.settings.protocol.maximal_isr or self.pending_isr is None:
            return self.maximal_isr()
        return frozenset(self.isr) & frozenset(self.pending_isr)

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
        self.on_change()

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
        self.on_change()

    def on_partition_change(self, rec: PartitionRecord, now_ms: float, out: Output) -> None:
        """Metadata for the same leader epoch: the committed ISR and partition epoch moved on (a
        controller-side change, or our own AlterPartition seen through the log)."""
        if rec.partition_epoch <= self.partition_epoch:
            return
        self.state = rec
        self.partition_epoch = rec.partition_epoch
        self.isr = rec.isr
        self.on_change()
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
            # The producer keeps one batch in flight per partition, so a retry can only be of the
            # last batch the log holds from it: one entry per producer is enough (Kafka keeps five,
            # for max.in.flight.requests.per.connection <= 5).
            seen = self.log.producers.get(batch.producer_id)
            if seen is not None and batch.base_sequence == seen.base_sequence:
                # A retry of the last batch: answer with where it went (idempotence, KIP-98).
                return self._after_append(src, req, seen.base_offset, seen.base_offset + batch.count, now_ms, out, duplicate=True)
            # A producer the log holds nothing of (a new id, or its batches lost with a page cache
            # or truncated away) may start at any sequence, as in Kafka >= 2.5 (KIP-360); else the
            # batch must follow its last one.
            if seen is not None and batch.base_sequence != seen.last_sequence + 1:
                return reply(OUT_OF_ORDER_SEQUENCE_NUMBER)
        base = self.log.end_offset
        self.log.append(batch.stamped(base, self.leader_epoch), out)
        out.emit(Appended(self.topic, self.partition, base, batch.count, self.leader_epoch, batch.crc, topic_id=self.topic_id))
        self.on_change()
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
        self.waiting.append(WaitingProduce(end, src, req, base, now_ms + req.timeout_ms))
        self.on_timer()

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
        for w in self.waiting:
            resp = ProduceResponse(w.request.request_id, self.topic, self.partition, error, w.base_offset, self.topic_id)
            out.send(Envelope(self.env.node_id, w.reply_to, resp))
        self.waiting = []

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
        self.on_change()
        if self.waiting:
            self._answer_waiting(lambda w: w.required_offset <= new, None, out)
        return True

    def _maybe_report_quorum(self, out: Output) -> None:
        """Tell the history when the committed ISR or the replication quorum changed (the checks
        judge the HWM's moves against them)."""
        now = (self.isr, tuple(sorted(self.replication_quorum())))
        if now != self._reported_quorum:
            self._reported_quorum = now
            out.emit(ReplicationQuorum(self.topic, self.partition, tuple(self.isr), now[1], topic_id=self.topic_id))

    def _answer_waiting(self, finished, error: str | None, out: Output) -> None:
        """Answer the acks=all produce requests for which `finished(w)` holds, with `error`."""
        done = [w for w in self.waiting if finished(w)]
        if done:
            self.waiting = [w for w in self.waiting if not finished(w)]
            for w in done:
                resp = ProduceResponse(w.request.request_id, self.topic, self.partition, error, w.base_offset, self.topic_id)
                out.send(Envelope(self.env.node_id, w.reply_to, resp))

    # --- fetches from followers ----------------------------------------------------------------

    def on_follower_fetch(self, fp: FetchPartition, follower: int, broker_epoch: int, now_ms: float, out: Output) -> FetchedPartition | None:
        """Update the follower's state from its fetch; return an answer to send now (an error,
        a divergence, or records), or None when there is nothing to return yet (long poll)."""
        error = self._check_leader_epoch(fp.current_leader_epoch)
        if error is not None:
            return self._error(error)
        reg = self.env.image.brokers.get(follower)
        if self.env.settings.protocol.broker_epoch_in_alter_partition and reg is not None and broker_epoch < reg.epoch:
            return self._error(STALE_BROKER_EPOCH)  # KIP-903: a fetch from an earlier session
        if follower not in self.followers:
            return self._error(NOT_LEADER_OR_FOLLOWER)  # not a replica of this partition (any more)
        if fp.last_fetched_epoch >= 0:
            epoch, end = self.log.end_offset_for_epoch(fp.last_fetched_epoch)
            if epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
                return FetchedPartition(self.topic, self.partition, None, self.hwm, self.log.end_offset, diverging_epoch=(epoch, end), topic_id=self.topic_id)
        if fp.fetch_offset > self.log.end_offset:
            return FetchedPartition(self.topic, self.partition, OFFSET_OUT_OF_RANGE, self.hwm, self.log.end_offset, topic_id=self.topic_id)
        self._update_follower(follower, fp.fetch_offset, broker_epoch, now_ms, out)
        if fp.fetch_offset < self.log.end_offset:
            return self.read_for_follower(fp)
        return None

    def read_for_follower(self, fp: FetchPartition) -> FetchedPartition:
        error = self._check_leader_epoch(fp.current_leader_epoch)
        if error is not None:
            return self._error(error)
        batches = self.log.read_from(fp.fetch_offset, MAX_FETCH_BATCHES)
        return FetchedPartition(self.topic, self.partition, None, self.hwm, self.log.end_offset, batches=batches, topic_id=self.topic_id)

    def has_data_for(self, fp: FetchPartition) -> bool:
        return not self.is_leader or fp.current_leader_epoch != self.leader_epoch or fp.fetch_offset < self.log.end_offset

    def _check_leader_epoch(self, epoch: int) -> str | None:
        if not self.is_leader:
            return NOT_LEADER_OR_FOLLOWER
        if epoch < self.leader_epoch:
            return FENCED_LEADER_EPOCH
        if epoch > self.leader_epoch:
            return UNKNOWN_LEADER_EPOCH
        return None

    def _error(self, error: str) -> FetchedPartition:
        return FetchedPartition(self.topic, self.partition, error, self.hwm, self.log.end_offset, topic_id=self.topic_id)

    def note_skipped_fetch(self, follower: int, at_ms: float) -> None:
        """The follower's fetch at `at_ms` left this partition out (fetch_session.py): it was at
        the leader's log end then, so caught up then, as Kafka's processing of the whole session
        would have recorded."""
        f = self.followers.get(follower)
        if f is None or f.fetch_epoch != self.leader_epoch or at_ms <= f.last_fetch_ms:
            return
        f.last_caught_up_ms = max(f.last_caught_up_ms, at_ms)
        f.last_fetch_ms = at_ms
        f.last_fetch_leader_leo = f.leo

    def _update_follower(self, follower: int, fetch_offset: int, broker_epoch: int, now_ms: float, out: Output) -> None:
        f = self.followers[follower]
        leader_leo = self.log.end_offset
        # Kafka's Replica.updateFetchState: caught up now if the fetch reached the leader's LEO,
        # or as of the previous fetch if it reached what the LEO was then.
        if fetch_offset >= leader_leo:
            f.last_caught_up_ms = now_ms
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.last_fetch_leader_leo = leader_leo
        f.last_fetch_ms = now_ms
        f.leo = fetch_offset
        f.broker_epoch = broker_epoch
        f.fetch_epoch = self.leader_epoch
        if fetch_offset <= self.hwm and follower in self.isr and (self.pending_isr is None or follower in self.pending_isr):
            # An in-sync follower (in the replication quorum either way) at or below the HWM:
            # the HWM, the smallest LEO of the quorum, cannot move on this fetch, and everything
            # else that could move it re-evaluates it itself. The common case of a fetch on an
            # idle partition, so that it costs no more than the bookkeeping above.
            return
        self.maybe_expand_isr(follower, now_ms, out)
        self.maybe_advance_high_watermark(now_ms, out)

    # --- ISR changes ---------------------------------------------------------------------------

    def _isr_eligible(self, broker: int, f: FollowerState) -> bool:
        reg = self.env.image.brokers.get(broker)
        if reg is None or not reg.active:
            return False
        if self.env.settings.protocol.broker_epoch_in_alter_partition and f.broker_epoch != reg.epoch:
            return False
        return True

    def maybe_expand_isr(self, follower: int, now_ms: float, out: Output) -> None:
        """§6.5.3-6.5.4: an out-of-sync follower is in sync once it reached the local HWM and the
        LESO, with a fetch in the current leader epoch."""
        if not self.is_leader or self.pending_isr is not None or follower in self.isr:
            return
        if self.state is not None and self.state.leader_recovery_state == RECOVERING:
            return  # KIP-704: no ISR expansion before the leader recovered
        f = self.followers.get(follower)
        if f is None or f.fetch_epoch != self.leader_epoch:
            return
        if f.leo < self.hwm or f.leo < self.leso:
            return
        if not self._isr_eligible(follower, f):
            return
        out.emit(IsrExpandProposed(self.topic, self.partition, follower, f.leo, self.hwm, self.leso, f.fetch_epoch, self.leader_epoch, topic_id=self.topic_id))
        self._propose_isr(tuple(b for b in self.state.replicas if b in self.isr or b == follower), now_ms, out)

    def maybe_shrink_isr(self, now_ms: float, out: Output) -> None:
        if not self.is_leader or self.pending_isr is not None:
            return
        lag = self.env.settings.config.replica_lag_time_max_ms
        me = self.env.broker_id
        lagging = [b for b in self.isr if b != me and now_ms - self.followers.get(b, FollowerState()).last_caught_up_ms > lag]
        if lagging:
            out.emit(IsrShrinkProposed(self.topic, self.partition, tuple(lagging), topic_id=self.topic_id))
            self._propose_isr(tuple(b for b in self.isr if b not in lagging), now_ms, out)

    def _propose_isr(self, new_isr: tuple[int, ...], now_ms: float, out: Output, recovery: str | None = None) -> None:
        self.pending_isr = new_isr
        self.awaiting_metadata = False
        self.pending_recovery = recovery
        self._send_alter_partition(now_ms, out)
        self.on_timer()
        # The Maximal ISR applies at once; the HWM may move (a shrink without the Maximal ISR).
        self.maybe_advance_high_watermark(now_ms, out)

    def _send_alter_partition(self, now_ms: float, out: Output) -> None:
        me, image = self.env.broker_id, self.env.image
        members = []
        for b in self.pending_isr:
            if b == me:
                epoch = self.env.broker_epoch or -1
            else:
                f = self.followers.get(b)
                reg = image.brokers.get(b)
                epoch = f.broker_epoch if f is not None and f.broker_epoch >= 0 else (reg.epoch if reg else -1)
            members.append((b, epoch))
        state = self.state.leader_recovery_state if self.state else RECOVERED
        self.alter_attempt += 1
        req = AlterPartitionRequest(
            me, self.env.broker_epoch or -1, self.topic, self.partition, self.leader_epoch, self.partition_epoch,
            tuple(members), self.pending_recovery or state, self.alter_attempt,
        )
        self.alter_sent_ms = now_ms
        self.env.send_to_controller(req, out)

    def on_alter_partition_response(self, resp: AlterPartitionResponse, now_ms: float, out: Output) -> None:
        if not self.is_leader or self.pending_isr is None:
            return
        if (resp.request_leader_epoch, resp.request_partition_epoch) != (self.leader_epoch, self.partition_epoch):
            return  # a late answer to a proposal made from an older partition state
        if resp.error is not None and resp.request_attempt not in (-1, self.alter_attempt):
            # A refusal of an attempt since retried: Kafka never delivers it (a retried request's
            # connection is closed), and it may predate the controller's accepting the retry. An
            # acceptance of any attempt is the committed state itself, taken below if newer.
            return
        if resp.error is None and resp.state is not None:
            st = resp.state
            if st.leader_epoch != self.leader_epoch or st.partition_epoch <= self.partition_epoch:
                return  # an answer to an older proposal, or metadata already moved past it
            self.state = st
            self.isr = st.isr
            self.partition_epoch = st.partition_epoch
            self.pending_isr = None
            self.pending_recovery = None
            out.emit(IsrCommitted(self.topic, self.partition, tuple(st.isr), st.partition_epoch, topic_id=self.topic_id))
            self.on_change()  # an ISR expansion may be possible again
            self._after_isr_change(now_ms, out)
        elif resp.error in (NOT_CONTROLLER, REQUEST_TIMED_OUT):
            return  # retried by tick
        elif resp.error in (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH):
            # Our view is stale: the controller's committed state may already hold this very
            # proposal (an earlier attempt whose answer was lost). Keep the Maximal ISR and wait
            # for the metadata log to tell us the committed state, as Kafka does; ask again only
            # after a long pause, in case the refusal came from a controller's uncommitted state
            # that a controller failover since threw away (then no metadata update will come).
            out.emit(IsrChangeRejected(self.topic, self.partition, resp.error, tuple(self.pending_isr), topic_id=self.topic_id))
            self.awaiting_metadata = True
            self.alter_sent_ms = now_ms
        else:
            # Rejected as it stands (an ineligible replica...): the committed state is the one we
            # know, so roll back to it (§6.5.2).
            out.emit(IsrChangeRejected(self.topic, self.partition, resp.error, tuple(self.pending_isr), topic_id=self.topic_id))
            self.pending_isr = None
            self.pending_recovery = None
            self.alter_sent_ms = now_ms
            self.on_change()
            self._maybe_report_quorum(out)

    def _after_isr_change(self, now_ms: float, out: Output) -> None:
        # KIP-966 ("the at-risk data"): once the ISR is below MinISR, pending acks=all requests are
        # negatively acknowledged at once. (Kafka's DelayedProduce keeps them until the HWM passes
        # them or they time out; the reference decides.)
        if self.waiting and len(self.isr) < self.min_isr():
            self._fail_waiting(NOT_ENOUGH_REPLICAS_AFTER_APPEND, out)
        self.maybe_advance_high_watermark(now_ms, out)

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
        self.on_change()
        if after < before:
            out.emit(Truncated(self.topic, self.partition, reason, before, after, topic_id=self.topic_id))

    # --- timers --------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        if not self.is_leader:
            return None
        deadlines = [min(w.deadline_ms for w in self.waiting)] if self.waiting else []
        if self.pending_isr is not None:
            deadlines.append(self.alter_sent_ms + self._alter_retry_ms())
        return min(deadlines) if deadlines else None

    def _alter_retry_ms(self) -> float:
        return STALE_PROPOSAL_RETRY_MS if self.awaiting_metadata else ALTER_PARTITION_RETRY_MS

    def tick(self, now_ms: float, out: Output) -> None:
        if not self.is_leader:
            return
        if self.waiting:
            self._answer_waiting(lambda w: w.deadline_ms <= now_ms, REQUEST_TIMED_OUT, out)
        if self.pending_isr is not None and now_ms >= self.alter_sent_ms + self._alter_retry_ms():
            self._send_alter_partition(now_ms, out)

    def log_info(self) -> tuple[int, int]:
        """(last epoch, LEO): what the controller compares in unclean recovery."""
        return (self.log.last_epoch_of_batches(), self.log.end_offset)

