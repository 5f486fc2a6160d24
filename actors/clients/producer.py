"""The producer client: acks 0/1/all, retries, idempotence, metadata refresh, timeouts.

As Kafka's producer, in parts: this module is the Sender (batches sent, answered, retried, expired)
and the client's calls; accumulator.py the RecordAccumulator (the queues and the batches made from
them), idempotence.py the idempotent numbering, producer_metadata.py the client's metadata, and
load_generator.py the background load; mixed into ProducerNode.

Records are strings; a batch's records are msgpack-encoded into its opaque payload (brokers never
decode them). Per partition at most one batch is in flight (max.in.flight.requests = 1), so
order is kept without idempotence too; records waiting meanwhile go together into the next batch.

- A batch keeps its producer id and base sequence across retries, so an idempotent producer's retry
  is recognised by the leader and answered with the original offset (KIP-98). With one batch in
  flight per partition, a retry is always of the last batch the leader holds from the producer.
  When an idempotent batch fails (its sequences may or may not be in the log), or the leader
  refuses one OUT_OF_ORDER_SEQUENCE_NUMBER, the producer numbers from 0 again under a new producer
  id (Kafka bumps the producer epoch, KIP-360) and retries the refused batch so numbered.
- Retriable errors (not leader, epoch mismatches, NOT_ENOUGH_REPLICAS*, timeouts) are retried after
  a back-off, with a metadata refresh when leadership is in question, until the command's
  delivery timeout; then the records fail. The back-off is Kafka's since 3.7 (KIP-580,
  RecordAccumulator.shouldBackoff): retry.backoff.ms doubled at each failed attempt up to
  retry.backoff.max.ms, times a random factor in [0.8, 1.2) from the node's seeded stream, and
  skipped once the metadata names a new leader.
- acks=0: the records count as acknowledged when sent (Kafka completes them at once, offset -1).

Every record gets the next sequence of its producer when it is handed over; (producer name,
sequence) identifies it in the history and travels in the batch payload (records.py). Every record
gets exactly one `produce_send` (handed over) and one `produce_ack` row, whose outcome is "ok", "fail"
(surely not written: never sent, or every attempt refused before any append) or "info" (unknown: an
attempt went unanswered or failed after the leader may have appended it, as Jepsen counts
indeterminate operations). At the end of a run `abandon` settles what is still pending.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from itertools import groupby
from operator import attrgetter

from actors.contract import Envelope, Output, StartContext
from actors.deadline_index import DeadlineIndex
from actors.replication.messages import (
    CORRUPT_MESSAGE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    RETRIABLE,
    UNKNOWN_TOPIC_OR_PARTITION,
    MetadataResponse,
    ProduceRequest,
    ProduceRequests,
    ProduceResponse,
    ProduceResponses,
    coalesce,
)
from observability.events import ProduceAck, ProduceAttempt, ProduceRetry, ProduceSend
from observability.latency import LatencyHistogram
from storage.partition_log import NO_PRODUCER

from .accumulator import RecordAccumulator
from .idempotence import Idempotence
from .load_generator import LoadGeneration, LoadPlan
from .produce_state import (
    ACKS_NAMES,
    LINGER_MS,
    CommandProgress,
    InFlightBatch,
    PendingRecord,
    ProduceCommand,
    buffered_size,
    buffered_size_of,
)
from .producer_metadata import METADATA_TIMEOUT_MS, ClientMetadata
from .topic_ids import TopicIds

RETRY_BACKOFF_MS = 100  # retry.backoff.ms
RETRY_BACKOFF_MAX_MS = 1_000  # retry.backoff.max.ms (KIP-580)
RETRY_BACKOFF_JITTER = 0.2  # CommonClientConfigs.RETRY_BACKOFF_JITTER
RETRY_BACKOFF_EXP_MAX = math.log2(RETRY_BACKOFF_MAX_MS / RETRY_BACKOFF_MS)  # ExponentialBackoff.expMax
REQUEST_TIMEOUT_MS = 5_000  # an unanswered request is retried after this

# Errors with which the leader refuses a produce request before appending anything: a batch whose
# every attempt ended so was surely not written. Any other error (NOT_LEADER_OR_FOLLOWER also ends
# requests that were appended and waited for the HWM), or no answer, leaves it unknown.
REFUSED_BEFORE_APPEND = frozenset({NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE})
RUN_ENDED = "RUN_ENDED"


class ProducerNode(LoadGeneration, ClientMetadata, RecordAccumulator, Idempotence):
    """The Kafka producer client (see the module's docstring); its load generator's calls
    (`start_load`, `stop_load`) are LoadGeneration's (load_generator.py)."""

    def __init__(self, ctx: StartContext, brokers: list[str], producer_id: int) -> None:
        self.node_id = ctx.node_id
        self.rng = ctx.rng  # the retry back-off's jitter
        self.brokers = brokers
        self.producer_id = producer_id
        # The producer id idempotent batches carry: a new one after each sequence reset
        # (`_reset_sequences`), with the sequences of every partition from 0 again.
        self.idempotent_id = producer_id
        self.sequence_resets = 0
        self.leaders: dict[tuple[str, int], tuple[int | None, int]] = {}
        self.topic_ids = TopicIds()
        self.metadata_request: tuple[int, float] | None = None  # (request id, sent at)
        self.metadata_wanted = True
        self.metadata_broker = 0
        self.queues: dict[tuple[str, int], deque[PendingRecord]] = {}
        self.in_flight: dict[tuple[str, int], InFlightBatch] = {}
        # The order the queues were made in (that of `queues`): partitions picked from the sets and
        # heaps below are visited in it, as a scan of every queue would visit them.
        self.queue_order: dict[tuple[str, int], int] = {}
        # Partitions that may have a batch to send: records were queued, or a batch left flight.
        self.sendable: dict[tuple[str, int], None] = {}
        self.retrying: dict[tuple[str, int], None] = {}  # in-flight batches waiting to be sent again
        self.queued_records = 0  # in all queues
        # Bytes of the records queued or in flight (what buffer.memory bounds): a record counts from
        # its entry into a queue until its outcome (`_acked`, `_failed`).
        self.buffered_bytes = 0
        # Each partition's next deadline (a batch's retry, request timeout or delivery timeout, or
        # its oldest queued record's, `_key_deadline`), scheduled wherever it may move earlier.
        self.deadlines: DeadlineIndex[tuple[str, int]] = DeadlineIndex(self._key_deadline)
        # A lower bound of the delivery deadlines of each partition's queued records (exact after
        # an expiry pass), so that the pass reads only the queues that may hold an expired record.
        self.queue_min_deadline: dict[tuple[str, int], float] = {}
        self.expiry_heap: list[tuple[float, tuple[str, int]]] = []  # (bound, key): lazily checked
        self.batches_made = 0
        self.sequences: dict[tuple[str, int], int] = {}
        self.commands: dict[int, CommandProgress] = {}
        self.batches_acked = 0  # acknowledged ok (a benchmark's figure; the history has each one)
        self.next_request_id = 0
        self.acked = 0
        self.failed = 0
        self.next_sequence = 0
        self.latency = LatencyHistogram()  # acknowledged records: handed over -> acknowledged
        # The newest background load's plan, kept after it ends (`load` is the running one).
        self.last_load: LoadPlan | None = None
        self._now = 0.0
        self.load: LoadPlan | None = None
        # Batching (Kafka's linger.ms and batch.size, set by a load's config): a partition's queued
        # records wait until they fill `batch_size` bytes or the oldest has waited `linger_ms`.
        # `batch_size` None: batches of at most MAX_BATCH_RECORDS records, sent at once.
        self.linger_ms = LINGER_MS
        self.batch_size: int | None = None

    # --- the role contract ------------------------------------------------------------------------

    def start(self, now_ms: float) -> Output:
        out = Output()
        self._refresh_metadata(now_ms, out)
        return self._finish(out)

    def submit(self, cmd: ProduceCommand, now_ms: float) -> Output:
        """A local call: queue a command's records."""
        out = Output()
        first = self.next_sequence
        self.next_sequence += len(cmd.values)
        self.commands[cmd.command_id] = CommandProgress(cmd, first_sequence=first)
        q = self._queue((cmd.topic, cmd.partition))
        for i, v in enumerate(cmd.values):
            q.append(PendingRecord(cmd.command_id, first + i, v, cmd.acks, cmd.idempotent, now_ms + cmd.timeout_ms, now_ms))
            self.buffered_bytes += buffered_size(v)
        self._queued((cmd.topic, cmd.partition), now_ms + cmd.timeout_ms, len(cmd.values))
        out.emit(ProduceSend(self.node_id, cmd.topic, cmd.partition, ACKS_NAMES[cmd.acks], tuple(range(first, first + len(cmd.values))),
                             self.topic_ids.get(cmd.topic)))
        self._send_ready(now_ms, out)
        return self._finish(out)

    def handle(self, env: Envelope, now_ms: float) -> Output:
        out = Output()
        p = env.payload
        if isinstance(p, ProduceResponses) or isinstance(p, ProduceResponse):
            for part in p.parts if isinstance(p, ProduceResponses) else (p,):
                self._on_produce_response(part, now_ms, out)
            load = self.load
            if load is not None and load.rate_per_s is None:
                self._generate(now_ms, out)  # unthrottled: refill the buffer at once
            elif load is not None and load.blocked is not None:
                self._unblock(load, now_ms, False, out)  # a blocked send() returns once there is room
        elif isinstance(p, MetadataResponse):
            self._on_metadata(p, now_ms, out)
        self._send_ready(now_ms, out)
        return self._finish(out)

    def tick(self, now_ms: float) -> Output:
        out = Output()
        if self.metadata_request is not None and now_ms >= self.metadata_request[1] + METADATA_TIMEOUT_MS:
            self.metadata_request = None
            self.metadata_broker += 1
            self.metadata_wanted = True
        # Only the partitions whose deadline is due can time out or expire (in_flight's order).
        due = self.deadlines.pop_due(now_ms)
        due_in_flight = sorted((k for k in due if k in self.in_flight), key=lambda k: self.in_flight[k].order)
        for key in due_in_flight:
            b = self.in_flight[key]
            if b.retry_at_ms is None and now_ms >= b.sent_ms + REQUEST_TIMEOUT_MS:
                b.maybe_written = True  # no answer: the request may have been appended
                self._retry_later(key, b, "REQUEST_TIMED_OUT", now_ms, out, refresh=True)
        if self.load is not None and now_ms >= self.load.next_round_ms:
            self._generate(now_ms, out)  # a round of the grid (not a wake-up for a retry or a timeout)
        self._expire(now_ms, out, due_in_flight)
        if self.metadata_wanted and self.metadata_request is None:
            self._refresh_metadata(now_ms, out)
        if self.linger_ms > 0:
            for key in due:
                if key not in self.in_flight:
                    self.sendable[key] = None  # its linger may be over
        self._send_ready(now_ms, out)
        for key in due:
            self.deadlines.schedule(key)  # their heap entries were taken by `pop_due`
        return self._finish(out)

    def _finish(self, out: Output) -> Output:
        deadlines: list[float] = []
        if self.metadata_request is not None:
            deadlines.append(self.metadata_request[1] + METADATA_TIMEOUT_MS)
        earliest = self.deadlines.earliest()
        if earliest is not None:
            deadlines.append(earliest)
        if self.metadata_wanted and self.queued_records:
            deadlines.append(self._now + RETRY_BACKOFF_MS)
        if self.load is not None:
            deadlines.append(self.load.next_round_ms)
        out.next_deadline_ms = min(deadlines) if deadlines else None
        out.sends = coalesce(out.sends, ProduceRequest, ProduceRequests)
        return out

    # --- sending ----------------------------------------------------------------------------------

    def _send_ready(self, now_ms: float, out: Output) -> None:
        """Send every batch that is due: a new one where none is in flight, or a retry."""
        self._now = now_ms
        candidates = self.sendable
        self.sendable = {}
        for key in self.retrying:
            if self.in_flight[key].retry_at_ms <= now_ms:
                candidates[key] = None
        for key in sorted(candidates, key=self.queue_order.__getitem__):
            q = self.queues[key]
            while True:
                b = self.in_flight.get(key)
                if b is None and q:
                    if not self._batch_ready(q, now_ms):
                        break  # lingering: `_key_deadline` wakes the producer when it is over
                    b = self.in_flight[key] = self._new_batch(key, q, now_ms)
                if b is None or b.retry_at_ms is None or now_ms < b.retry_at_ms:
                    break
                self._send(key, b, now_ms, out)
                if key in self.in_flight:
                    break  # waiting for its answer (acks=0 batches are done at once)
            self.deadlines.schedule(key)
        if self.metadata_wanted and self.metadata_request is None and (self.queued_records or self.retrying):
            # At once, as Kafka's Sender asks for metadata on its next poll: a batch waiting out
            # its back-off goes to the new leader as soon as the answer names one.
            self._refresh_metadata(now_ms, out)

    def _drop_in_flight(self, key: tuple[str, int]) -> None:
        del self.in_flight[key]
        self.retrying.pop(key, None)
        self.sendable[key] = None  # its queue's next batch may go

    def _key_deadline(self, key: tuple[str, int]) -> float | None:
        """The partition's next deadline: its batch's retry or request timeout and delivery
        timeout, and its oldest queued record's delivery timeout."""
        deadline = None
        b = self.in_flight.get(key)
        if b is not None:
            deadline = min(b.retry_at_ms if b.retry_at_ms is not None else b.sent_ms + REQUEST_TIMEOUT_MS, b.deadline_ms)
        q = self.queues.get(key)
        if q and (deadline is None or q[0].deadline_ms < deadline):
            deadline = q[0].deadline_ms
        if q and b is None and self.linger_ms > 0 and (deadline is None or q[0].created_ms + self.linger_ms < deadline):
            deadline = q[0].created_ms + self.linger_ms  # its linger is over: send what waits
        return deadline

    def _send(self, key: tuple[str, int], b: InFlightBatch, now_ms: float, out: Output) -> None:
        leader = self.leaders.get(key, (None, 0))[0]
        if leader is None:
            b.retry_at_ms = now_ms + RETRY_BACKOFF_MS
            self.retrying[key] = None
            self.metadata_wanted = True
            return
        self.next_request_id += 1
        b.request_id = self.next_request_id
        b.attempts += 1
        b.sent_ms = now_ms
        b.leader_epoch = self.leaders[key][1]
        b.retry_at_ms = None
        self.retrying.pop(key, None)
        topic, partition = key
        timeout = max(1, int(b.deadline_ms - now_ms))
        out.send(Envelope(self.node_id, f"b{leader}", ProduceRequest(b.request_id, topic, partition, b.acks, timeout, b.batch)))
        out.emit(ProduceAttempt(topic, partition, leader, b.batch.count, b.attempts, b.batch.crc))
        b.maybe_written = b.maybe_written or b.acks == 0
        if b.acks == 0:
            self._drop_in_flight(key)
            self._acked(key, b, -1, now_ms, out)

    def _on_produce_response(self, resp: ProduceResponse, now_ms: float, out: Output) -> None:
        key = (resp.topic, resp.partition)
        b = self.in_flight.get(key)
        if b is None or b.request_id != resp.request_id or b.retry_at_ms is not None:
            return  # an answer to an attempt already given up on
        if resp.error is None:
            self._drop_in_flight(key)
            self._acked(key, b, resp.base_offset, now_ms, out, resp.topic_id)
        else:
            if resp.error not in REFUSED_BEFORE_APPEND:
                b.maybe_written = True
            idempotent = b.batch.producer_id != NO_PRODUCER
            if resp.error in RETRIABLE:
                refresh = resp.error not in (NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND)
                self._retry_later(key, b, resp.error, now_ms, out, refresh=refresh)
            elif resp.error == OUT_OF_ORDER_SEQUENCE_NUMBER and idempotent:
                # The leader's sequences for this producer are not where the batch's follow on
                # (records lost with a log, or a batch that failed before): Kafka's idempotent
                # producer bumps its epoch and retries the batch numbered from 0 (KIP-360).
                self._reset_sequences(b)
                b.batch = self._numbered(key, b.batch)
                self._retry_later(key, b, resp.error, now_ms, out, refresh=False)
            else:
                self._drop_in_flight(key)
                self._failed(key, b.records, resp.error, now_ms, out, b.maybe_written)
                if idempotent:
                    self._reset_sequences(b)

    def _retry_backoff_ms(self, attempts: int) -> int:
        """Kafka's ExponentialBackoff.backoff(attempts - 1) for a batch's retries (KIP-580)."""
        term = RETRY_BACKOFF_MS * 2 ** min(attempts - 1, RETRY_BACKOFF_EXP_MAX)
        return min(int(term * self.rng.uniform(1 - RETRY_BACKOFF_JITTER, 1 + RETRY_BACKOFF_JITTER)), RETRY_BACKOFF_MAX_MS)

    def _retry_later(self, key, b: InFlightBatch, error: str, now_ms: float, out: Output, *, refresh: bool) -> None:
        b.last_error = error
        b.retry_at_ms = now_ms + self._retry_backoff_ms(max(b.attempts, 1))
        self.retrying[key] = None
        self.deadlines.schedule(key)
        out.emit(ProduceRetry(key[0], key[1], error, b.attempts))
        if refresh:
            self.metadata_wanted = True

    def _expire(self, now_ms: float, out: Output, due_in_flight: list[tuple[str, int]]) -> None:
        """Fail what is past its delivery deadline: batches in flight among `due_in_flight` (the
        partitions whose deadline is due, in in_flight's order), then queued records."""
        for key in due_in_flight:
            b = self.in_flight.get(key)
            if b is not None and b.deadline_ms <= now_ms:
                self._drop_in_flight(key)
                awaiting_answer = b.retry_at_ms is None and b.attempts > 0
                self._failed(key, b.records, b.last_error or "DELIVERY_TIMEOUT", now_ms, out, b.maybe_written or awaiting_answer)
                if b.batch.producer_id != NO_PRODUCER:
                    self._reset_sequences(b)
        for key in self._expiry_candidates(now_ms):
            q = self.queues[key]
            if not q:
                del self.queue_min_deadline[key]
                continue
            expired = [r for r in q if r.deadline_ms <= now_ms]
            if expired:
                kept = deque(r for r in q if r.deadline_ms > now_ms)
                self.queues[key] = kept
                self.queued_records -= len(expired)
                self._failed(key, expired, "DELIVERY_TIMEOUT", now_ms, out, False)
                q = kept
            if q:
                bound = self.queue_min_deadline[key] = min(r.deadline_ms for r in q)
                heapq.heappush(self.expiry_heap, (bound, key))
                self.deadlines.schedule(key)
            else:
                del self.queue_min_deadline[key]

    def abandon(self, now_ms: float) -> Output:
        """A local call at the end of a run: no more records; every record still pending gets its
        outcome now ("info" if an attempt may have been appended, else "fail"), so that the
        history has one `produce_ack` for each `produce_send`."""
        out = Output()
        self.stop_load(now_ms, out)
        for key, b in list(self.in_flight.items()):
            self._drop_in_flight(key)
            awaiting_answer = b.retry_at_ms is None and b.attempts > 0
            self._failed(key, b.records, RUN_ENDED, now_ms, out, b.maybe_written or awaiting_answer)
        for key, q in self.queues.items():
            if q:
                self._failed(key, list(q), RUN_ENDED, now_ms, out, False)
                self.queued_records -= len(q)
                q.clear()
        return self._finish(out)

    # --- outcomes ---------------------------------------------------------------------------------

    def _acked(self, key, b: InFlightBatch, base_offset: int, now_ms: float, out: Output, topic_id: str | None = None) -> None:
        """`topic_id`: that of the topic whose leader acknowledged (acks=0: the one the metadata names)."""
        topic, partition = key
        self.acked += len(b.records)
        self.buffered_bytes -= b.buffered
        self.batches_acked += 1
        # Records of a batch mostly share their command and hand-over time (load makes them in
        # 10 ms rounds): one update per run of equal values, not per record (the load hot path).
        for command_id, run in groupby(b.records, key=attrgetter("command_id")):
            self.commands[command_id].acked += sum(1 for _ in run)
        for created_ms, run in groupby(b.records, key=attrgetter("created_ms")):
            self.latency.record_ms(now_ms - created_ms, sum(1 for _ in run))
        out.emit(ProduceAck(
            self.node_id, topic, partition, ACKS_NAMES[b.acks], "ok", tuple(r.sequence for r in b.records),
            tuple(now_ms - r.created_ms for r in b.records), None if b.acks == 0 else base_offset, b.batch.crc,
            topic_id=topic_id or self.topic_ids.get(topic),
        ))

    def _release(self, records: list[PendingRecord]) -> None:
        """Records settled: their bytes leave the buffer."""
        self.buffered_bytes -= buffered_size_of([r.value for r in records])

    def _failed(self, key, records: list[PendingRecord], error: str, now_ms: float, out: Output, maybe_written: bool) -> None:
        self.failed += len(records)
        self._release(records)
        for r in records:
            p = self.commands[r.command_id]
            p.failed += 1
            if error not in p.errors:
                p.errors.append(error)
        # Records queued together may mix acks settings only across batches; a batch has one.
        for acks, run in groupby(records, key=attrgetter("acks")):
            run = list(run)
            out.emit(ProduceAck(
                self.node_id, key[0], key[1], ACKS_NAMES[acks], "info" if maybe_written else "fail",
                tuple(r.sequence for r in run), tuple(now_ms - r.created_ms for r in run), error=error,
                topic_id=self.topic_ids.get(key[0]),
            ))
