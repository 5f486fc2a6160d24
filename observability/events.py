"""The event history's schema: every kind of event kraftlab records, as one typed class each.

This module is the single definition of the history (docs/reference/events.md): the
roles emit these classes (`Output.emit`), both drivers number and collect them, the Parquet writer
turns them into rows and every reader (the cluster view, the invariant checks, the summary, later
metrics and Spark analysis) reads them back by these names. It imports nothing but the standard
library, so that the protocol's roles can use it and stay pure.

A row of the history has the common columns `time_ms`, `node`, `incarnation`, `node_seq` and `kind`,
then the columns of its kind (null where a kind has none). Most kinds are one row per event. The
record-level kinds (`produce_send`, `produce_ack`, `consume`, `final_read`) are emitted once per
record *batch* and expand to one row per record (`rows()`): a node numbers each row, so a batch
event takes as many `node_seq` numbers as it has records.

Column types are declared once, by column name, in `COLUMN_TYPES`: a name means the same thing with
the same type in every kind (a test checks every field has one).

Each kind documents where it comes from. Readers dedupe what several nodes report: every controller
voter reports each committed metadata record, so `partition_change`, `broker_change` and `election`
rows repeat per voter with the same `metadata_offset` (the record's offset in the metadata log).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

# --- the columns --------------------------------------------------------------------------------

# Types are Parquet/Arrow type names (observability/history_writer.py maps them to pyarrow).
COMMON_COLUMNS: dict[str, str] = {
    "time_ms": "float64",  # simulated ms, or wall-clock ms since the run started (Ray)
    "node": "string",  # b1, c2, a client's name, or "driver"
    "incarnation": "int32",  # 0, then +1 at each restart of that node
    "node_seq": "int64",  # per node and incarnation, from 0, without gaps
    "kind": "string",
}

COLUMN_TYPES: dict[str, str] = {
    # records and clients (docs/reference)
    "producer": "string",
    "sequence": "int64",
    "client": "string",  # a Kafka client's address (host:port) as its broker's listener saw it
    "api": "string",  # a Kafka API's name: Produce, Fetch, Metadata...
    "api_version": "int32",
    "topic": "string",
    "topic_id": "string",  # the topic's identity: a topic deleted and created again is a new one
    "partition": "int32",
    "acks": "string",
    "outcome": "string",
    "offset": "int64",
    "latency_ms": "float64",
    "consumer": "string",
    "poll": "int64",
    "batch_offset": "int64",  # base offset of the batch a record was read in or acknowledged with
    "batch_crc": "int64",  # the batch's CRC: with batch_offset, what identifies it in a log
    "sequences": "list<int64>",  # load_batch_appended: the batch's records, by sequence
    "source": "string",  # where a row comes from: final_read "leader" or "replica"; fault "cli" (made by hand)
    "error": "string",
    "attempt": "int32",
    "count": "int64",
    "rate_per_s": "float64",
    "partitions": "int32",
    "generated": "int64",
    "complete": "bool",
    "value": "string",
    # metadata (committed records, controller decisions)
    "leader": "int32",
    "leader_epoch": "int64",
    "partition_epoch": "int64",
    "replicas": "list<int32>",
    "isr": "list<int32>",
    "elr": "list<int32>",
    "last_known_elr": "list<int32>",
    "metadata_offset": "int64",
    "under_min_isr": "bool",
    "min_isr": "int32",
    "recovery_state": "string",
    "reason": "string",
    "election_kind": "string",
    "broker": "int32",
    "epoch": "int64",
    "previous_epoch": "int64",
    "fenced": "bool",
    "in_controlled_shutdown": "bool",
    "clean": "bool",
    "strategy": "string",
    "candidates": "list<int32>",
    "last_epochs": "list<int64>",
    "log_ends": "list<int64>",
    "assignment": "list<list<int32>>",
    "target_replicas": "list<int32>",
    "adding": "list<int32>",
    "removing": "list<int32>",
    "adding_replicas": "list<int32>",
    "removing_replicas": "list<int32>",
    "call": "string",
    "directories": "list<int32>",  # each replica's log directory, in the order of `replicas`
    "offline_log_dirs": "list<int32>",
    # the data plane
    "leso": "int64",
    "hwm": "int64",
    "leo": "int64",
    "last_epoch": "int64",
    "role": "string",
    "follower": "int32",
    "dir": "int32",  # a log directory's number (KIP-858)
    "halted": "bool",
    "fetch_epoch": "int64",
    "proposed": "list<int32>",
    "from_offset": "int64",
    "batch_offsets": "list<int64>",
    "batch_counts": "list<int64>",
    "batch_epochs": "list<int64>",
    "batch_crcs": "list<int64>",
    # KRaft
    "state": "string",
    "from_state": "string",
    "candidate": "string",
    "pre_vote": "bool",
    "granted": "bool",
    "epoch_start_offset": "int64",
    "end_offset": "int64",
    "entry_epochs": "list<int64>",
    "entry_crcs": "list<int64>",
    "rank": "int32",
    "backoff_ms": "int64",
    # faults, processes, the driver
    "fault": "string",
    "target": "string",
    "fired": "bool",
    "waited_ms": "float64",
    "idempotent": "bool",
    "drop": "float64",
    "delay_ms": "float64",
    "for_ms": "float64",  # load_paused: how long the load offers nothing
    "backend": "string",
    "ray_node": "string",
    "pid": "int64",
    "bytes_lost": "int64",
    "files": "int32",
    "cause": "string",
    "invariant": "string",
    "detail": "string",
    "step": "string",
    "index": "int32",
    "command": "int64",
    "acked": "int64",
    "failed": "int64",
    "producers": "int32",
    "consumers": "int32",
}

KINDS: dict[str, type] = {}


def event(kind: str) -> Callable[[type], type]:
    """Register a kind. Its fields are columns (named as in COLUMN_TYPES), except for the batch
    kinds, which define `rows()` and `row_count` (the records they expand to)."""

    def register(cls: type) -> type:
        if kind in KINDS:
            raise ValueError(f"event kind {kind!r} defined twice")
        cls.kind = kind
        cls.is_batch = hasattr(cls, "rows")
        if not cls.is_batch:
            cls.row_count = 1
        KINDS[kind] = cls
        return cls

    return register


# A batch event's `rows()`: column name -> one value per record.
Rows = dict[str, list[Any]]


# --- records: the contract's kinds (Jepsen-style histories) -------------------------------------


@event("produce_send")
class ProduceSend(NamedTuple):
    """Records handed to a producer (Jepsen's invoke): one row per record. `sequence` numbers a
    producer's records from 0; (producer, sequence) identifies a record everywhere."""

    producer: str
    topic: str
    partition: int
    acks: str  # "all", "1", "0"
    sequences: tuple[int, ...]
    topic_id: str | None = None  # as the producer's metadata names it then (None: not known yet)

    @property
    def row_count(self) -> int:
        return len(self.sequences)

    def rows(self) -> Rows:
        n = len(self.sequences)
        return {"producer": [self.producer] * n, "topic": [self.topic] * n, "partition": [self.partition] * n,
                "acks": [self.acks] * n, "sequence": list(self.sequences), "topic_id": [self.topic_id] * n}


@event("produce_ack")
class ProduceAck(NamedTuple):
    """The outcome of records (Jepsen's completion): "ok" (acknowledged at `first_offset` + i; with
    acks=0, handed over, as Kafka's producer completes them at once, and `first_offset` None),
    "fail" (surely not written: refused before any append, or never sent) or "info" (unknown: an
    attempt may have been appended, e.g. a timeout or an error after the append).
    `latencies_ms`: hand-over to outcome, per record."""

    producer: str
    topic: str
    partition: int
    acks: str
    outcome: str
    sequences: tuple[int, ...]
    latencies_ms: tuple[float, ...]
    first_offset: int | None = None  # the batch's base offset, when ok
    batch_crc: int | None = None  # when ok: with the base offset, the batch in a log
    error: str | None = None  # why not ok
    # When ok, the id of the topic whose leader acknowledged; otherwise the one the producer's
    # metadata names (None: not known yet).
    topic_id: str | None = None

    @property
    def row_count(self) -> int:
        return len(self.sequences)

    @property
    def batch(self) -> tuple[int | None, int, int | None]:
        """(base offset, count, CRC) of the batch of the log these records are (when ok): here,
        the records themselves, at `first_offset`."""
        return self.first_offset, len(self.sequences), self.batch_crc

    def rows(self) -> Rows:
        n = len(self.sequences)
        base = self.first_offset
        return {
            "producer": [self.producer] * n, "topic": [self.topic] * n, "partition": [self.partition] * n,
            "acks": [self.acks] * n, "outcome": [self.outcome] * n, "sequence": list(self.sequences),
            "offset": [None] * n if base is None else list(range(base, base + n)),
            "latency_ms": list(self.latencies_ms), "batch_offset": [base] * n, "batch_crc": [self.batch_crc] * n,
            "error": [self.error] * n, "topic_id": [self.topic_id] * n,
        }


class LoadProduceAck(NamedTuple):
    """A `produce_ack` whose records are part of a larger batch of the log: what the Ray driver
    makes of a real load client's delivery report, which acknowledges one record at its offset
    (actors/runtime/kafka/load_join.py). The same kind and columns as `ProduceAck`, and its
    fields, then the batch's base offset and record count (`batch_offset` the column). A class of
    its own, not two more fields of ProduceAck: the simulator's trace hash digests every field of
    an event, and a simulated run never has one of these."""

    producer: str
    topic: str
    partition: int
    acks: str
    outcome: str
    sequences: tuple[int, ...]
    latencies_ms: tuple[float, ...]
    first_offset: int | None
    batch_crc: int | None
    error: str | None
    topic_id: str | None
    batch_offset: int
    batch_count: int

    @property
    def row_count(self) -> int:
        return len(self.sequences)

    @property
    def batch(self) -> tuple[int, int, int | None]:
        return self.batch_offset, self.batch_count, self.batch_crc

    def rows(self) -> Rows:
        rows = ProduceAck.rows(self)  # type: ignore[arg-type] - the same fields, by name
        rows["batch_offset"] = [self.batch_offset] * len(self.sequences)
        return rows


LoadProduceAck.kind = "produce_ack"  # not registered: `KINDS` keeps one class per kind
LoadProduceAck.is_batch = True


@event("consume")
class Consume(NamedTuple):
    """Records a consumer read from a partition's leader in one poll (one fetch answered): one row
    per record, at offsets `first_offset` + i. The batch they came in is `batch_offset`/`batch_crc`."""

    consumer: str
    poll: int
    topic: str
    partition: int
    first_offset: int
    producer: str
    sequences: tuple[int, ...]
    batch_offset: int
    batch_crc: int
    topic_id: str | None = None  # of the topic whose leader answered

    @property
    def row_count(self) -> int:
        return len(self.sequences)

    def rows(self) -> Rows:
        n = len(self.sequences)
        return {
            "consumer": [self.consumer] * n, "poll": [self.poll] * n, "topic": [self.topic] * n,
            "partition": [self.partition] * n, "offset": list(range(self.first_offset, self.first_offset + n)),
            "producer": [self.producer] * n, "sequence": list(self.sequences),
            "batch_offset": [self.batch_offset] * n, "batch_crc": [self.batch_crc] * n, "topic_id": [self.topic_id] * n,
        }


@event("consumer_seek")
class ConsumerSeek(NamedTuple):
    """A consumer set its position in a partition: it reads `offset` next (a Kafka consumer's seek,
    or the start of a `consume` step from its `from`). The poll anomalies judge the reads that
    follow against this position, not against what the consumer read before it."""

    consumer: str
    topic: str
    partition: int
    offset: int


@event("consumer_reset")
class ConsumerReset(NamedTuple):
    """A consumer found that the log it read was truncated under it (KIP-320: the leader ends the
    epoch of the last record it read before its position) and moved back: it reads `offset` next,
    where it was at `from_offset`. `leader_epoch` is the epoch the leader's answer named, -1 when
    the leader has no epoch up to it (the consumer then resets to the earliest offset, as
    `auto.offset.reset=earliest` does). Not a seek: the application did not ask for it, so the
    poll anomalies judge the reads after it against the reads before it, as Jepsen would see them."""

    consumer: str
    topic: str
    partition: int
    from_offset: int
    offset: int
    leader_epoch: int
    reason: str  # "log_truncation"; "topic_recreated" (the topic was deleted and created again: from 0)


@event("final_read")
class FinalRead(NamedTuple):
    """The committed log at the end of a run, one row per record: read from the partition's leader
    (`source` "leader", below its HWM) or, when it has none, from every running replica below that
    replica's HWM (`source` "replica", `broker` says which)."""

    topic: str
    partition: int
    source: str
    broker: int
    first_offset: int
    producer: str
    sequences: tuple[int, ...]
    batch_offset: int
    batch_crc: int
    topic_id: str | None = None  # of the topic whose replica answered

    @property
    def row_count(self) -> int:
        return len(self.sequences)

    def rows(self) -> Rows:
        n = len(self.sequences)
        return {
            "topic": [self.topic] * n, "partition": [self.partition] * n, "source": [self.source] * n,
            "broker": [self.broker] * n, "offset": list(range(self.first_offset, self.first_offset + n)),
            "producer": [self.producer] * n, "sequence": list(self.sequences),
            "batch_offset": [self.batch_offset] * n, "batch_crc": [self.batch_crc] * n, "topic_id": [self.topic_id] * n,
        }


@event("final_read_done")
class FinalReadDone(NamedTuple):
    """One partition's final read from one broker ended: `complete` when it reached `hwm` (the
    end of what that broker held committed) and that is the whole committed log: read from the
    leader, or from a replica in the ISR or ELR whose HWM was its log end (with no acting leader
    the committed log may go on above a replica's HWM). False when the broker did not answer in
    time, or when the committed log's end cannot be told."""

    topic: str
    partition: int
    source: str
    broker: int
    hwm: int | None
    complete: bool


@event("consume_done")
class ConsumeDone(NamedTuple):
    """A consume step's reading ended: it caught up with the HWM with at least the records expected."""

    command: int
    count: int


@event("list_offsets_answer")
class ListOffsetsAnswer(NamedTuple):
    """A ListOffsets(latest) answer reached the consumer (request `command`): the offset, or the
    error (OFFSET_NOT_AVAILABLE while the leader's HWM is below its LESO, §6.4.2)."""

    command: int
    topic: str
    partition: int
    broker: int
    offset: int | None
    error: str | None


@event("consumer_done")
class ConsumerDone(NamedTuple):
    """A load consumer stopped at the end of the run, one row per partition it followed:
    `offset`, the next offset it would have read there (every committed record below it was
    delivered to it), and `complete` when that reached the partition's HWM as the catch-up began
    (the `unseen` check needs consumers that ran to the end, and judges only the records below
    the offsets they reached: one committed after they stopped was never offered to them)."""

    consumer: str
    complete: bool
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


# --- the committed metadata (reported by every controller voter as it commits) ------------------


@event("partition_change")
class PartitionChange(NamedTuple):
    """A committed partition record: the partition's state from `metadata_offset` on."""

    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    metadata_offset: int
    under_min_isr: bool
    min_isr: int
    recovery_state: str
    reason: str
    # A reassignment in progress (the protocol description §6.7): replicas joining and leaving.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    topic_id: str | None = None
    # Each replica's log directory, in the order of `replicas`; empty: all in directory 0.
    directories: tuple[int, ...] = ()


CLEAN_ELECTIONS = frozenset({"clean", "elr", "preferred"})  # the others may lose committed records
UNCLEAN_ELECTIONS = frozenset({"unclean", "last_known_leader"})


@event("election")
class Election(NamedTuple):
    """A committed leader election: "clean" (from the ISR), "elr" (a clean election from the ELR,
    KIP-966), "preferred" (clean, asked for by ElectLeaders), "unclean" (legacy, or KIP-966
    unclean recovery after inspecting logs), "last_known_leader" (unclean recovery of that
    strategy, without inspecting logs)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    election_kind: str
    metadata_offset: int
    topic_id: str | None = None


@event("broker_change")
class BrokerChange(NamedTuple):
    """A committed broker registration or fencing record: the broker's epoch, fenced state and
    controlled-shutdown flag (true from the controlled-shutdown request until it registers again),
    and the log directories it reported offline (KIP-858; none again once it registers again)."""

    broker: int
    epoch: int
    fenced: bool
    metadata_offset: int
    in_controlled_shutdown: bool = False
    offline_log_dirs: tuple[int, ...] = ()


# --- faults and processes -----------------------------------------------------------------------

@event("fault")
class Fault(NamedTuple):
    """A fault the driver applied (or undid): `target` is the node (`b2`), the groups of a
    partition (`b1,c1|b2,b3`), the link (`b1->b2`, with `drop` and `delay_ms`); for `heal`, `all`,
    a node (every network fault touching it), or one fault exactly (`isolate:b2`,
    `partition:b1,c1|b2,b3`, `link:b1->b2`: a generated schedule's `undo`);
    `backend` is what made it. `fail_log_dir`: the broker is the target and `dir` the directory
    (when it is directory 0 the broker halts: a `crash_process` row follows)."""

    fault: str
    target: str
    drop: float | None = None
    delay_ms: float | None = None
    # Who made the fault (docs/reference): "sim" the simulator; on Ray, "emulated" kraftlab's own send
    # path and process kills, "kernel" the hosts' packet filters and kills (`--faults kernel`).
    backend: str | None = None
    dir: int | None = None  # fail_log_dir: the log directory that failed
    # "cli": made by hand (`kraftlab cluster fault`); None: by the scenario's steps or schedule.
    source: str | None = None


@event("storage_flushed")
class StorageFlushed(NamedTuple):
    """Files of the node made durable: by an fsync the node asked for or that its acknowledgements
    wait on (`cause` "fsync"), or by the OS writing back pages dirty for `dirty_expire_ms`
    ("writeback"; with process_buffer storage, the process's own timed write-out). What is
    written and not yet flushed is what an OS crash takes (`crash_lost`)."""

    files: int
    cause: str


@event("crash_lost")
class CrashLost(NamedTuple):
    """What a crash took from a node's disk: bytes written but not flushed (page cache or process
    buffer), or the whole directory (a disk loss)."""

    target: str
    bytes_lost: int


@event("process_start")
class ProcessStart(NamedTuple):
    """A node's process started (the first row of each incarnation): `clean` when the last one
    ended in a controlled shutdown. On Ray, where it runs."""

    clean: bool
    ray_node: str | None = None
    pid: int | None = None


@event("process_stop")
class ProcessStop(NamedTuple):
    """A node's process ended its controlled shutdown."""

    clean: bool


@event("host_boot")
class HostBoot(NamedTuple):
    """A crashed host (an OS crash or disk loss) came back up."""

    target: str


@event("host_moved")
class HostMoved(NamedTuple):
    """On Ray, a host whose Ray node was lost restarts on another one (its directory recovered
    as after an OS crash)."""

    target: str
    ray_node: str
    clean: bool


# --- brokers ------------------------------------------------------------------------------------


@event("broker_starting")
class BrokerStarting(NamedTuple):
    previous_epoch: int | None
    clean: bool


@event("broker_registered")
class BrokerRegistered(NamedTuple):
    """The broker learned the epoch of its registration, which lasts until the process stops;
    `clean` when it registered with the previous epoch (a clean shutdown before, KIP-966)."""

    epoch: int
    clean: bool


@event("broker_session")
class BrokerSession(NamedTuple):
    """A heartbeat answer changed what the broker believes of itself: fenced or not."""

    epoch: int
    fenced: bool


@event("broker_epoch_stale")
class BrokerEpochStale(NamedTuple):
    epoch: int


@event("data_plane_serving")
class DataPlaneServing(NamedTuple):
    epoch: int
    metadata_offset: int


@event("controlled_shutdown_requested")
class ControlledShutdownRequested(NamedTuple):
    epoch: int


@event("log_dir_failed")
class LogDirFailed(NamedTuple):
    """The broker found its log directory `dir` failed (KIP-858, ReplicaManager.handleLogDirFailure):
    it stops serving the replicas in it (a `replica_offline` row each) and reports the directory in
    its heartbeats until it restarts; `halted` when the directory holds the metadata log (directory
    0), and the broker halts instead."""

    dir: int
    halted: bool


@event("log_dir_failure_timeout")
class LogDirFailureTimeout(NamedTuple):
    """No heartbeat answer acknowledged the failed directory `dir` within log.dir.failure.timeout.ms:
    the broker shuts down (Kafka's BrokerLifecycleManager.OfflineDirBrokerFailureEvent)."""

    dir: int


# --- replicas (the brokers' data plane) -----------------------------------------------------------


@event("replica_recovered")
class ReplicaRecovered(NamedTuple):
    """A replica's log as it survived on the broker's disk at a process start: every batch's
    base offset, record count, leader epoch and CRC (what the log checks compare)."""

    topic: str
    partition: int
    leo: int
    hwm: int
    last_epoch: int
    batch_offsets: tuple[int, ...]
    batch_counts: tuple[int, ...]
    batch_epochs: tuple[int, ...]
    batch_crcs: tuple[int, ...]
    topic_id: str | None = None


@event("appended")
class Appended(NamedTuple):
    """A batch appended to a replica's log (by the leader from a producer, or by a follower from
    the leader): one row per batch. The log end offset is `offset` + `count` after it."""

    topic: str
    partition: int
    offset: int
    count: int
    leader_epoch: int
    batch_crc: int
    topic_id: str | None = None


@event("replication_quorum")
class ReplicationQuorum(NamedTuple):
    """A leader's committed ISR (`isr`) or its replication quorum (`proposed`: whose fetch offsets
    bound the HWM, the Maximal ISR with it on, §6.5.2) changed."""

    topic: str
    partition: int
    isr: tuple[int, ...]
    proposed: tuple[int, ...]
    topic_id: str | None = None


@event("replica_survived")
class ReplicaSurvived(NamedTuple):
    """At a broker's crash (node `driver`): a replica's log as the broker's disk kept it, read as
    the broker will recover it (what was not flushed is gone after an OS crash)."""

    broker: int
    topic: str
    partition: int
    batch_offsets: tuple[int, ...]
    batch_counts: tuple[int, ...]
    batch_epochs: tuple[int, ...]
    batch_crcs: tuple[int, ...]


@event("replica_hwm")
class ReplicaHwm(NamedTuple):
    """A replica's local high watermark moved (a leader's goes up; a follower takes the leader's,
    which may be lower, §6.4). A truncation lowers it to the new LEO without this event."""

    topic: str
    partition: int
    hwm: int
    topic_id: str | None = None


@event("replica_offline")
class ReplicaOffline(NamedTuple):
    """The broker stopped serving its replica, whose log directory `dir` failed (Kafka's
    ReplicaManager.markPartitionOffline): its log stays on the disk as it was, unread, until the
    broker restarts."""

    topic: str
    partition: int
    dir: int
    topic_id: str | None = None


@event("replica_deleted")
class ReplicaDeleted(NamedTuple):
    """A broker deleted its replica: reassigned away, or its topic deleted."""

    topic: str
    partition: int
    topic_id: str | None = None


@event("become_leader")
class BecomeLeader(NamedTuple):
    topic: str
    partition: int
    leader_epoch: int
    leso: int
    hwm: int
    isr: tuple[int, ...]
    topic_id: str | None = None


@event("become_follower")
class BecomeFollower(NamedTuple):
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int
    role: str  # what it was before: none, leader or follower
    leo: int
    hwm: int
    topic_id: str | None = None


@event("isr_expand_proposed")
class IsrExpandProposed(NamedTuple):
    topic: str
    partition: int
    follower: int
    leo: int  # the follower's
    hwm: int
    leso: int
    fetch_epoch: int
    leader_epoch: int
    topic_id: str | None = None


@event("isr_shrink_proposed")
class IsrShrinkProposed(NamedTuple):
    topic: str
    partition: int
    proposed: tuple[int, ...]  # the out-of-sync followers
    topic_id: str | None = None


@event("isr_committed")
class IsrCommitted(NamedTuple):
    topic: str
    partition: int
    isr: tuple[int, ...]
    partition_epoch: int
    topic_id: str | None = None


@event("isr_change_rejected")
class IsrChangeRejected(NamedTuple):
    topic: str
    partition: int
    error: str
    proposed: tuple[int, ...]
    topic_id: str | None = None


@event("kafka_request")
class KafkaRequest(NamedTuple):
    """A broker's Kafka listener answered a real Kafka client's request (actors/runtime/kafka/):
    one row per partition a Produce, Fetch or ListOffsets names, one per Metadata or ApiVersions
    request; for the admin APIs one per topic (CreateTopics, DeleteTopics, CreatePartitions), per
    partition (ElectLeaders, AlterPartitionReassignments), per config resource (DescribeConfigs,
    IncrementalAlterConfigs: `topic` is the topic's name, none for a broker) and one per
    ListPartitionReassignments. `error`: Kafka's name for the answer's error (None: none);
    `offset`: a produce's base offset, a fetch's first batch, a ListOffsets answer; `count`: the
    records produced or fetched (CreateTopics: the partitions made; CreatePartitions: the count
    asked for; configs: the entries; ListPartitionReassignments: the reassignments listed);
    `producer`: the name the produce's records have in `produce_send` and `produce_ack` rows."""

    client: str
    api: str
    api_version: int
    topic: str | None = None
    partition: int | None = None
    error: str | None = None
    offset: int | None = None
    count: int | None = None
    producer: str | None = None


@event("load_batch_appended")
class LoadBatchAppended(NamedTuple):
    """A broker's Kafka listener appended a batch of a load client's records (`load.client:
    librdkafka`) and its leader answered ok: the batch in the log (`offset` its base, `count`,
    `batch_crc`) and its records' identity (`producer`, `sequences`). The client's own
    `produce_ack` rows come from its delivery reports, which name each record's offset only; the
    history's readers take the batch from here (actors/runtime/kafka/load_join.py)."""

    producer: str
    topic: str
    partition: int
    offset: int
    count: int
    batch_crc: int
    sequences: tuple[int, ...]
    topic_id: str | None = None


@event("load_batch_served")
class LoadBatchServed(NamedTuple):
    """A broker's Kafka listener answered a load consumer's fetch (`load.client: librdkafka`) with a
    batch of the log: its base `offset`, `count` and `batch_crc`, what the consumer's `consume`
    rows (one per record it read) are judged against (actors/runtime/kafka/load_join.py)."""

    consumer: str
    topic: str
    partition: int
    offset: int
    count: int
    batch_crc: int
    topic_id: str | None = None


@event("list_offsets")
class ListOffsets(NamedTuple):
    """A leader answered ListOffsets(latest): `offset` None is OFFSET_NOT_AVAILABLE (§6.4.2)."""

    topic: str
    partition: int
    hwm: int
    leso: int
    offset: int | None
    topic_id: str | None = None


@event("truncated")
class Truncated(NamedTuple):
    topic: str
    partition: int
    reason: str
    from_offset: int
    offset: int  # the LEO after
    topic_id: str | None = None


@event("replica_fetch_failed")
class ReplicaFetchFailed(NamedTuple):
    """A follower got a batch it cannot append: it starts at `batch_offset`, below the follower's
    log end `offset`, and ends above it (`error` UNEXPECTED_APPEND_OFFSET). Only a log cut inside
    one of the leader's batches does this (a truncation to the local HWM, before KIP-101). Kafka's
    fetcher marks the partition failed and stops fetching it until a new leader epoch."""

    topic: str
    partition: int
    error: str
    offset: int
    batch_offset: int
    topic_id: str | None = None


# --- the controller -------------------------------------------------------------------------------


@event("controller_active")
class ControllerActive(NamedTuple):
    epoch: int


@event("registration_accepted")
class RegistrationAccepted(NamedTuple):
    broker: int
    epoch: int
    clean: bool


@event("broker_fenced")
class BrokerFenced(NamedTuple):
    broker: int
    epoch: int
    reason: str


@event("broker_unfenced")
class BrokerUnfenced(NamedTuple):
    broker: int
    epoch: int


@event("alter_partition_rejected")
class AlterPartitionRejected(NamedTuple):
    topic: str
    partition: int
    error: str
    broker: int


@event("unclean_recovery_started")
class UncleanRecoveryStarted(NamedTuple):
    topic: str
    partition: int
    strategy: str
    candidates: tuple[int, ...]


@event("unclean_recovery_elected")
class UncleanRecoveryElected(NamedTuple):
    """The replicas' answers (`candidates` with their `last_epochs` and `log_ends`) and the one chosen."""

    topic: str
    partition: int
    strategy: str
    leader: int
    candidates: tuple[int, ...]
    last_epochs: tuple[int, ...]
    log_ends: tuple[int, ...]


@event("topic_created")
class TopicCreated(NamedTuple):
    """The active controller proposed a topic's records (CreateTopics)."""

    topic: str
    assignment: tuple[tuple[int, ...], ...]
    topic_id: str | None = None


@event("topic_deleted")
class TopicDeleted(NamedTuple):
    """A committed RemoveTopicRecord (DeleteTopics): the topic and its partitions are gone from
    `metadata_offset` on; what was written to them is neither lost nor required (docs/reference)."""

    topic: str
    topic_id: str
    metadata_offset: int


@event("reassignment_started")
class ReassignmentStarted(NamedTuple):
    topic: str
    partition: int
    target_replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@event("reassignment_completed")
class ReassignmentCompleted(NamedTuple):
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None


@event("admin_answer")
class AdminAnswer(NamedTuple):
    """The active controller's answer to an admin call (a scenario's `elect`, `reassign`,
    `alter_config`, ... step): `error` is Kafka's error name, "NONE" when it was carried out."""

    call: str
    error: str
    detail: str


@event("reassignment_cancelled")
class ReassignmentCancelled(NamedTuple):
    """AlterPartitionReassignments without a target: the partition went back to these replicas."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None


# --- KRaft ----------------------------------------------------------------------------------------


@event("raft_state")
class RaftStateChange(NamedTuple):
    """A voter's (or observer's) quorum state changed (KIP-996's states), or it learned a new epoch.
    `from_state` is "start" at a process start."""

    from_state: str
    state: str
    epoch: int


@event("raft_vote")
class RaftVote(NamedTuple):
    candidate: str
    epoch: int
    pre_vote: bool
    granted: bool


@event("raft_leader_elected")
class RaftLeaderElected(NamedTuple):
    epoch: int
    epoch_start_offset: int


@event("raft_resign")
class RaftResign(NamedTuple):
    epoch: int
    reason: str


@event("raft_end_quorum_epoch")
class RaftEndQuorumEpoch(NamedTuple):
    """A voter following the leader of `epoch` got that leader's EndQuorumEpoch: it canvasses after
    `backoff_ms` instead of its fetch timeout, the backoff for its `rank` (0 first) among the
    leader's preferred successors (KafkaRaftClient.endEpochElectionBackoff)."""

    epoch: int
    rank: int
    backoff_ms: int


@event("raft_shutdown")
class RaftShutdown(NamedTuple):
    """A voter's graceful shutdown ended (KafkaRaftClient.maybeCompleteShutdown): `outcome`
    "completed" (it knows another leader, or has nobody to hand over to) or "timed_out"; `state`
    and `epoch` are where it stopped. The process stops right after."""

    outcome: str
    state: str
    epoch: int


@event("raft_hwm")
class RaftHighWatermark(NamedTuple):
    epoch: int
    hwm: int


@event("raft_appended")
class RaftAppended(NamedTuple):
    """Entries appended to a node's metadata log from `offset` on: their epochs and the CRC of
    each entry's frame (offset, epoch and record: what identifies an entry)."""

    offset: int
    entry_epochs: tuple[int, ...]
    entry_crcs: tuple[int, ...]


@event("raft_recovered")
class RaftRecovered(NamedTuple):
    """A node's metadata log as it survived at a process start, and the epoch of its stored
    quorum state (as the start read it: after a process crash that includes the page cache, so
    not necessarily durable; `raft_survived` tells what stable storage holds)."""

    entry_epochs: tuple[int, ...]
    entry_crcs: tuple[int, ...]
    epoch: int


@event("raft_survived")
class RaftSurvived(NamedTuple):
    """At a voter's crash (node `driver`): its metadata log and quorum-state epoch as its disk kept
    them."""

    target: str
    entry_epochs: tuple[int, ...]
    entry_crcs: tuple[int, ...]
    epoch: int


@event("raft_truncate")
class RaftTruncate(NamedTuple):
    offset: int  # truncated to
    end_offset: int  # the log end before
    hwm: int | None  # the HWM it knew, when the cut goes below it


# --- clients (besides the record-level kinds) -----------------------------------------------------


@event("produce_attempt")
class ProduceAttempt(NamedTuple):
    topic: str
    partition: int
    broker: int
    count: int
    attempt: int
    batch_crc: int


@event("produce_retry")
class ProduceRetry(NamedTuple):
    topic: str
    partition: int
    error: str
    attempt: int


@event("load_started")
class LoadStarted(NamedTuple):
    rate_per_s: float | None
    partitions: int
    acks: str
    # enable.idempotence: without it, a producer's retries may write a record twice, as Kafka's
    # do (the campaigns' findings excuse those duplicates: kraftlab/campaign/outcome.py).
    idempotent: bool | None = None


@event("load_finished")
class LoadFinished(NamedTuple):
    generated: int


@event("load_paused")
class LoadPaused(NamedTuple):
    """A load producer offers no record for `for_ms` (the `pause_load` step: an idle period of
    the open-loop load), then goes on at its rate."""

    for_ms: float


@event("load_throttled")
class LoadThrottled(NamedTuple):
    """Records of a producer's load that came due while its generator was blocked on a full
    buffer (buffer.memory): never offered, so no `produce_send` (producer-perf-test's throttling).
    One row per load tick that throttled any."""

    count: int


# --- the driver (node "driver"): steps, checks, bring-up ------------------------------------------


@event("step")
class Step(NamedTuple):
    index: int
    step: str


@event("step_failed")
class StepFailed(NamedTuple):
    index: int
    step: str
    detail: str


@event("invariant_violated")
class InvariantViolated(NamedTuple):
    invariant: str
    detail: str


@event("beyond_tolerance")
class BeyondTolerance(NamedTuple):
    """A partition suffered at least MinISR lossy unclean shutdowns of leader candidates (replicas
    in its ISR, ELR or LastKnownELR when they crashed): NoCommittedRecordLostGlobally may fail
    there (protocol-facts.md)."""

    topic: str
    partition: int
    candidates: tuple[int, ...]


@event("fault_skipped")
class FaultSkipped(NamedTuple):
    """A `fault` step (a generated schedule's) that did not happen: its selector named nobody
    when it ran (`target`, as written), or its node was already down (`detail` says which)."""

    fault: str
    target: str
    detail: str


@event("trigger")
class Trigger(NamedTuple):
    """A `trigger` step's end: whether the protocol state it waited for came (`fired`), after
    `waited_ms`; `target` is its partition (empty for the cluster-wide states)."""

    state: str
    target: str
    fired: bool
    waited_ms: float


@event("cluster_ready")
class ClusterReady(NamedTuple):
    detail: str  # on Ray, the placement of each node (JSON)


@event("produce_done")
class ProduceDone(NamedTuple):
    command: int
    acked: int
    failed: int
    error: str | None




@event("load_step")
class LoadStep(NamedTuple):
    producers: int
    consumers: int
    rate_per_s: float
    partitions: int


@event("steps_done")
class StepsDone(NamedTuple):
    """The scenario's steps ended (`failed` 1 when one failed); what follows is the run's epilogue
    (the load stops, consumers catch up, the final read). The summary's verdict is as of here."""

    failed: int


# --- reading events back --------------------------------------------------------------------------


class EventRecord(NamedTuple):
    """An event as a driver recorded it: when, on which node and incarnation, its first row's
    number (`node_seq`), and the typed event."""

    time_ms: float
    node: str
    incarnation: int
    node_seq: int
    event: Any

    @property
    def kind(self) -> str:
        return self.event.kind


DRIVER = "driver"
"""The node name of what the driver itself records (faults, steps, checks)."""


def row_dicts(rec: EventRecord) -> list[dict[str, Any]]:
    """The history rows an event makes (common columns included), as plain dicts."""
    ev = rec.event
    common = {"time_ms": rec.time_ms, "node": rec.node, "incarnation": rec.incarnation, "kind": ev.kind}
    if not ev.is_batch:
        return [{**common, "node_seq": rec.node_seq, **ev._asdict()}]
    cols = ev.rows()
    return [{**common, "node_seq": rec.node_seq + i, **{k: v[i] for k, v in cols.items()}} for i in range(ev.row_count)]
