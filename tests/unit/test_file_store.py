"""Real files for the Ray runtime (actors/runtime/ray/file_store.py): what each storage mode keeps
across process crashes, OS crashes and disk loss, and torn-tail recovery, on a real directory."""

from pathlib import Path

from actors.contract import Output, Truncate
from actors.runtime.ray.file_store import NodeFiles, durable_view, os_crash, visible_view, wipe
from storage.codec import frame
from storage.modes import StorageMode
from storage.partition_log import PartitionLog, RecordBatch, replica_dir, segment_name

DIR = replica_dir("t", 0)
LOG = f"{DIR}/{segment_name(0)}"  # the first segment


def batch_frames(n: int, start: int = 0) -> list[bytes]:
    frames = []
    offset = start
    for i in range(n):
        b = RecordBatch.of(f"record-{start + i}".encode(), 1).stamped(offset, 0)
        frames.append(frame(b.encode()))
        offset += 1
    return frames


def recover(files: NodeFiles) -> tuple[PartitionLog, Output]:
    out = Output()
    return PartitionLog.recover(DIR, files.read_all(), out), out


def test_page_cache_os_crash_cuts_each_file_to_its_flushed_length(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    first, second = batch_frames(3), batch_frames(2, start=3)
    files.append(LOG, b"".join(first), 0)
    files.flush()
    files.append(LOG, b"".join(second), 1)
    assert (tmp_path / LOG).stat().st_size == len(b"".join(first + second))  # in the page cache
    files.close()

    lost = os_crash(tmp_path)

    assert lost == {LOG: len(b"".join(second))}
    log, _ = recover(NodeFiles(tmp_path, StorageMode.PAGE_CACHE))
    assert log.end_offset == 3


def test_page_cache_process_crash_keeps_unflushed_writes(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    files.append(LOG, b"".join(batch_frames(4)), 0)
    files.close()  # the process dies; the OS (and its page cache) lives on
    log, _ = recover(NodeFiles(tmp_path, StorageMode.PAGE_CACHE))
    assert log.end_offset == 4
    assert durable_view(tmp_path) == {LOG: b""}  # none of it would survive an OS crash


def test_process_buffer_keeps_unflushed_appends_in_process_memory(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.PROCESS_BUFFER)
    files.append(LOG, b"".join(batch_frames(2)), 0)
    files.flush()
    files.append(LOG, b"".join(batch_frames(3, start=2)), 1)
    assert files.size(LOG) == len(b"".join(batch_frames(5)))
    assert (tmp_path / LOG).stat().st_size == len(b"".join(batch_frames(2)))
    files.close()  # process crash: the buffer is gone
    log, _ = recover(NodeFiles(tmp_path, StorageMode.PROCESS_BUFFER))
    assert log.end_offset == 2


def test_fsync_mode_flush_syncs_and_survives_os_crash(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.FSYNC)
    files.append(LOG, b"".join(batch_frames(3)), 0)
    assert files.is_dirty(LOG)
    assert files.flush() == 1 and files.fsyncs == 1
    assert not files.is_dirty()
    files.close()
    assert os_crash(tmp_path) == {}
    log, _ = recover(NodeFiles(tmp_path, StorageMode.FSYNC))
    assert log.end_offset == 3


def test_torn_tail_is_detected_and_truncated_on_recovery(tmp_path: Path):
    frames = batch_frames(3)
    whole = b"".join(frames)
    (tmp_path / DIR).mkdir(parents=True)
    (tmp_path / LOG).write_bytes(whole + frames[0][:7])  # a write cut in the middle
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    log, out = recover(files)
    assert log.end_offset == 3
    cuts = [op for op in out.storage if isinstance(op, Truncate)]
    assert cuts == [Truncate(LOG, len(whole))]
    files.truncate(cuts[0].path, cuts[0].size, 0)
    assert (tmp_path / LOG).stat().st_size == len(whole)


def test_corrupt_tail_fails_its_crc_and_is_truncated(tmp_path: Path):
    frames = batch_frames(3)
    damaged = bytearray(frames[2])
    damaged[-1] ^= 0xFF  # a bit flip in the last batch's body
    (tmp_path / DIR).mkdir(parents=True)
    (tmp_path / LOG).write_bytes(frames[0] + frames[1] + bytes(damaged))
    files = NodeFiles(tmp_path, StorageMode.FSYNC)
    log, out = recover(files)
    assert log.end_offset == 2
    for op in out.storage:
        if isinstance(op, Truncate):
            files.truncate(op.path, op.size, 0)
    assert (tmp_path / LOG).read_bytes() == frames[0] + frames[1]


def test_replaced_checkpoint_returns_to_its_flushed_content_after_os_crash(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    files.replace("replication-offset-checkpoint", b"hwm=5", 0)
    files.flush()
    files.replace("replication-offset-checkpoint", b"hwm=9", 1)
    files.replace("quorum-state", b"never flushed", 1)
    assert visible_view(tmp_path)["replication-offset-checkpoint"] == b"hwm=9"
    files.close()
    os_crash(tmp_path)
    # The never-flushed file stays, empty: creating a file is durable (as in storage.disk.SimDisk).
    assert visible_view(tmp_path) == {"replication-offset-checkpoint": b"hwm=5", "quorum-state": b""}


def test_truncation_below_the_flushed_length_lowers_it(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    frames = batch_frames(4)
    files.append(LOG, b"".join(frames), 0)
    files.flush()
    files.truncate(LOG, len(frames[0]), 1)
    files.append(LOG, b"x" * 10, 2)
    files.close()
    os_crash(tmp_path)
    assert (tmp_path / LOG).read_bytes() == frames[0]


def test_background_flush_writes_back_pages_dirty_long_enough(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE, dirty_expire_ms=30_000)
    files.append("a", b"old", 0)
    files.append("b", b"new", 25_000)
    assert files.background_flush(31_000) == 1
    assert files.dirty_paths() == ["b"]


def test_clean_shutdown_marker_is_taken_once(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    files.append("a", b"data", 0)
    files.write_clean_shutdown_marker(b"epoch=7")
    assert not files.is_dirty()
    files.close()
    again = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    assert again.take_clean_shutdown_marker() == b"epoch=7"
    assert again.take_clean_shutdown_marker() is None
    assert "a" in again.read_all() and ".clean_shutdown" not in again.read_all()


def test_disk_loss_wipes_the_directory(tmp_path: Path):
    files = NodeFiles(tmp_path / "b1", StorageMode.FSYNC)
    files.append("a", b"data", 0)
    files.flush()
    files.close()
    wipe(tmp_path / "b1")
    assert NodeFiles(tmp_path / "b1", StorageMode.FSYNC).read_all() == {}


def test_a_flush_makes_durable_only_what_was_written_before_it_began(tmp_path: Path):
    """The fsync runs on a worker thread while the node goes on writing (node_process.py): an
    append after the flush began is not covered by it, and the file stays dirty."""
    files = NodeFiles(tmp_path, StorageMode.FSYNC)
    frames = batch_frames(2)
    files.append(LOG, frames[0], 0)
    flush = files.begin_flush()
    files.append(LOG, frames[1], 1)  # meanwhile
    flush.sync()
    assert files.complete_flush(flush) == 1 and files.fsyncs == 1
    assert files.is_dirty(LOG)
    files.close()
    os_crash(tmp_path)
    assert (tmp_path / LOG).read_bytes() == frames[0]


def test_a_flush_says_nothing_of_a_file_truncated_or_replaced_since_it_began(tmp_path: Path):
    files = NodeFiles(tmp_path, StorageMode.FSYNC)
    frames = batch_frames(3)
    files.append(LOG, b"".join(frames), 0)
    files.replace("quorum-state", b"epoch=1", 0)
    flush = files.begin_flush()
    files.truncate(LOG, len(frames[0]), 1)  # a truncation to the leader's epoch end
    files.append(LOG, b"from the new leader", 1)
    files.replace("quorum-state", b"epoch=2", 1)
    flush.sync()
    files.complete_flush(flush)
    assert files.dirty_paths() == sorted([LOG, "quorum-state"])
    files.close()
    os_crash(tmp_path)
    # Nothing of the new contents was flushed: the log keeps only what was durable before the
    # flush began (nothing) and the checkpoint never became durable.
    assert visible_view(tmp_path) == {LOG: b"", "quorum-state": b""}


def test_the_durable_view_never_finds_a_saved_file_without_its_copy(tmp_path: Path):
    """The checks read a running node's durable view from another thread: at every moment of a
    flush that makes a replaced file durable, the bookkeeping and the copies agree."""
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    files.replace("quorum-state", b"epoch=1", 0)
    files.flush()
    files.replace("quorum-state", b"epoch=2", 1)  # epoch=1 is kept aside in .durable/
    assert durable_view(tmp_path) == {"quorum-state": b"epoch=1"}
    flush = files.begin_flush()
    flush.sync()
    seen = []
    real_unlink = Path.unlink

    def unlink_and_look(path, missing_ok=False):
        seen.append(durable_view(tmp_path))  # what a reader sees just before the copy goes
        real_unlink(path, missing_ok=missing_ok)

    Path.unlink = unlink_and_look
    try:
        files.complete_flush(flush)
    finally:
        Path.unlink = real_unlink
    assert seen == [{"quorum-state": b"epoch=2"}]
    assert durable_view(tmp_path) == {"quorum-state": b"epoch=2"}
