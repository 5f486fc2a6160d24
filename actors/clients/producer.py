"""The producer client: acks 0/1/all, retries, idempotence, metadata refresh, timeouts.

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
  retry.backoff.ms, with a metadata refresh when leadership is in question, until the command's
  delivery timeout; then the records fail.
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
from collections import deque
from itertools import groupby
from operator import attrgetter
from dataclasses import dataclass, field, replace

from actors.contract import Envelope, Output, StartContext
from actors.replication.messages import (
    CORRUPT_MESSAGE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_TOPIC_OR_PARTITION,
    RETRIABLE,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceRequests,
    ProduceResponse,
    ProduceResponses,
    coalesce,
)
from observability.events import LoadFinished, LoadStarted, LoadThrottled, ProduceAck, ProduceAttempt, ProduceRetry, ProduceSend
from storage.partition_log import NO_PRODUCER, RecordBatch

from observability.latency import LatencyHistogram
from .records import encode_records

RETRY_BACKOFF_MS = 100  # retry.backoff.ms
REQUEST_TIMEOUT_MS = 5_000  # an unanswered request is retried after this
METADATA_TIMEOUT_MS = 1_000
# A batch's bound when no `batch.size` is set (kraftlab's default, which the simulator's library and
# sweeps were measured with); a `batch.size` (bytes, Kafka's meaning) replaces it.
MAX_BATCH_RECORDS = 1_000
LINGER_MS = 0  # linger.ms: 0 sends a partition's records as soon as none of its batches is in flight
# An idempotent producer's id after its n-th sequence reset: its first id + n * this (client ids
# are 1000 + their number, so no two producers ever share one).
PRODUCER_ID_STRIDE = 1_000_000

ACKS = {"all": -1, -1: -1, 1: 1, 0: 0}
ACKS_NAMES = {-1: "all", 1: "1", 0: "0"}  # the history's `acks` column
# Errors with which the leader refuses a produce request before appending anything: a batch whose
# every attempt ended so was surely not written. Any other error (NOT_LEADER_OR_FOLLOWER also ends
# requests that were appended and waited for the HWM), or no answer, leaves it unknown.
REFUSED_BEFORE_APPEND = frozenset({NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_TOPIC_OR_PARTITION, CORRUPT_MESSAGE})
RUN_ENDED = "RUN_ENDED"


@dataclass(frozen=True, slots=True)
class ProduceCommand:
    """Produce `values` to one partition (a scenario `produce` step, or load)."""

    command_id: int
    topic: str
    partition: int
    values: tuple[str, ...]
    acks: int  # -1, 0 or 1
    idempotent: bool
    timeout_ms: int


@dataclass
class CommandProgress:
    command: ProduceCommand
    acked: int = 0
    failed: int = 0  # outcome fail or info: not acknowledged
    errors: list[str] = field(default_factory=list)
    first_sequence: int = -1  # the sequences of its records: first_sequence + i

    @property
    def done(self) -> bool:
        return self.acked + self.failed >= len(self.command.values)


@dataclass(slots=True)
class PendingRecord:
    command_id: int
    sequence: int
    value: str
    acks: int
    idempotent: bool
    deadline_ms: float
    created_ms: float  # when the application handed it over: latency counts from here


@dataclass
class InFlightBatch:
    records: list[PendingRecord]
    batch: RecordBatch
    acks: int
    attempts: int = 0
    request_id: int = -1
    sent_ms: float = 0.0
    # None while an attempt awaits its answer; else the time the next attempt is due.
    retry_at_ms: float | None = None
    last_error: str | None = None
    deadline_ms: float = 0.0  # the earliest delivery deadline of its records (set once)
    # True once an attempt may have been appended: sent and not answered, or answered with an
    # error that does not rule the append out. Decides "fail" or "info" if it never succeeds.
    maybe_written: bool = False
    order: int = 0  # batches are numbered as they are made: the order of `in_flight`
    buffered: int = 0  # what its records hold of buffer.memory: sum of buffered_size

    def __post_init__(self) -> None:
        self.deadline_ms = min(r.deadline_ms for r in self.records)


LOAD_TICK_MS = 10  # records due are queued every 10 ms, on a fixed grid (a linger.ms-like batching window)
LOAD_DELIVERY_TIMEOUT_MS = 30_000
# What a record takes of the producer's buffer beyond its value: its key, headers and varint
# framing, and its share of a batch header (Kafka's DefaultRecord and RecordBatch, 61-byte header).
# Kafka's pool hands out whole batch.size buffers; counting record bytes is kraftlab's simplification.
RECORD_OVERHEAD_BYTES = 70
BUFFER_MEMORY = 33_554_432  # buffer.memory, Kafka's default (32 MiB)
MAX_BLOCK_MS = 60_000.0  # max.block.ms, Kafka's default


def buffered_size(value: str) -> int:
    """What a record holds of the producer's buffer while it waits or is in flight."""
    return len(value) + RECORD_OVERHEAD_BYTES


