"""An in-memory host disk with a durable layer and an unflushed layer.

The simulator gives every host one `SimDisk`; several nodes (processes) on a host share it, each
owning the files under its own name. What a file holds is modelled in two layers:

- the *visible* content, what the processes read back while the host is up;
- the *durable* content, what survives an OS crash: the prefix `data[:durable_len]`, or, after a
  rewrite or truncation reached into durable bytes, a separate `durable_snapshot`.

Appends, the hot path, therefore cost no copy and a flush is O(1) per file; only a truncation into
flushed bytes or an atomic replace copies the old durable content once.

Crash semantics follow `storage.modes` (the storage table of docs/explanation/architecture.md): a process crash reverts the process's
files to their durable content only in process_buffer mode; an OS crash reverts every file; a disk
loss deletes every file. A flush is two-phased (`begin_flush` / `complete_flush`) so that a driver can
model fsync latency: a crash between the two leaves the data not durable, and a file rewritten or
truncated in between keeps only what an earlier flush made durable (conservative, never more
durable than a real disk).

Deleting a file is modelled as immediately durable (a directory fsync), as Kafka does for segments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .modes import CrashKind, StorageMode

CLEAN_SHUTDOWN_MARKER = ".clean_shutdown"
"""Kafka leaves `.kafka_cleanshutdown` in a log directory; our marker also carries the role's data."""


class SimFile:
    __slots__ = ("data", "dirty_since_ms", "durable_len", "durable_snapshot", "version")

    def __init__(self) -> None:
        self.data = bytearray()
        # Invariant: when durable_snapshot is None the durable content is data[:durable_len];
        # otherwise it is durable_snapshot (and durable_len == len(durable_snapshot)).
        self.durable_len = 0
        self.durable_snapshot: bytes | None = None
        # Bumped by every truncate/replace, so a flush begun before it cannot claim the new bytes.
        self.version = 0
        self.dirty_since_ms: float | None = None

    @property
    def dirty(self) -> bool:
        return self.durable_snapshot is not None or self.durable_len != len(self.data)

    def durable_content(self) -> bytes:
        if self.durable_snapshot is not None:
            return self.durable_snapshot
        return bytes(self.data[: self.durable_len])

    def preserve_durable(self) -> None:
        """Copy the durable bytes aside before a change that would overwrite them."""
        if self.durable_snapshot is None and self.durable_len > 0:
            self.durable_snapshot = bytes(self.data[: self.durable_len])

    def make_durable(self, length: int | None = None) -> None:
        """The visible content up to `length` (all of it by default) is now on stable storage."""
        self.durable_snapshot = None
        self.durable_len = len(self.data) if length is None else min(length, len(self.data))
        if self.durable_len == len(self.data):
            self.dirty_since_ms = None

    def unflushed_bytes(self) -> int:
        """Visible bytes that are not durable (what a crash losing the page cache takes)."""
        return max(len(self.data) - (self.durable_len if self.durable_snapshot is None else 0), 0)

    def revert_to_durable(self) -> None:
        self.data = bytearray(self.durable_content())
        self.durable_len = len(self.data)
        self.durable_snapshot = None
        self.version += 1
        self.dirty_since_ms = None


@dataclass
class FlushTicket:
    """A flush in progress: for each dirty file, the version and length it will make durable."""

    owner: str
    pending: dict[str, tuple[int, int]] = field(default_factory=dict)


