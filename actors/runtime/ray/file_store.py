"""A node's data directory on a real disk, with the crash semantics of `storage.modes`.

The roles write through storage operations (`actors.contract`); this applies them to real files:

- fsync: written with `os.write`, made durable by `os.fsync` before anything that acknowledges them
  leaves the node (the driver flushes before an `after_flush` send);
- page_cache: written without fsync; `Flush` (log.flush.interval.*) and the emulated OS writeback
  (files dirty for `dirty_expire_ms`) fsync them;
- process_buffer: appends stay in this process's memory until a flush writes and syncs them, so a
  process crash loses them for real.

An emulated OS crash must lose exactly what a real one would: what was written but never flushed.
The real kernel keeps those bytes (the machine did not crash), so every file's *durable length* is
recorded in a small bookkeeping file (`.durability`, a journal: see `_load_bookkeeping`); the host
agent applies `os_crash(node_dir)` after killing the processes: files are cut to their durable
length, files replaced since their last flush get their durable copy back (kept in `.durable/`),
files never flushed are left empty. Creating and deleting a file count as durable at once (Kafka
syncs the directory when it creates a log or a segment, and renames checkpoints into place), and a
truncation below the durable length lowers it (never more durable than a disk). These are
`storage.disk.SimDisk`'s rules, so that a scenario recovers the same way in both drivers.

The bookkeeping is not fsynced: it models the page cache's state for emulated crashes, which kill
processes, not the machine (a real power loss would lose it along with the data it describes).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import msgpack

from storage.disk import CLEAN_SHUTDOWN_MARKER
from storage.modes import StorageMode

BOOKKEEPING = ".durability"
DURABLE_COPIES = ".durable"
_TEMP_SUFFIX = ".tmp"
_RESERVED = {BOOKKEEPING, CLEAN_SHUTDOWN_MARKER}
# The journal is compacted once it holds this many records beyond four per file it describes.
JOURNAL_COMPACT_RECORDS = 10_000


def _reserved(rel: str) -> bool:
    return rel in _RESERVED or rel.startswith(DURABLE_COPIES + "/") or rel.endswith(_TEMP_SUFFIX)


def _write_atomically(path: Path, data: bytes, *, sync: bool) -> None:
    """Write-to-temp then rename, as Kafka writes its checkpoint files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + _TEMP_SUFFIX)
    with open(tmp, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def _load_bookkeeping(root: Path) -> tuple[dict[str, int], set[str]]:
    """The durable lengths and the saved paths the bookkeeping file records.

    The file is a journal of msgpack objects: a snapshot `{"durable": {path: length}, "saved":
    [path]}` (written whole, atomically, when a node starts, when the journal grows long and after
    an emulated crash), then one record per change since: `["d", path, length]` (its durable
    length is now `length`), `["s", path]` (its durable content was saved aside), `["u", path]`
    (no longer), `["x", path]` (deleted). Why a journal: the state changes at every flush, and
    rewriting the whole file each time (write, then rename) cost the brokers' event loops about a
    quarter of their busy time under fsync load (measured with py-spy, bench/ray_throughput.py);
    a record is one `os.write`. A reader that meets a torn last record (the node is writing it)
    stops before it: the state before that write, as the atomic replace gave.
    """
    try:
        data = (root / BOOKKEEPING).read_bytes()
    except FileNotFoundError:
        return {}, set()
    durable: dict[str, int] = {}
    saved: set[str] = set()
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    for entry in unpacker:  # stops at a torn last record
        if isinstance(entry, dict):
            durable, saved = dict(entry["durable"]), set(entry["saved"])
            continue
        op, rel = entry[0], entry[1]
        if op == "d":
            durable[rel] = entry[2]
        elif op == "s":
            saved.add(rel)
        elif op == "u":
            saved.discard(rel)
        elif op == "x":
            durable.pop(rel, None)
            saved.discard(rel)
    return durable, saved


def _snapshot(durable: dict[str, int], saved: set[str]) -> bytes:
    return msgpack.packb({"durable": durable, "saved": sorted(saved)}, use_bin_type=True)


class FileFlush:
    """A flush in progress: per file, (version, length to make durable, duplicate descriptor).

    `sync` touches nothing but its own descriptors, so it may run on a worker thread while the
    node goes on writing (the next flush covers what it writes meanwhile: group commit)."""

    __slots__ = ("files", "fsync_ms", "fsyncs")

    def __init__(self) -> None:
        self.files: dict[str, tuple[int, int, int]] = {}
        self.fsyncs = 0
        self.fsync_ms = 0.0

    def sync(self) -> None:
        try:
            for _version, _length, fd in self.files.values():
                started = time.perf_counter()
                os.fsync(fd)
                self.fsync_ms += (time.perf_counter() - started) * 1000.0
                self.fsyncs += 1
        finally:
            for _version, _length, fd in self.files.values():
                os.close(fd)


class NodeFiles:
    """One node's files. Paths are relative to the node's directory (as in storage operations).

    Invariants: `durable[p]` <= the file's length on disk; a path in `saved` has its durable content
    in `.durable/p` (it was replaced after its last flush); `dirty` holds every path whose visible
    content differs from its durable content.
    """

    def __init__(self, root: Path, mode: StorageMode, *, dirty_expire_ms: float = 30_000.0) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.mode = mode
        self.dirty_expire_ms = dirty_expire_ms
        self.durable, self.saved = _load_bookkeeping(self.root)
        # The bookkeeping journal (`_load_bookkeeping`): appended to by `_note`, started anew from
        # a snapshot by `_compact` (here, so that it begins with one).
        self._journal_fd: int | None = None
        self._journal_records = 0
        self._compact()
        self._fds: dict[str, int] = {}
        self._size: dict[str, int] = {}
        self._pending: dict[str, bytearray] = {}  # process_buffer: appends not written yet
        self._dirty_since: dict[str, float] = {}
        # Bumped when a file's content changes other than by an append (truncate, replace,
        # delete): a flush begun before then makes nothing of the new content durable.
        self._version: dict[str, int] = {}
        self.fsyncs = 0
        self.fsync_ms = 0.0  # time spent in os.fsync (the benchmark's in-situ fsync cost)
        self.flushes = 0  # flushes that synced anything (one flush syncs every dirty file)
        for rel in self._existing():
            self._size[rel] = (self.root / rel).stat().st_size
            if self._size[rel] != self.durable.get(rel, 0) or rel in self.saved:
                self._dirty_since[rel] = 0.0

    # --- reading what survived --------------------------------------------------------------

    def _existing(self) -> list[str]:
        out = []
        for path in sorted(self.root.rglob("*")):
            if path.is_file():
                rel = path.relative_to(self.root).as_posix()
                if not _reserved(rel):
                    out.append(rel)
        return out

    def read_all(self) -> dict[str, bytes]:
        """The data directory as a starting process sees it (marker and bookkeeping excluded)."""
        return {rel: (self.root / rel).read_bytes() for rel in self._existing()}

    def take_clean_shutdown_marker(self) -> bytes | None:
        """The marker's content if the last stop was clean; removed, so that a crash after this
        start is seen as unclean by the next one."""
        path = self.root / CLEAN_SHUTDOWN_MARKER
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        path.unlink()
        return data

    # --- writes ---------------------------------------------------------------------------------

    def _fd(self, rel: str) -> int:
        fd = self._fds.get(rel)
        if fd is None:
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = self._fds[rel] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return fd

    def _close(self, rel: str) -> None:
        fd = self._fds.pop(rel, None)
        if fd is not None:
            os.close(fd)

    def _bump(self, rel: str) -> None:
        self._version[rel] = self._version.get(rel, 0) + 1

    def _touch(self, rel: str, now_ms: float) -> None:
        self._dirty_since.setdefault(rel, now_ms)

    def size(self, rel: str) -> int:
        """The visible length (what the process would read back)."""
        return self._size.get(rel, 0) + len(self._pending.get(rel, b""))

    def append(self, rel: str, data: bytes, now_ms: float) -> None:
        self._touch(rel, now_ms)
        if self.mode is StorageMode.PROCESS_BUFFER:
            self._pending.setdefault(rel, bytearray()).extend(data)
            return
        os.write(self._fd(rel), data)
        self._size[rel] = self._size.get(rel, 0) + len(data)

    def truncate(self, rel: str, size: int, now_ms: float) -> None:
        if size >= self.size(rel):
            return
        on_disk = self._size.get(rel, 0)
        pending = self._pending.get(rel)
        if pending is not None and size >= on_disk:
            del pending[size - on_disk :]
            return
        self._pending.pop(rel, None)
        os.truncate(self.root / rel, size)
        self._bump(rel)
        self._size[rel] = size
        self._touch(rel, now_ms)
        if size < self.durable.get(rel, 0):
            self.durable[rel] = size
            self._note(["d", rel, size])

    def replace(self, rel: str, data: bytes, now_ms: float) -> None:
        path = self.root / rel
        durable_len = self.durable.get(rel, 0)
        if rel not in self.saved and durable_len > 0:
            # Keep the durable content aside: an OS crash before the next flush brings it back.
            with open(path, "rb") as f:
                _write_atomically(self.root / DURABLE_COPIES / rel, f.read(durable_len), sync=False)
            self.saved.add(rel)
            self._note(["s", rel])
        self._close(rel)
        self._pending.pop(rel, None)
        _write_atomically(path, data, sync=False)
        self._bump(rel)
        self._size[rel] = len(data)
        self._touch(rel, now_ms)
        if rel not in self.saved:
            self.durable[rel] = 0  # nothing of the new content is durable before a flush

    def delete(self, rel: str) -> None:
        self._close(rel)
        self._bump(rel)
        self._pending.pop(rel, None)
        self._size.pop(rel, None)
        self._dirty_since.pop(rel, None)
        changed = self.durable.pop(rel, None) is not None or rel in self.saved
        self.saved.discard(rel)
        # The bookkeeping first: a crash between the two leaves a file no longer durable, which an
        # OS crash empties, never a saved path without its copy.
        if changed:
            self._note(["x", rel])
        (self.root / rel).unlink(missing_ok=True)
        (self.root / DURABLE_COPIES / rel).unlink(missing_ok=True)

    # --- durability -----------------------------------------------------------------------------

    def dirty_paths(self) -> list[str]:
        return sorted(self._dirty_since)

    def is_dirty(self, rel: str | None = None) -> bool:
        return bool(self._dirty_since) if rel is None else rel in self._dirty_since

    def begin_flush(self, paths: list[str] | None = None) -> FileFlush:
        """Start a flush of the dirty files (all, or those given): write out what the process
        buffers, and take for each file its version, its length and a duplicate descriptor (the
        node may close or replace the file while the fsync runs elsewhere). Runs on the node's
        thread; `FileFlush.sync` may run on any thread; `complete_flush` back on the node's."""
        flush = FileFlush()
        for rel in self.dirty_paths() if paths is None else paths:
            if rel not in self._dirty_since:
                continue
            pending = self._pending.pop(rel, None)
            if pending:
                os.write(self._fd(rel), pending)
                self._size[rel] = self._size.get(rel, 0) + len(pending)
            flush.files[rel] = (self._version.get(rel, 0), self._size.get(rel, 0), os.dup(self._fd(rel)))
        return flush

    def complete_flush(self, flush: FileFlush) -> int:
        """Record what a synced flush made durable; returns how many files it synced.

        A file truncated, replaced or deleted since the flush began has a new version: the flush
        says nothing about it (as `SimDisk.complete_flush`). A file appended to meanwhile is
        durable up to the flush's length and stays dirty."""
        self.fsyncs += flush.fsyncs
        self.fsync_ms += flush.fsync_ms
        if flush.fsyncs:
            self.flushes += 1
        copies_done = []
        changes = []
        for rel, (version, length, _fd) in flush.files.items():
            if self._version.get(rel, 0) != version or rel not in self._size:
                continue
            if length > self.durable.get(rel, 0):
                self.durable[rel] = length
                changes.append(["d", rel, length])
            else:
                self.durable.setdefault(rel, length)
            if rel in self.saved:
                self.saved.discard(rel)
                copies_done.append(rel)
                changes.append(["u", rel])
            if self.size(rel) == length:
                self._dirty_since.pop(rel, None)
        if changes:
            self._note(*changes)
        # Only once the bookkeeping no longer names them: a reader (or a crash) in between must
        # never find a path listed as saved without its copy.
        for rel in copies_done:
            (self.root / DURABLE_COPIES / rel).unlink(missing_ok=True)
        return len(flush.files)

    def flush(self, paths: list[str] | None = None) -> int:
        """fsync the dirty files (all, or those given) on this thread; returns how many were synced."""
        flush = self.begin_flush(paths)
        flush.sync()
        return self.complete_flush(flush)

    def background_flush(self, now_ms: float) -> int:
        """The flush no role asks for: the OS writes back pages dirty for `dirty_expire_ms`
        (page_cache, fsync); the process writes out its whole buffer (process_buffer)."""
        if self.mode is StorageMode.PROCESS_BUFFER:
            return self.flush()
        due = [p for p, since in self._dirty_since.items() if now_ms - since >= self.dirty_expire_ms]
        return self.flush(due)

    def _note(self, *changes: list) -> None:
        """Append these changes to the bookkeeping journal: one write, visible to the host agent at
        once (the kernel keeps it when the process is killed)."""
        os.write(self._journal_fd, b"".join(msgpack.packb(c, use_bin_type=True) for c in changes))
        self._journal_records += len(changes)
        if self._journal_records > JOURNAL_COMPACT_RECORDS + 4 * len(self.durable):
            self._compact()

    def _compact(self) -> None:
        """Start the journal anew from a snapshot of the state (replaced atomically: a reader sees
        the old journal or the new one)."""
        _write_atomically(self.root / BOOKKEEPING, _snapshot(self.durable, self.saved), sync=False)
        if self._journal_fd is not None:
            os.close(self._journal_fd)
        self._journal_fd = os.open(self.root / BOOKKEEPING, os.O_WRONLY | os.O_APPEND)
        self._journal_records = 0

    def write_clean_shutdown_marker(self, marker: bytes) -> None:
        """A clean shutdown: everything is flushed, then the marker is written durably."""
        self.flush()
        _write_atomically(self.root / CLEAN_SHUTDOWN_MARKER, marker, sync=True)

    def close(self) -> None:
        for rel in list(self._fds):
            self._close(rel)
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None


# --- what the host agent does to a directory when it emulates a crash ----------------------------


def os_crash(root: Path) -> dict[str, int]:
    """Drop everything not durable from a node directory whose processes are dead: the page cache
    of the host is gone. Returns path -> bytes lost (for the record)."""
    root = Path(root)
    if not root.exists():
        return {}
    durable, saved = _load_bookkeeping(root)
    lost: dict[str, int] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if rel.endswith(_TEMP_SUFFIX):
            path.unlink()
            continue
        if _reserved(rel):
            continue
        size = path.stat().st_size
        if rel in saved:
            copy = root / DURABLE_COPIES / rel
            old = copy.read_bytes()
            os.replace(copy, path)
            lost[rel] = size
            durable[rel] = len(old)
        elif rel not in durable or durable[rel] == 0:
            os.truncate(path, 0)  # the directory entry is durable, none of the content
            if size:
                lost[rel] = size
            durable.pop(rel, None)
        elif size > durable[rel]:
            os.truncate(path, durable[rel])
            lost[rel] = size - durable[rel]
    shutil.rmtree(root / DURABLE_COPIES, ignore_errors=True)
    _write_atomically(root / BOOKKEEPING, _snapshot(durable, set()), sync=False)
    return lost


def durable_view(root: Path) -> dict[str, bytes]:
    """What `os_crash` would leave, without changing anything (for the checks). The node may be
    running and flushing meanwhile: a file that vanishes under the read means a newer state, so the
    read starts over."""
    for attempt in range(10):
        try:
            return _durable_view_once(root)
        except FileNotFoundError:
            time.sleep(0.001 * (attempt + 1))  # let the node's thread finish what it was doing
    return _durable_view_once(root)


def _durable_view_once(root: Path) -> dict[str, bytes]:
    root = Path(root)
    if not root.exists():
        return {}
    durable, saved = _load_bookkeeping(root)
    out = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if _reserved(rel):
            continue
        if rel in saved:
            out[rel] = (root / DURABLE_COPIES / rel).read_bytes()
        elif durable.get(rel, 0) > 0:
            with open(path, "rb") as f:
                out[rel] = f.read(durable[rel])
        else:
            out[rel] = b""
    return out


def visible_view(root: Path) -> dict[str, bytes]:
    """The directory's files as they are now (marker and bookkeeping excluded)."""
    root = Path(root)
    if not root.exists():
        return {}
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not _reserved(rel):
            try:
                out[rel] = p.read_bytes()
            except FileNotFoundError:  # deleted by the running node meanwhile
                continue
    return out


def bytes_on_disk(root: Path) -> int:
    """The total size of the files under a directory (what a disk loss takes)."""
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())


def wipe(root: Path) -> None:
    """A disk loss: the directory and everything in it are gone."""
    shutil.rmtree(root, ignore_errors=True)
