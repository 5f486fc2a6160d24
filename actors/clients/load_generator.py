"""The producer's load generator (a scenario `load` step, or a benchmark's unthrottled load), as
Kafka's producer-perf-test drives a KafkaProducer: records made on a fixed grid of rounds at the
load's rate (or as fast as the buffer frees up), handed to the producer's queues, blocked when
buffer.memory is full (max.block.ms), with a `produce_send` row per partition and round.

`LoadGeneration` is a part of `ProducerNode` (producer.py), kept apart because it is a concern of
its own: the application above the client. It reads and changes the producer's queues and buffer
(`_queue`, `_queued`, `queued_records`, `in_flight`, `buffered_bytes`, `next_sequence`) and ends a
record that waited too long through the producer's `_failed`, as KafkaProducer.send() does."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from actors.contract import Output
from observability.events import LoadFinished, LoadPaused, LoadStarted, LoadThrottled, ProduceSend

from .produce_state import (
    ACKS_NAMES,
    LINGER_MS,
    RECORD_OVERHEAD_BYTES,
    CommandProgress,
    PendingRecord,
    ProduceCommand,
    buffered_size,
)

LOAD_TICK_MS = 10  # records due are queued every 10 ms, on a fixed grid (a linger.ms-like batching window)
LOAD_DELIVERY_TIMEOUT_MS = 30_000
BUFFER_MEMORY = 33_554_432  # buffer.memory, Kafka's default (32 MiB)
MAX_BLOCK_MS = 60_000.0  # max.block.ms, Kafka's default


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
    # Idle periods (the `pause_load` step): [from, to) spans in which no record comes due; the
    # open-loop schedule counts only the time outside them, so the load resumes at its rate
    # without a burst of what the pause did not offer. In time order, not overlapping.
    pauses: list[tuple[float, float]] = field(default_factory=list)

    def active_ms(self, now_ms: float) -> float:
        """The time since `start_ms` outside the pauses."""
        paused = sum(max(0.0, min(now_ms, to) - max(self.start_ms, since)) for since, to in self.pauses)
        return now_ms - self.start_ms - paused

    def pause(self, now_ms: float, until_ms: float) -> None:
        """No record comes due from now until `until_ms` (a pause still on is extended)."""
        if self.pauses and self.pauses[-1][1] > now_ms:
            since, to = self.pauses[-1]
            self.pauses[-1] = (since, max(to, until_ms))
        else:
            self.pauses.append((now_ms, until_ms))

    def advance_rounds(self, now_ms: float) -> None:
        """Make `next_round_ms` the first round of the grid strictly after `now_ms`."""
        while self.start_ms + self.rounds * LOAD_TICK_MS <= now_ms:
            self.rounds += 1
        self.next_round_ms = self.start_ms + self.rounds * LOAD_TICK_MS


MAX_BLOCK_TIMEOUT = "MAX_BLOCK_TIMEOUT"  # Kafka: "Failed to allocate memory within the configured max blocking time"


class LoadGeneration:
    """The load-generating calls of `ProducerNode` (see the module's docstring). `load` is the
    running load's plan (None: no load), `last_load` the newest one's, kept after it ends."""

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
        out.emit(LoadStarted(rate_per_s, len(partitions), ACKS_NAMES[acks], idempotent))
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
            due = int(plan.active_ms(end) * plan.rate_per_s / 1000.0) + 1 - plan.generated
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

    def pause_load(self, now_ms: float, for_ms: float) -> Output:
        """A local call (the `pause_load` step): the load offers no record for `for_ms`, an idle
        period of the open-loop load, then goes on at its rate. Records already offered go on
        (batches in flight, retries)."""
        out = Output()
        if self.load is not None and self.load.rate_per_s is not None:
            self.load.pause(now_ms, now_ms + for_ms)
            out.emit(LoadPaused(for_ms))
        return self._finish(out)

    def stop_load(self, now_ms: float, out: Output) -> None:
        """No more records from the background load (its duration is over, or the run is)."""
        if self.load is not None:
            if self.load.blocked is not None:
                self._unblock(self.load, now_ms, True, out)
            out.emit(LoadFinished(self.load.generated))
            self.load = None
