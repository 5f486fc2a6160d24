"""What a producer holds (producer.py): the commands handed to it, each record waiting or in
flight, each batch in flight or acknowledged, and what a record takes of its buffer
(buffer.memory). Plain data, shared by the producer and its load generator (load_generator.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.partition_log import RecordBatch

ACKS = {"all": -1, -1: -1, 1: 1, 0: 0}
ACKS_NAMES = {-1: "all", 1: "1", 0: "0"}  # the history's `acks` column
# A batch's bound when no `batch.size` is set (kraftlab's default, which the simulator's library and
# sweeps were measured with); a `batch.size` (bytes, Kafka's meaning) replaces it.
MAX_BATCH_RECORDS = 1_000
LINGER_MS = 0  # linger.ms: 0 sends a partition's records as soon as none of its batches is in flight
# What a record takes of the producer's buffer beyond its value: its key, headers and varint
# framing, and its share of a batch header (Kafka's DefaultRecord and RecordBatch, 61-byte header).
# Kafka's pool hands out whole batch.size buffers; counting record bytes is kraftlab's simplification.
RECORD_OVERHEAD_BYTES = 70


def buffered_size(value: str) -> int:
    """What a record holds of the producer's buffer while it waits or is in flight."""
    return len(value) + RECORD_OVERHEAD_BYTES


def buffered_size_of(values) -> int:
    """What these records hold of the buffer: `buffered_size` of each, summed."""
    return sum(map(len, values)) + RECORD_OVERHEAD_BYTES * len(values)


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
    leader_epoch: int = -1  # the partition's leader epoch its last attempt was sent in
    deadline_ms: float = 0.0  # the earliest delivery deadline of its records (set once)
    # True once an attempt may have been appended: sent and not answered, or answered with an
    # error that does not rule the append out. Decides "fail" or "info" if it never succeeds.
    maybe_written: bool = False
    order: int = 0  # batches are numbered as they are made: the order of `in_flight`
    buffered: int = 0  # what its records hold of buffer.memory: sum of buffered_size

    def __post_init__(self) -> None:
        self.deadline_ms = min(r.deadline_ms for r in self.records)