class SimDisk:
    """One host's disk. File keys are `(owner, path)`; the owner is the node that wrote the file."""

    def __init__(self, mode: StorageMode, *, dirty_expire_ms: float = 30_000.0) -> None:
        self.mode = mode
        # Page-cache mode: the OS writes back pages dirty for longer than this (Linux
        # vm.dirty_expire_centisecs defaults to 30 s).
        self.dirty_expire_ms = dirty_expire_ms
        self._files: dict[tuple[str, str], SimFile] = {}

    # --- writes -----------------------------------------------------------------------------

    def _file(self, owner: str, path: str, now_ms: float) -> SimFile:
        f = self._files.get((owner, path))
        if f is None:
            f = self._files[(owner, path)] = SimFile()
        if f.dirty_since_ms is None:
            f.dirty_since_ms = now_ms
        return f

    def append(self, owner: str, path: str, data: bytes, now_ms: float) -> None:
        self._file(owner, path, now_ms).data += data

    def truncate(self, owner: str, path: str, size: int, now_ms: float) -> None:
        f = self._files.get((owner, path))
        if f is None or size >= len(f.data):
            return
        f = self._file(owner, path, now_ms)
        if size < f.durable_len:
            f.preserve_durable()
        del f.data[size:]
        f.version += 1

    def replace(self, owner: str, path: str, data: bytes, now_ms: float) -> None:
        f = self._file(owner, path, now_ms)
        f.preserve_durable()
        f.data = bytearray(data)
        f.version += 1
        if f.durable_snapshot is None:  # nothing was durable before: durable content stays empty
            f.durable_snapshot = b""
            f.durable_len = 0

    def delete(self, owner: str, path: str) -> None:
        self._files.pop((owner, path), None)

    # --- reads ------------------------------------------------------------------------------

    def read(self, owner: str, path: str) -> bytes | None:
        f = self._files.get((owner, path))
        return None if f is None else bytes(f.data)

    def read_durable(self, owner: str, path: str) -> bytes | None:
        f = self._files.get((owner, path))
        return None if f is None else f.durable_content()

    def is_dirty(self, owner: str, path: str) -> bool:
        """Whether the file holds bytes a crash could lose (not all durable yet)."""
        f = self._files.get((owner, path))
        return f is not None and f.dirty

    def files_of(self, owner: str) -> dict[str, bytes]:
        """The owner's data directory as its process sees it (the marker excluded)."""
        return {
            path: bytes(f.data)
            for (o, path), f in sorted(self._files.items())
            if o == owner and path != CLEAN_SHUTDOWN_MARKER
        }

    def durable_files_of(self, owner: str) -> dict[str, bytes]:
        """The owner's data directory as an OS crash now would leave it."""
        return {
            path: f.durable_content()
            for (o, path), f in sorted(self._files.items())
            if o == owner and path != CLEAN_SHUTDOWN_MARKER
        }

    def owners(self) -> set[str]:
        return {owner for owner, _ in self._files}

    def dirty_bytes(self, owner: str | None = None) -> int:
        """How many visible bytes are not yet durable (for metrics and tests)."""
        return sum(f.unflushed_bytes() for (o, _), f in self._files.items() if (owner is None or o == owner) and f.dirty)

    # --- flushing ---------------------------------------------------------------------------

    def begin_flush(self, owner: str) -> FlushTicket:
        ticket = FlushTicket(owner)
        for (o, path), f in self._files.items():
            if o == owner and f.dirty:
                ticket.pending[path] = (f.version, len(f.data))
        return ticket

    def complete_flush(self, ticket: FlushTicket) -> None:
        for path, (version, length) in ticket.pending.items():
            f = self._files.get((ticket.owner, path))
            if f is not None and f.version == version:
                f.make_durable(length)

    def flush_now(self, owner: str) -> None:
        self.complete_flush(self.begin_flush(owner))

    def background_flush(self, now_ms: float) -> int:
        """The periodic flush that needs no request from the role; returns files flushed.

        page_cache and fsync: the OS writes back files dirty for at least `dirty_expire_ms`.
        process_buffer: the process writes out (and syncs) its whole buffer on its own timer.
        """
        return sum(self.background_flush_by_owner(now_ms).values())

    def background_flush_by_owner(self, now_ms: float) -> dict[str, int]:
        """`background_flush`, telling how many files of each owner it flushed."""
        flushed: dict[str, int] = {}
        for (owner, _), f in self._files.items():
            if f.dirty_since_ms is None:
                continue
            if self.mode is StorageMode.PROCESS_BUFFER or now_ms - f.dirty_since_ms >= self.dirty_expire_ms:
                f.make_durable()
                flushed[owner] = flushed.get(owner, 0) + 1
        return flushed

    # --- shutdown and crashes ---------------------------------------------------------------

    def write_clean_shutdown_marker(self, owner: str, marker: bytes, now_ms: float) -> None:
        """A clean shutdown: everything the owner wrote is flushed, then the marker is made durable."""
        self.flush_now(owner)
        f = self._file(owner, CLEAN_SHUTDOWN_MARKER, now_ms)
        f.data = bytearray(marker)
        f.version += 1
        f.make_durable()

    def take_clean_shutdown_marker(self, owner: str) -> bytes | None:
        """At start-up: the marker's content if the last stop was clean; removes it (durably), so a
        crash after this start is seen as unclean by the next one."""
        f = self._files.pop((owner, CLEAN_SHUTDOWN_MARKER), None)
        return None if f is None else f.durable_content()

    def crash(self, kind: CrashKind, owner: str | None = None) -> dict[str, int]:
        """Apply a crash's effect on storage. `owner` names the process for a process crash.
        Returns, per owner who lost something, how many visible bytes the crash took."""
        lost: dict[str, int] = {}
        if kind is CrashKind.DISK:
            for (o, _), f in self._files.items():
                lost[o] = lost.get(o, 0) + len(f.data)
            self._files.clear()
        elif kind is CrashKind.OS:
            for (o, _), f in self._files.items():
                if f.dirty:
                    lost[o] = lost.get(o, 0) + f.unflushed_bytes()
                    f.revert_to_durable()
        elif kind is CrashKind.PROCESS:
            if owner is None:
                raise ValueError("a process crash needs the owner whose process died")
            if not self.mode.unflushed_survives_process_crash:
                for (o, _), f in self._files.items():
                    if o == owner and f.dirty:
                        lost[o] = lost.get(o, 0) + f.unflushed_bytes()
                        f.revert_to_durable()
        return {o: n for o, n in lost.items() if n}