def buffered_size_of(values) -> int:
    """What these records hold of the buffer: `buffered_size` of each, summed."""
    return sum(map(len, values)) + RECORD_OVERHEAD_BYTES * len(values)


@dataclass
class LoadPlan:
    """Open-loop load: `rate_per_s` records a second spread over `partitions` round-robin, from
    `start_ms` until `until_ms` (None: forever), each `message_bytes` long.

    `rate_per_s` None is unthrottled load (producer-perf-test's `--throughput -1`): new records are
    made as fast as the producer's buffer frees up, so that at most `buffer_records` wait or are in
    flight at once (the role of buffer.memory); a benchmark finds the ceiling this way."""

    partitions: list[tuple[str, int]]
    rate_per_s: float | None
    message_bytes: int
    acks: int
    start_ms: float
    until_ms: float | None
    idempotent: bool = False  # enable.idempotence (the load step's, resolved)
    generated: int = 0  # records that came due (offered): sent, blocked or throttled
    command_id: int = -1
    buffer_records: int = 0
    # Backpressure (rate-limited load): the buffer's size in bytes (buffer.memory), how long the
    # generator's send() may block for space (max.block.ms), and the delivery timeout counted from
    # a record's entry into the buffer (delivery.timeout.ms).
    buffer_memory: int = BUFFER_MEMORY
    max_block_ms: float = MAX_BLOCK_MS
    delivery_timeout_ms: float = LOAD_DELIVERY_TIMEOUT_MS
    # The record whose send() is blocked on a full buffer (already in the history as sent), and
    # since when; None while the generator runs free. Records that come due meanwhile are not
    # offered to the producer: `throttled` counts them.
    blocked: tuple[tuple[str, int], PendingRecord] | None = None  # (its partition, the record)
    blocked_since_ms: float = 0.0
    throttled: int = 0
    # The next load round: rounds fall on a fixed grid, `start_ms` + k x LOAD_TICK_MS, whatever
    # else the producer handles meanwhile (an acknowledgement must not postpone the next round).
    # Counted as an integer: the grid computed the same way every time, so that a round is
    # exactly the deadline the producer asked for (a float division could land one round short and
    # ask for the same instant again, for ever).
    rounds: int = 0
    next_round_ms: float = 0.0

    def advance_rounds(self, now_ms: float) -> None:
        """Make `next_round_ms` the first round of the grid strictly after `now_ms`."""
        while self.start_ms + self.rounds * LOAD_TICK_MS <= now_ms:
            self.rounds += 1
        self.next_round_ms = self.start_ms + self.rounds * LOAD_TICK_MS


MAX_BLOCK_TIMEOUT = "MAX_BLOCK_TIMEOUT"  # Kafka: "Failed to allocate memory within the configured max blocking time"


@dataclass(frozen=True, slots=True)
class AckedBatch:
    """An acknowledged batch: where it went and what it held (for the loss checks)."""

    topic: str
    partition: int
    base_offset: int
    count: int
    crc: int
    acks: int


