"""One partition replica's log: record batches, the leader-epoch cache, and their files.

Pure: the log changes in memory and describes the file writes that mirror it as storage operations
(`actors.contract.Append`, `Truncate`, `Replace`) added to an `Output`; a driver carries them out.
Recovery takes the files that survived a crash and rebuilds the log from them.

Files, under the replica's directory `partitions/<topic>-<partition>/`:
- segments `<base offset, 20 digits>.log` (Kafka's names): one frame per batch
  (`storage.codec.frame`: length, CRC, body), in offset order. The active (last) segment rolls
  when the next batch would take it past `segment_bytes` (`log.segment.bytes`, Kafka's
  `LogSegment.shouldRoll`; a batch larger than that still goes into an empty segment). There are
  no offset or time index files: the batches' offsets are kept in memory (`_bases`);
- `leader-epoch-checkpoint`: the epoch cache, rewritten atomically when it changes.

Record batches are opaque to the broker (docs/explanation/architecture.md): a header (base offset, count, leader epoch,
producer id and base sequence, CRC of the records) and the client's encoded records.

Offsets are 0-based and the log end offset (LEO) is exclusive: LEO=3 means offsets 0..2 exist.
Invariant: `batches` are contiguous (each batch's base offset is the previous batch's next offset)
and their leader epochs never decrease; `epochs` is the epoch cache: (epoch, start offset) pairs
with strictly increasing epochs and non-decreasing start offsets, every start offset <= LEO.
"""

from __future__ import annotations

import re
import zlib
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, replace

from actors.contract import Append, Delete, Output, Replace, Truncate, pickled_by_fields

from .codec import frame, pack, read_frames, unpack

SEGMENT_SUFFIX = ".log"
_SEGMENT_NAME = re.compile(r"(\d{20})\.log")
EPOCH_FILE = "leader-epoch-checkpoint"
PARTITIONS_DIR = "partitions"
DEFAULT_SEGMENT_BYTES = 1 << 30  # log.segment.bytes (protocol-facts.md: Kafka's default, 1 GiB)

