"""The replicated metadata log of one KRaft node, in memory, with the storage operations that persist it.

Invariant: `entries[i].offset == i` (no snapshots: the log starts at offset 0) and epochs never
decrease along the log. `epoch_starts` is the leader-epoch cache: (epoch, first offset) for each
epoch present in the log, in order.

On disk the log is one file of frames (storage.codec), one frame per entry; `positions[i]` is the
byte offset where entry i starts, so truncation maps to a file truncation.
"""

from __future__ import annotations

import zlib

from actors.contract import Append, Output, Truncate
from observability.events import RaftAppended
from storage.codec import encode_value, frame, pack, read_frames, unpack

from .messages import LogEntry

LOG_FILE = "raft/log"


class RaftLog:
    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.positions: list[int] = []
        # The CRC of each entry's frame body (offset, epoch, record): what identifies an entry in
        # the history (`raft_appended`), so that readers compare entries without their records.
        self.crcs: list[int] = []
        self.size_bytes = 0
        self.epoch_starts: list[tuple[int, int]] = []

    # --- reading --------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def entries_from(self, offset: int, limit: int = 1000) -> tuple[LogEntry, ...]:
        return tuple(self.entries[offset : offset + limit])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's endOffsetForEpoch: the largest epoch <= `epoch` present in the log, and the
        offset where it ends (the start of the next epoch, or the log end). (0, 0) if none."""
        found = None
        for i, (e, _) in enumerate(self.epoch_starts):
            if e <= epoch:
                found = i
            else:
                break
        if found is None:
            return 0, 0
        e = self.epoch_starts[found][0]
        end = self.epoch_starts[found + 1][1] if found + 1 < len(self.epoch_starts) else self.end_offset
        return e, end

    # --- writing (each returns the storage ops through `out`) -------------------------------

    def append(self, entries: list[LogEntry] | tuple[LogEntry, ...], out: Output) -> None:
        if not entries:
            return
        chunks = []
        crcs = []
        for entry in entries:
            if entry.offset != len(self.entries):
                raise AssertionError(f"log gap: appending offset {entry.offset} at end offset {len(self.entries)}")
            if entry.epoch < self.last_epoch:
                raise AssertionError(f"epoch went back: {entry.epoch} after {self.last_epoch} at offset {entry.offset}")
            if not self.epoch_starts or self.epoch_starts[-1][0] != entry.epoch:
                self.epoch_starts.append((entry.epoch, entry.offset))
            body = pack([entry.offset, entry.epoch, encode_value(entry.record)])
            crc = zlib.crc32(body)
            data = frame(body)
            crcs.append(crc)
            self.crcs.append(crc)
            self.positions.append(self.size_bytes)
            self.size_bytes += len(data)
            self.entries.append(entry)
            chunks.append(data)
        out.write(Append(LOG_FILE, b"".join(chunks)))
        out.emit(RaftAppended(entries[0].offset, tuple(e.epoch for e in entries), tuple(crcs)))

    def truncate_to(self, offset: int, out: Output) -> None:
        """Drop every entry at or after `offset`."""
        if offset >= len(self.entries):
            return
        self.size_bytes = self.positions[offset]
        del self.entries[offset:]
        del self.positions[offset:]
        del self.crcs[offset:]
        while self.epoch_starts and self.epoch_starts[-1][1] >= offset:
            self.epoch_starts.pop()
        out.write(Truncate(LOG_FILE, self.size_bytes))

    # --- recovery ---------------------------------------------------------------------------

    @classmethod
    def recover(cls, files: dict[str, bytes], out: Output) -> RaftLog:
        """Rebuild from the log file; a torn or corrupt tail is truncated away."""
        log = cls()
        data = files.get(LOG_FILE, b"")
        bodies, _ = read_frames(data)
        pos = 0
        for body in bodies:
            offset, epoch, record = unpack(body)
            entry = LogEntry(offset, epoch, record)
            if entry.offset != len(log.entries) or entry.epoch < log.last_epoch:
                break
            if not log.epoch_starts or log.epoch_starts[-1][0] != entry.epoch:
                log.epoch_starts.append((entry.epoch, entry.offset))
            log.entries.append(entry)
            log.crcs.append(zlib.crc32(body))
            log.positions.append(pos)
            pos += len(frame(body))
        log.size_bytes = pos
        if pos < len(data):
            out.write(Truncate(LOG_FILE, pos))
        return log