class ProducerNode:
    def __init__(self, ctx: StartContext, brokers: list[str], producer_id: int) -> None:
        self.node_id = ctx.node_id
        self.brokers = brokers
        self.producer_id = producer_id
        # The producer id idempotent batches carry: a new one after each sequence reset
        # (`_reset_sequences`), with the sequences of every partition from 0 again.
        self.idempotent_id = producer_id
        self.sequence_resets = 0
        self.leaders: dict[tuple[str, int], tuple[int | None, int]] = {}
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
        # its oldest queued record's), in a heap: `scheduled` holds each partition's live entry,
        # never later than its deadline (it moves earlier only through `_schedule`).
        self.deadline_heap: list[tuple[float, tuple[str, int]]] = []
        self.scheduled: dict[tuple[str, int], float] = {}
        # A lower bound of the delivery deadlines of each partition's queued records (exact after
        # an expiry pass), so that the pass reads only the queues that may hold an expired record.
        self.queue_min_deadline: dict[tuple[str, int], float] = {}
        self.expiry_heap: list[tuple[float, tuple[str, int]]] = []  # (bound, key): lazily checked
        self.batches_made = 0
        self.sequences: dict[tuple[str, int], int] = {}
        self.commands: dict[int, CommandProgress] = {}
        self.acked_batches: list[AckedBatch] = []
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
        out.emit(ProduceSend(self.node_id, cmd.topic, cmd.partition, ACKS_NAMES[cmd.acks], tuple(range(first, first + len(cmd.values)))))
        self._send_ready(now_ms, out)
        return self._finish(out)

    def start_load(
        self,
        partitions,
        rate_per_s: float | None,
        message_bytes: int,
        acks: int,
        now_ms: float,
        until_ms: float | None,
        buffer_records: int = 0,
        idempotent: bool = False,
        buffer_memory: int = BUFFER_MEMORY,
        max_block_ms: float = MAX_BLOCK_MS,
        delivery_timeout_ms: float = LOAD_DELIVERY_TIMEOUT_MS,
        linger_ms: float = LINGER_MS,
        batch_size: int | None = None,
    ) -> Output:
        """A local call: start open-loop load (the scenario `load` step), or unthrottled load
        (`rate_per_s` None, at most `buffer_records` outstanding; for benchmarks). `idempotent`:
        its batches carry the producer id and sequences (acks=all only, as Kafka requires)."""
        out = Output()
        if rate_per_s is None and buffer_records <= 0:
            raise ValueError("unthrottled load needs a positive buffer_records")
        if idempotent and acks != -1:
            raise ValueError("an idempotent producer needs acks=all")
        plan = LoadPlan(list(partitions), rate_per_s, message_bytes, acks, now_ms, until_ms, idempotent, command_id=-1 - len(self.commands), buffer_records=buffer_records,
                        buffer_memory=buffer_memory, max_block_ms=max_block_ms, delivery_timeout_ms=delivery_timeout_ms)
        self.load = self.last_load = plan
        self.linger_ms, self.batch_size = linger_ms, batch_size
        self.commands[plan.command_id] = CommandProgress(ProduceCommand(plan.command_id, "", 0, (), acks, idempotent, delivery_timeout_ms))
        out.emit(LoadStarted(rate_per_s, len(partitions), ACKS_NAMES[acks]))
        self._generate(now_ms, out)
        return self._finish(out)

    def _generate(self, now_ms: float, out: Output) -> None:
        plan = self.load
        if plan is None:
            return
        plan.advance_rounds(now_ms)
        end = now_ms if plan.until_ms is None else min(now_ms, plan.until_ms)
        if plan.rate_per_s is None:
            outstanding = self.queued_records + sum(len(b.records) for b in self.in_flight.values())
            due = plan.buffer_records - outstanding if plan.until_ms is None or now_ms < plan.until_ms else 0
        else:
            due = int((end - plan.start_ms) * plan.rate_per_s / 1000.0) + 1 - plan.generated
            if plan.blocked is not None:
                self._unblock(plan, now_ms, False, out)
        pad = "x" * max(0, plan.message_bytes - 16)
        width = max(plan.message_bytes, 8)
        prefix = f"{self.producer_id}-"
        bounded = plan.rate_per_s is not None  # unthrottled load bounds itself (`buffer_records`)
        deadline = now_ms + plan.delivery_timeout_ms
        # The per-record loop is the load's hot path (on Ray its time is inside every record's
        # latency: records are stamped when the round begins): what does not change per record is
        # looked up once, and the counters live in locals until the loop ends.
        partitions, n_partitions = plan.partitions, len(plan.partitions)
        command_id, acks_code, idempotent, buffer_memory = plan.command_id, plan.acks, plan.idempotent, plan.buffer_memory
        handed: dict[tuple[str, int], list[int]] = {}
        queued: dict[tuple[str, int], int] = {}
        queues: dict[tuple[str, int], deque[PendingRecord]] = {}
        buffered = self.buffered_bytes
        n, sequence = plan.generated, self.next_sequence
        throttled = 0
        for i in range(max(due, 0)):
            if plan.blocked is not None:
                # The generator is blocked in send(): the rest of what is due is not offered.
                throttled = due - i
                break
            key = partitions[n % n_partitions]
            value = f"{prefix}{n}-{pad}"[:width]
            n += 1
            record = PendingRecord(command_id, sequence, value, acks_code, idempotent, deadline, now_ms)
            sequences = handed.get(key)
            if sequences is None:
                sequences = handed[key] = []
                queues[key] = self._queue(key)
            sequences.append(sequence)
            sequence += 1
            size = len(value) + RECORD_OVERHEAD_BYTES  # buffered_size
            if bounded and buffered + size > buffer_memory:
                # buffer.memory is full: send() blocks on this record (invoked, so it is in the
                # history) until there is room or max.block.ms has passed (`_unblock`).
                plan.blocked, plan.blocked_since_ms = (key, record), now_ms
                continue
            queues[key].append(record)
            buffered += size
            queued[key] = queued.get(key, 0) + 1
        plan.generated = n + throttled
        self.next_sequence = sequence
        self.buffered_bytes = buffered
        for key, count in queued.items():
            self._queued(key, deadline, count)
        acks = ACKS_NAMES[plan.acks]
        for (topic, partition), sequences in handed.items():
            out.emit(ProduceSend(self.node_id, topic, partition, acks, tuple(sequences)))
        if throttled:
            plan.throttled += throttled
            out.emit(LoadThrottled(throttled))
        if plan.until_ms is not None and now_ms >= plan.until_ms:
            self.stop_load(now_ms, out)

    def _unblock(self, plan: LoadPlan, now_ms: float, stopping: bool, out: Output) -> None:
        """The blocked send() returns: its record enters the buffer if there is room now (or the
        load is stopping: the buffer then holds one record beyond its size), or fails, never
        written, once it has waited max.block.ms."""
        key, r = plan.blocked
        size = buffered_size(r.value)
        if stopping or self.buffered_bytes + size <= plan.buffer_memory:
            deadline = now_ms + plan.delivery_timeout_ms
            self._queue(key).append(replace(r, deadline_ms=deadline))
            self.buffered_bytes += size
            self._queued(key, deadline, 1)
        elif now_ms >= plan.blocked_since_ms + plan.max_block_ms:
            self.buffered_bytes += size  # `_failed` gives back what each record took
            self._failed(key, [r], MAX_BLOCK_TIMEOUT, now_ms, out, False)
        else:
            return
        plan.blocked = None

    def stop_load(self, now_ms: float, out: Output) -> None:
        """No more records from the background load (its duration is over, or the run is)."""
        if self.load is not None:
            if self.load.blocked is not None:
                self._unblock(self.load, now_ms, True, out)
            out.emit(LoadFinished(self.load.generated))
            self.load = None

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
        due = self._due_keys(now_ms)
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
            self._schedule(key)  # their heap entries were taken by `_due_keys`
        return self._finish(out)

    def _finish(self, out: Output) -> Output:
        deadlines: list[float] = []
        if self.metadata_request is not None:
            deadlines.append(self.metadata_request[1] + METADATA_TIMEOUT_MS)
        earliest = self._earliest_deadline()
        if earliest is not None:
            deadlines.append(earliest)
        if self.metadata_wanted and self.queued_records:
            deadlines.append(self._now + RETRY_BACKOFF_MS)
        if self.load is not None:
            deadlines.append(self.load.next_round_ms)
        out.next_deadline_ms = min(deadlines) if deadlines else None
        out.sends = coalesce(out.sends, ProduceRequest, ProduceRequests)
        return out

    # --- metadata ---------------------------------------------------------------------------------

    def _refresh_metadata(self, now_ms: float, out: Output) -> None:
        self._now = now_ms
        if self.metadata_request is not None:
            return
        self.next_request_id += 1
        self.metadata_request = (self.next_request_id, now_ms)
        target = self.brokers[self.metadata_broker % len(self.brokers)]
        out.send(Envelope(self.node_id, target, MetadataRequest(self.next_request_id)))

    def _on_metadata(self, resp: MetadataResponse, now_ms: float, out: Output) -> None:
        if self.metadata_request is None or resp.request_id != self.metadata_request[0]:
            return
        self.metadata_request = None
        self.metadata_wanted = False
        for pm in resp.partitions:
            key = (pm.topic, pm.partition)
            # Metadata from a broker that is behind (an older leader epoch) is ignored, as Kafka
            # clients do; a leader we failed to reach is asked again only with newer news.
            known = self.leaders.get(key)
            if known is None or pm.leader_epoch > known[1] or (pm.leader_epoch == known[1] and known[0] is not None):
                self.leaders[key] = (pm.leader, pm.leader_epoch)
        if any(self.leaders.get(k, (None, 0))[0] is None for k, q in self.queues.items() if q):
            self.metadata_wanted = True  # some partition has no leader yet: ask again after a back-off
            self.metadata_broker += 1

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
            self._schedule(key)
        if self.metadata_wanted and self.metadata_request is None and self.queued_records:
            self._refresh_metadata(now_ms, out)

    def _batch_ready(self, q: deque[PendingRecord], now_ms: float) -> bool:
        """Whether a partition's queued records make a batch to send now (Kafka's
        RecordAccumulator.ready): always with linger.ms 0; else once they fill a batch, once the
        oldest has waited linger.ms, or when no more records are coming soon: the load ended (as
        close() flushes) or its send() is blocked on a full buffer (Kafka: the pool is exhausted)."""
        if self.linger_ms <= 0 or q[0].created_ms + self.linger_ms <= now_ms:
            return True
        load = self.load
        if load is None or load.blocked is not None:
            return True
        if self.batch_size is None:
            return len(q) >= MAX_BATCH_RECORDS
        size = 0
        for r in q:
            size += buffered_size(r.value)
            if size >= self.batch_size:
                return True
        return False

    def _queued(self, key: tuple[str, int], deadline_ms: float, count: int) -> None:
        """`count` records with this delivery deadline were queued for `key`."""
        self.queued_records += count
        self.sendable[key] = None
        known = self.queue_min_deadline.get(key)
        if known is None or deadline_ms < known:
            self.queue_min_deadline[key] = deadline_ms
            heapq.heappush(self.expiry_heap, (deadline_ms, key))
        self._schedule(key)

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

    def _schedule(self, key: tuple[str, int]) -> None:
        """Called where a partition's deadline may have moved earlier."""
        d = self._key_deadline(key)
        if d is not None and d < self.scheduled.get(key, float("inf")):
            self.scheduled[key] = d
            heapq.heappush(self.deadline_heap, (d, key))

    def _earliest_deadline(self) -> float | None:
        """The earliest deadline of any partition: the heap's top once checked against the
        partition (entries moved later or superseded are dropped or moved on the way)."""
        heap = self.deadline_heap
        while heap:
            d, key = heap[0]
            if self.scheduled.get(key) != d:
                heapq.heappop(heap)  # superseded by an earlier entry
                continue
            actual = self._key_deadline(key)
            if actual == d:
                return d
            heapq.heappop(heap)
            if actual is None:
                del self.scheduled[key]
            else:
                self.scheduled[key] = actual
                heapq.heappush(heap, (actual, key))
        return None

    def _due_keys(self, now_ms: float) -> list[tuple[str, int]]:
        """Take from the heap the partitions whose deadline is due now (their entries are gone:
        the caller schedules them again); entries found to be early move to the real deadline."""
        heap, due = self.deadline_heap, []
        while heap and heap[0][0] <= now_ms:
            d, key = heapq.heappop(heap)
            if self.scheduled.get(key) != d:
                continue  # superseded
            del self.scheduled[key]
            actual = self._key_deadline(key)
            if actual is None:
                continue
            if actual > now_ms:
                self.scheduled[key] = actual
                heapq.heappush(heap, (actual, key))
            else:
                due.append(key)
        return due

    def _expiry_candidates(self, now_ms: float) -> list[tuple[str, int]]:
        """The partitions whose queued records may include one past its delivery deadline."""
        heap, found = self.expiry_heap, {}
        while heap and heap[0][0] <= now_ms:
            bound, key = heapq.heappop(heap)
            if self.queue_min_deadline.get(key) == bound:
                found[key] = None
        return sorted(found, key=self.queue_order.__getitem__)

    def _queue(self, key: tuple[str, int]) -> deque[PendingRecord]:
        q = self.queues.get(key)
        if q is None:
            q = self.queues[key] = deque()
            self.queue_order[key] = len(self.queue_order)
        return q

    def _new_batch(self, key: tuple[str, int], q: deque[PendingRecord], now_ms: float) -> InFlightBatch:
        first = q[0]
        records = [q.popleft()]
        if self.batch_size is None:
            while q and len(records) < MAX_BATCH_RECORDS and q[0].acks == first.acks and q[0].idempotent == first.idempotent:
                records.append(q.popleft())
        else:
            # batch.size bounds the batch's bytes (`buffered_size`); one record larger than it
            # still goes, alone, as in Kafka.
            size, limit = buffered_size(first.value), self.batch_size
            while q and q[0].acks == first.acks and q[0].idempotent == first.idempotent:
                size += buffered_size(q[0].value)
                if size > limit:
                    break
                records.append(q.popleft())
        self.queued_records -= len(records)
        values = [r.value for r in records]
        payload = encode_records(self.node_id, [r.sequence for r in records], values)
        batch = RecordBatch.of(payload, len(records), NO_PRODUCER, -1)
        if first.idempotent:
            batch = self._numbered(key, batch)
        self.batches_made += 1
        buffered = buffered_size_of(values)
        return InFlightBatch(records, batch, first.acks, retry_at_ms=now_ms, order=self.batches_made, buffered=buffered)

    def _numbered(self, key: tuple[str, int], batch: RecordBatch) -> RecordBatch:
        """The batch with the current producer id and the partition's next sequences."""
        seq = self.sequences.get(key, 0)
        self.sequences[key] = seq + batch.count
        return replace(batch, producer_id=self.idempotent_id, base_sequence=seq)

    def _reset_sequences(self, b: InFlightBatch) -> None:
        """An idempotent batch failed, or was refused as out of order: the leader may or may not
        hold its sequences, so the partition's next batch could never be in sequence (each would be
        refused with OUT_OF_ORDER_SEQUENCE_NUMBER). As Kafka's idempotent producer bumps its epoch
        and numbers every partition from 0 again (KIP-360), this one takes a new producer id, of
        which no leader has a state. Once per failure: a batch made before the last reset (another
        partition's, still in flight under the old id) resets nothing."""
        if b.batch.producer_id != self.idempotent_id:
            return
        self.sequence_resets += 1
        self.idempotent_id = self.producer_id + PRODUCER_ID_STRIDE * self.sequence_resets
        self.sequences = {}

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
            self._acked(key, b, resp.base_offset, now_ms, out)
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

    def _retry_later(self, key, b: InFlightBatch, error: str, now_ms: float, out: Output, *, refresh: bool) -> None:
        b.last_error = error
        b.retry_at_ms = now_ms + RETRY_BACKOFF_MS
        self.retrying[key] = None
        self._schedule(key)
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
                self._schedule(key)
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

    def _acked(self, key, b: InFlightBatch, base_offset: int, now_ms: float, out: Output) -> None:
        topic, partition = key
        self.acked += len(b.records)
        self.buffered_bytes -= b.buffered
        self.acked_batches.append(AckedBatch(topic, partition, base_offset, b.batch.count, b.batch.crc, b.acks))
        # Records of a batch mostly share their command and hand-over time (load makes them in
        # 10 ms rounds): one update per run of equal values, not per record (the load hot path).
        for command_id, run in groupby(b.records, key=attrgetter("command_id")):
            self.commands[command_id].acked += sum(1 for _ in run)
        for created_ms, run in groupby(b.records, key=attrgetter("created_ms")):
            self.latency.record_ms(now_ms - created_ms, sum(1 for _ in run))
        out.emit(ProduceAck(
            self.node_id, topic, partition, ACKS_NAMES[b.acks], "ok", tuple(r.sequence for r in b.records),
            tuple(now_ms - r.created_ms for r in b.records), None if b.acks == 0 else base_offset, b.batch.crc,
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
            ))
