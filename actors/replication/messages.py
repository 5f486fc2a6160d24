"""The data plane's requests and answers (Kafka's Produce, Fetch, ListOffsets, Metadata). Frozen
dataclasses; record batches travel whole, never one record per message. (The controller's
GetReplicaLogInfo lives with the other controller-broker requests, in controller_quorum/requests.py.)

A follower's fetch covers every partition it follows on that leader (one request per leader
broker, as Kafka's fetcher threads do), in a fetch session (KIP-227, fetch_session.py): after the
first, full request, a request carries only the partitions whose fetch position changed and an
answer only the partitions with something new. A consumer's fetch uses `replica_id = CONSUMER`
and no session. A
producer's batches for one broker, and a broker's answers to one producer, travel together
(`ProduceRequests`, `ProduceResponses`).
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.contract import Envelope, pickled_by_fields
from storage.partition_log import RecordBatch

CONSUMER = -1  # replica id of a consumer's fetch (Kafka's -1)
# replica id of the end-of-run final read: any replica (not only the leader) answers it from its own
# log below its own HWM (kraftlab's, not Kafka's: the history's `final_read`, docs/reference)
FINAL_READER = -2

# errors (Kafka's names)
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
OFFSET_NOT_AVAILABLE = "OFFSET_NOT_AVAILABLE"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
# The replica is in a failed log directory (KIP-858): Kafka's KafkaStorageException, retriable (a
# client refreshes its metadata and finds the new leader).
KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
FETCH_SESSION_ID_NOT_FOUND = "FETCH_SESSION_ID_NOT_FOUND"
INVALID_FETCH_SESSION_EPOCH = "INVALID_FETCH_SESSION_EPOCH"
# not a response's error: what a follower's append raises when a batch starts below its log end
UNEXPECTED_APPEND_OFFSET = "UNEXPECTED_APPEND_OFFSET"

# FetchRequest.session_epoch (KIP-227): a full request without a session (consumers, whose
# fetches the leader answers without one), and the full request that opens a new session; an
# incremental request numbers from 1.
SESSIONLESS_EPOCH = -1
INITIAL_SESSION_EPOCH = 0

RETRIABLE = frozenset(
    {
        NOT_LEADER_OR_FOLLOWER,
        FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH,
        NOT_ENOUGH_REPLICAS,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        REQUEST_TIMED_OUT,
        UNKNOWN_TOPIC_OR_PARTITION,
        KAFKA_STORAGE_ERROR,
    }
)


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ProduceRequest:
    request_id: int
    topic: str
    partition: int
    acks: int  # -1 (all), 0 or 1
    timeout_ms: int
    batch: RecordBatch


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ProduceResponse:
    request_id: int
    topic: str
    partition: int
    error: str | None
    base_offset: int = -1
    topic_id: str | None = None  # the id of the topic whose replica answered (None: no replica)


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ProduceRequests:
    """Several partitions' produce requests to one broker in one message. Kafka's ProduceRequest
    carries the batches of many partitions: its producer's sender drains every ready batch for a
    broker into one request. Each part keeps its request id and is answered on its own (Kafka
    answers the request once every partition is done; here each answer leaves when ready, and the
    answers ready at one moment for one producer travel together: `ProduceResponses`)."""

    parts: tuple[ProduceRequest, ...]


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ProduceResponses:
    """The produce answers a broker has for one producer at one moment, in one message."""

    parts: tuple[ProduceResponse, ...]


def coalesce(sends: list[Envelope], part: type, together: type) -> list[Envelope]:
    """Put the `part` payloads of `sends` that go to the same destination into one `together`
    message (where the first of them was), so that messages scale with brokers, not partitions.
    A lone part goes as it is. The message waits for a flush if any of its parts had to."""
    by_dst: dict[str, list[int]] = {}
    for i, env in enumerate(sends):
        if type(env.payload) is part:
            by_dst.setdefault(env.dst, []).append(i)
    if all(len(idx) < 2 for idx in by_dst.values()):
        return sends
    merged: dict[int, Envelope] = {}
    dropped: set[int] = set()
    for idx in by_dst.values():
        if len(idx) < 2:
            continue
        first = sends[idx[0]]
        payloads = tuple(sends[i].payload for i in idx)
        merged[idx[0]] = Envelope(first.src, first.dst, together(payloads), any(sends[i].after_flush for i in idx))
        dropped.update(idx[1:])
    return [merged.get(i, env) for i, env in enumerate(sends) if i not in dropped]


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class FetchPartition:
    topic: str
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    # The epoch of the last batch the follower holds (-1: none, or leader_epoch_truncation off).
    last_fetched_epoch: int = -1


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class FetchRequest:
    request_id: int
    replica_id: int  # the follower's broker id, or CONSUMER
    broker_epoch: int  # the follower's broker epoch (KIP-903); -1 for consumers
    max_wait_ms: int
    partitions: tuple[FetchPartition, ...]
    # KIP-227: the session (0 with INITIAL_SESSION_EPOCH: open one), the request's number in it,
    # and the partitions the follower no longer fetches (an incremental request only).
    session_id: int = 0
    session_epoch: int = SESSIONLESS_EPOCH
    forgotten: tuple[tuple[str, int], ...] = ()


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error: str | None
    high_watermark: int = -1
    log_end_offset: int = -1
    # (epoch, end offset) when the follower's log diverges from the leader's (§6.6).
    diverging_epoch: tuple[int, int] | None = None
    batches: tuple[RecordBatch, ...] = ()
    topic_id: str | None = None  # the id of the topic whose replica answered (None: no replica)


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class FetchResponse:
    request_id: int
    partitions: tuple[FetchedPartition, ...]
    session_id: int = 0  # the session the answer belongs to (opened by a full request)
    error: str | None = None  # a session error: the follower starts a new session


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    request_id: int
    topic: str
    partition: int


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    request_id: int
    topic: str
    partition: int
    error: str | None
    offset: int = -1  # latest = the HWM, once the leader knows it is the true one (§6.4.2)


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class EpochEndOffsetRequest:
    """Kafka's OffsetForLeaderEpoch from a consumer (KIP-320): where the leader's log ends for
    `leader_epoch` (the epoch of the last record the consumer read), so that the consumer can tell
    whether the log it read was truncated. `current_leader_epoch`: the leader epoch the consumer
    knows (-1: none), checked as a fetch's is."""

    request_id: int
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class EpochEndOffsetResponse:
    request_id: int
    topic: str
    partition: int
    error: str | None
    leader_epoch: int = -1  # the largest epoch <= the one asked for
    end_offset: int = -1  # where it ends: the next epoch's start, or the log end


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class MetadataRequest:
    request_id: int


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    topic_id: str | None = None


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class MetadataResponse:
    request_id: int
    partitions: tuple[PartitionMetadata, ...]
    brokers: tuple[int, ...]  # unfenced brokers the answering broker knows