NO_PRODUCER = -1


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A batch as the leader appended it. Clients send it with `base_offset` 0 and `leader_epoch`
    -1; the leader stamps both (Kafka assigns offsets on append)."""

    base_offset: int
    count: int
    leader_epoch: int
    producer_id: int
    base_sequence: int
    crc: int  # crc32 of `records`: what identifies a batch's content in checks
    records: bytes

    @classmethod
    def of(cls, records: bytes, count: int, producer_id: int = NO_PRODUCER, base_sequence: int = -1) -> RecordBatch:
        return cls(0, count, -1, producer_id, base_sequence, zlib.crc32(records), records)

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.count - 1

    def stamped(self, base_offset: int, leader_epoch: int) -> RecordBatch:
        return replace(self, base_offset=base_offset, leader_epoch=leader_epoch)

    def valid(self) -> bool:
        return zlib.crc32(self.records) == self.crc

    def encode(self) -> bytes:
        return pack([self.base_offset, self.count, self.leader_epoch, self.producer_id, self.base_sequence, self.crc, self.records])

    @classmethod
    def decode(cls, body: bytes) -> RecordBatch:
        base, count, epoch, pid, seq, crc, records = unpack(body)
        return cls(base, count, epoch, pid, seq, crc, records)


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """The last batches a producer appended (idempotence: the leader deduplicates retries). Kafka
    keeps the last five (ProducerStateManager's batch metadata), for a producer with up to five
    requests in flight per partition (max.in.flight.requests.per.connection <= 5): a retry of any
    of them is a duplicate."""

    last_sequence: int  # of the last batch
    base_sequence: int
    base_offset: int
    earlier: tuple[tuple[int, int], ...] = ()  # (base sequence, base offset) of the four batches before, newest first

    def appended(self, batch: RecordBatch) -> ProducerEntry:
        earlier = ((self.base_sequence, self.base_offset), *self.earlier)[:PRODUCER_BATCHES_KEPT - 1]
        return ProducerEntry(batch.last_sequence, batch.base_sequence, batch.base_offset, earlier)

    def offset_of(self, base_sequence: int) -> int | None:
        """Where the kept batch starting at `base_sequence` went (None: none kept starts there)."""
        if base_sequence == self.base_sequence:
            return self.base_offset
        return next((offset for sequence, offset in self.earlier if sequence == base_sequence), None)


PRODUCER_BATCHES_KEPT = 5


def producer_entry(previous: ProducerEntry | None, batch: RecordBatch) -> ProducerEntry:
    if previous is None:
        return ProducerEntry(batch.last_sequence, batch.base_sequence, batch.base_offset)
    return previous.appended(batch)


def replica_dir(topic: str, partition: int) -> str:
    return f"{PARTITIONS_DIR}/{topic}-{partition}"


PARTITION_METADATA_FILE = "partition.metadata"


def partition_metadata_path(directory: str) -> str:
    """Kafka's partition.metadata: the topic id the replica's log belongs to, so that a log left
    by a deleted topic is not taken for the log of a new topic of the same name."""
    return f"{directory}/{PARTITION_METADATA_FILE}"


def partition_metadata(topic_id: str) -> bytes:
    return f"version: 0\ntopic_id: {topic_id}\n".encode()


def read_partition_metadata(data: bytes | None) -> str | None:
    """The topic id a partition.metadata file names; None without one (its page-cache write was
    lost in an OS crash), when the replica is taken to belong to the topic of its name."""
    for line in (data or b"").decode(errors="replace").splitlines():
        key, _, value = line.partition(": ")
        if key == "topic_id" and value:
            return value
    return None


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


class PartitionLog:
    def __init__(self, directory: str, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.directory = directory
        # log.segment.bytes (or the topic's segment.bytes); the replica keeps it current.
        self.segment_bytes = segment_bytes
        self.batches: list[RecordBatch] = []
        self._bases: list[int] = []  # base offset of each batch (for bisect)
        # Per batch: (index of its segment, byte position of its frame in that segment).
        self._positions: list[tuple[int, int]] = []
        # Base offset and byte size of each segment, oldest first. Invariant: never empty; the
        # last is the active one; a segment's base offset is its first batch's (or, when empty,
        # the LEO at which it was created or truncated to).
        self.segments: list[tuple[int, int]] = [(0, 0)]
        self.end_offset = 0  # LEO
        self.epochs: list[tuple[int, int]] = []  # the epoch cache
        self.producers: dict[int, ProducerEntry] = {}
        # Bumped by every truncation: a prefix checked at one version stays valid until it changes.
        self.version = 0

    def _segment_file(self, base_offset: int) -> str:
        return f"{self.directory}/{segment_name(base_offset)}"

    def segment_path(self) -> str:
        """The active (last) segment's file."""
        return self._segment_file(self.segments[-1][0])

    def segment_paths(self) -> list[str]:
        return [self._segment_file(base) for base, _size in self.segments]

    @property
    def epoch_path(self) -> str:
        return f"{self.directory}/{EPOCH_FILE}"

    # --- reading -------------------------------------------------------------------------------

    @property
    def last_epoch(self) -> int:
        """The latest epoch in the cache (-1 for an empty cache)."""
        return self.epochs[-1][0] if self.epochs else -1

    def batch_index(self, offset: int) -> int:
        """Index of the batch holding `offset` (offset must be below the LEO)."""
        return bisect_right(self._bases, offset) - 1

    def read_from(self, offset: int, max_batches: int) -> tuple[RecordBatch, ...]:
        """Batches holding offsets >= `offset` (from the one containing it), at most `max_batches`."""
        if offset >= self.end_offset:
            return ()
        i = max(self.batch_index(offset), 0)
        return tuple(self.batches[i : i + max_batches])

    def read_range(self, offset: int, end: int, max_batches: int) -> tuple[RecordBatch, ...]:
        """Whole batches starting in [offset's batch, end) (a consumer reads below the HWM)."""
        out = []
        for b in self.read_from(offset, max_batches):
            if b.next_offset > end:
                break
            out.append(b)
        return tuple(out)

    def identity_at(self, offset: int) -> tuple[int, int, int] | None:
        """What is stored at `offset`: (crc, position in batch, leader epoch), or None past the LEO."""
        if offset >= self.end_offset or offset < 0:
            return None
        b = self.batches[self.batch_index(offset)]
        return (b.crc, offset - b.base_offset, b.leader_epoch)

    def holds(self, base_offset: int, count: int, crc: int) -> bool:
        """Whether the batch that went to `base_offset` (with `count` records and this CRC) is
        here, whole and unchanged (the loss checks ask this of acknowledged batches)."""
        ident = self.identity_at(base_offset)
        return ident is not None and ident[0] == crc and ident[1] == 0 and self.end_offset >= base_offset + count

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the cache, the offset where it ends): the start of the next
        epoch, or the LEO for the latest. (-1, -1) when every cached epoch is greater (Kafka's
        OffsetsForLeaderEpoch answer, the protocol description §6.6)."""
        found = -1
        for i, (e, _start) in enumerate(self.epochs):
            if e > epoch:
                if found < 0:
                    return (-1, -1)
                return (self.epochs[i - 1][0], self.epochs[i][1])
            found = i
        if found < 0:
            return (-1, -1)
        return (self.epochs[found][0], self.end_offset)

    # --- writing -------------------------------------------------------------------------------

    def append(self, batch: RecordBatch, out: Output) -> None:
        assert batch.base_offset == self.end_offset, f"{self.directory}: batch at {batch.base_offset}, LEO {self.end_offset}"
        assert batch.leader_epoch >= self.last_epoch_of_batches(), f"{self.directory}: batch epoch {batch.leader_epoch} < {self.last_epoch_of_batches()}"
        self._add(batch)
        data = frame(batch.encode())
        base, size = self.segments[-1]
        if size > 0 and size + len(data) > self.segment_bytes:
            self.segments.append((batch.base_offset, 0))  # roll: the new segment is named after this batch
            base, size = batch.base_offset, 0
        self._positions.append((len(self.segments) - 1, size))
        self.segments[-1] = (base, size + len(data))
        out.write(Append(self.segment_path(), data))
        if batch.leader_epoch != self.last_epoch:
            self._assign_epoch(batch.leader_epoch, batch.base_offset, out)

    def _add(self, batch: RecordBatch) -> None:
        self.batches.append(batch)
        self._bases.append(batch.base_offset)
        self.end_offset = batch.next_offset
        if batch.producer_id != NO_PRODUCER:
            self.producers[batch.producer_id] = producer_entry(self.producers.get(batch.producer_id), batch)

    def assign_epoch(self, epoch: int, start_offset: int, out: Output) -> None:
        """A new leader records where its epoch starts (its LESO) before appending anything."""
        if epoch != self.last_epoch:
            self._assign_epoch(epoch, start_offset, out)

    def _assign_epoch(self, epoch: int, start_offset: int, out: Output) -> None:
        # Kafka's LeaderEpochFileCache.assign: entries the new one contradicts (a later or equal
        # epoch, or a start at or after it: left by a leadership that wrote nothing) go first.
        self.epochs = [(e, s) for e, s in self.epochs if e < epoch and s < start_offset]
        self.epochs.append((epoch, start_offset))
        out.write(Replace(self.epoch_path, pack(self.epochs)))

    def truncate_to(self, offset: int, out: Output) -> int:
        """Remove every batch holding an offset >= `offset` (a batch is never split: the LEO may
        end below `offset`); returns the new LEO."""
        if offset >= self.end_offset:
            return self.end_offset
        i = self.batch_index(max(offset, 0))  # the batch holding `offset` goes too, whole
        segment, position = self._positions[i]
        del self.batches[i:], self._bases[i:], self._positions[i:]
        self.end_offset = self.batches[-1].next_offset if self.batches else 0
        self.version += 1
        # Kafka's Log.truncateTo: segments after the one holding the cut are deleted, that one is
        # cut (and stays, possibly empty, as the active segment).
        for base, _size in self.segments[segment + 1 :]:
            out.write(Delete(self._segment_file(base)))
        del self.segments[segment + 1 :]
        self.segments[segment] = (self.segments[segment][0], position)
        out.write(Truncate(self.segment_path(), position))
        kept = [(e, s) for e, s in self.epochs if s < self.end_offset]
        if kept != self.epochs:
            self.epochs = kept
            out.write(Replace(self.epoch_path, pack(self.epochs)))
        self._rebuild_producers()
        return self.end_offset

    def _rebuild_producers(self) -> None:
        self.producers = {}
        for b in self.batches:
            if b.producer_id != NO_PRODUCER:
                self.producers[b.producer_id] = producer_entry(self.producers.get(b.producer_id), b)

    # --- recovery ------------------------------------------------------------------------------

    @classmethod
    def recover(cls, directory: str, files: Mapping[str, bytes], out: Output, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> PartitionLog:
        """The log as its files survived. A torn or corrupt tail (CRC) and anything after a gap are
        cut off (the segment where the valid log ends is truncated, later ones deleted); the epoch
        cache is rebuilt from the recovered batches and rewritten if it differs."""
        log = cls(directory, segment_bytes)
        found = sorted(
            (int(m[1]), path)
            for path in files
            if path.startswith(directory + "/") and (m := _SEGMENT_NAME.fullmatch(path[len(directory) + 1 :]))
        )
        log.segments = []
        broken = False
        for base, path in found:
            if broken or base != log.end_offset:
                broken = True  # a gap (or what follows a cut): not part of the log
                out.write(Delete(path))
                continue
            data = files[path]
            log.segments.append((base, 0))
            position = 0
            bodies, _ = read_frames(data)
            for body in bodies:
                batch = RecordBatch.decode(body)
                if batch.base_offset != log.end_offset or not batch.valid() or batch.leader_epoch < log.last_epoch_of_batches():
                    break
                log._add(batch)
                log._positions.append((len(log.segments) - 1, position))
                position += len(frame(body))
            log.segments[-1] = (base, position)
            if position < len(data):
                out.write(Truncate(path, position))
                broken = True
        if not log.segments:
            log.segments = [(log.end_offset, 0)]
        # The batches are the truth: each epoch starts at its first batch (Kafka truncates the
        # checkpointed cache to the log end on load; an epoch that wrote nothing leaves no trace).
        cached = [tuple(p) for p in unpack(files[log.epoch_path])] if files.get(log.epoch_path) else []
        for b in log.batches:
            if not log.epochs or b.leader_epoch > log.epochs[-1][0]:
                log.epochs.append((b.leader_epoch, b.base_offset))
        if cached != log.epochs:
            out.write(Replace(log.epoch_path, pack(log.epochs)))
        return log

    def last_epoch_of_batches(self) -> int:
        return self.batches[-1].leader_epoch if self.batches else -1


def partition_dirs(files: Mapping[str, bytes]) -> list[tuple[str, int, str]]:
    """(topic, partition, directory) of every replica directory among a node's files."""
    return [(topic, partition, directory) for topic, partition, directory, _ in partition_dir_files(files)]


def partition_dir_files(files: Mapping[str, bytes]) -> list[tuple[str, int, str, dict[str, bytes]]]:
    """(topic, partition, directory, the directory's files) of every replica directory among a
    node's files, in one pass (recovering each directory from all the node's files would cost
    O(partitions^2) on a broker of 10,000 partitions)."""
    seen: dict[str, tuple[str, int, str, dict[str, bytes]]] = {}
    prefix = PARTITIONS_DIR + "/"
    for path, data in files.items():
        if path.startswith(prefix):
            name = path[len(prefix) :].split("/", 1)[0]
            entry = seen.get(name)
            if entry is None:
                topic, _, index = name.rpartition("-")
                if not (topic and index.isdigit()):
                    continue
                entry = seen[name] = (topic, int(index), prefix + name, {})
            entry[3][path] = data
    return [seen[k] for k in sorted(seen)]
