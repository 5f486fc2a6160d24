"""The storage model: the storage table of docs/explanation/architecture.md, mode by mode and crash kind by crash kind.

| mode           | process crash          | OS crash / power loss       |
| fsync          | nothing lost           | nothing acknowledged lost   |
| page_cache     | nothing lost           | the unflushed suffix lost   |
| process_buffer | the unflushed suffix   | the unflushed suffix lost   |
A disk loss loses everything; a clean shutdown flushes and leaves a marker.
"""

import pytest

from storage.disk import CLEAN_SHUTDOWN_MARKER, SimDisk
from storage.modes import CrashKind, StorageMode

MODES = list(StorageMode)


def disk_with_flushed_and_unflushed(mode: StorageMode) -> SimDisk:
    disk = SimDisk(mode)
    disk.append("b1", "log", b"m1", now_ms=0)
    disk.flush_now("b1")
    disk.append("b1", "log", b"m2m3", now_ms=1)  # written, not flushed
    return disk


@pytest.mark.parametrize("mode", MODES)
def test_process_crash_loses_the_unflushed_suffix_only_in_process_buffer_mode(mode):
    disk = disk_with_flushed_and_unflushed(mode)
    disk.crash(CrashKind.PROCESS, owner="b1")
    expected = b"m1" if mode is StorageMode.PROCESS_BUFFER else b"m1m2m3"
    assert disk.read("b1", "log") == expected


@pytest.mark.parametrize("mode", MODES)
def test_os_crash_loses_the_unflushed_suffix_in_every_mode(mode):
    disk = disk_with_flushed_and_unflushed(mode)
    disk.crash(CrashKind.OS)
    assert disk.read("b1", "log") == b"m1"


@pytest.mark.parametrize("mode", MODES)
def test_disk_loss_loses_everything(mode):
    disk = disk_with_flushed_and_unflushed(mode)
    disk.write_clean_shutdown_marker("b1", b"epoch=7", now_ms=2)
    disk.crash(CrashKind.DISK)
    assert disk.files_of("b1") == {}
    assert disk.take_clean_shutdown_marker("b1") is None


@pytest.mark.parametrize("mode", MODES)
def test_clean_shutdown_flushes_everything_and_leaves_a_marker(mode):
    disk = disk_with_flushed_and_unflushed(mode)
    disk.write_clean_shutdown_marker("b1", b"epoch=7", now_ms=2)
    disk.crash(CrashKind.OS)  # even a power loss right after the shutdown loses nothing
    assert disk.read("b1", "log") == b"m1m2m3"
    assert disk.take_clean_shutdown_marker("b1") == b"epoch=7"
    # The marker is consumed by the start that read it: a crash after it is seen as unclean.
    assert disk.take_clean_shutdown_marker("b1") is None
    assert CLEAN_SHUTDOWN_MARKER not in disk.files_of("b1")


def test_process_crash_only_touches_the_crashed_process_files():
    disk = SimDisk(StorageMode.PROCESS_BUFFER)
    disk.append("b1", "log", b"x", now_ms=0)
    disk.append("c1", "log", b"y", now_ms=0)
    disk.crash(CrashKind.PROCESS, owner="b1")
    assert disk.read("b1", "log") == b""
    assert disk.read("c1", "log") == b"y"


def test_a_flush_in_flight_when_the_host_crashes_makes_nothing_durable():
    disk = SimDisk(StorageMode.PAGE_CACHE)
    disk.append("b1", "log", b"abc", now_ms=0)
    ticket = disk.begin_flush("b1")
    disk.crash(CrashKind.OS)
    disk.complete_flush(ticket)  # too late: the file was reverted, its version moved on
    assert disk.read_durable("b1", "log") == b""


def test_a_flush_covers_what_was_written_before_it_began_not_after():
    disk = SimDisk(StorageMode.PAGE_CACHE)
    disk.append("b1", "log", b"abc", now_ms=0)
    ticket = disk.begin_flush("b1")
    disk.append("b1", "log", b"def", now_ms=1)
    disk.complete_flush(ticket)
    disk.crash(CrashKind.OS)
    assert disk.read("b1", "log") == b"abc"


def test_truncating_into_flushed_bytes_is_undone_by_an_os_crash_until_flushed():
    disk = SimDisk(StorageMode.PAGE_CACHE)
    disk.append("b1", "log", b"abcdef", now_ms=0)
    disk.flush_now("b1")
    disk.truncate("b1", "log", 2, now_ms=1)
    assert disk.read("b1", "log") == b"ab"
    disk.crash(CrashKind.OS)
    assert disk.read("b1", "log") == b"abcdef"
    disk.truncate("b1", "log", 2, now_ms=2)
    disk.flush_now("b1")
    disk.crash(CrashKind.OS)
    assert disk.read("b1", "log") == b"ab"


def test_an_unflushed_replace_reverts_to_the_old_content():
    disk = SimDisk(StorageMode.PAGE_CACHE)
    disk.replace("c1", "quorum-state", b"epoch=1", now_ms=0)
    disk.flush_now("c1")
    disk.replace("c1", "quorum-state", b"epoch=2", now_ms=1)
    disk.crash(CrashKind.OS)
    assert disk.read("c1", "quorum-state") == b"epoch=1"


def test_page_cache_writeback_flushes_data_dirty_longer_than_the_expiry():
    disk = SimDisk(StorageMode.PAGE_CACHE, dirty_expire_ms=30_000)
    disk.append("b1", "log", b"old", now_ms=0)
    assert disk.background_flush(now_ms=29_999) == 0
    assert disk.background_flush(now_ms=30_000) == 1
    disk.append("b1", "log2", b"new", now_ms=30_000)
    disk.crash(CrashKind.OS)
    assert disk.read("b1", "log") == b"old"
    assert disk.read("b1", "log2") == b""


def test_process_buffer_background_flush_writes_out_the_whole_buffer():
    disk = SimDisk(StorageMode.PROCESS_BUFFER, dirty_expire_ms=30_000)
    disk.append("b1", "log", b"new", now_ms=0)
    assert disk.background_flush(now_ms=1) == 1
    disk.crash(CrashKind.PROCESS, owner="b1")
    assert disk.read("b1", "log") == b"new"


def test_dirty_bytes_counts_what_a_crash_would_lose():
    disk = disk_with_flushed_and_unflushed(StorageMode.PAGE_CACHE)
    assert disk.dirty_bytes("b1") == 4
    disk.flush_now("b1")
    assert disk.dirty_bytes("b1") == 0
