"""The durability bookkeeping as a journal (actors/runtime/ray/file_store.py): what the host agent
reads back after killing a node (`_load_bookkeeping`) is the node's state at that moment, after any
sequence of appends, flushes, truncations, replacements and deletions, across compactions; and a
torn last record (the node killed in the middle of writing it) is read as the state before it."""

from __future__ import annotations

import os
import random

import pytest

from actors.runtime.ray import file_store
from actors.runtime.ray.file_store import BOOKKEEPING, NodeFiles, _load_bookkeeping, os_crash
from storage.modes import StorageMode

PATHS = ["t-0/00.log", "t-0/leader-epoch-checkpoint", "t-1/00.log", "meta/quorum-state"]


def _state(files: NodeFiles) -> tuple[dict[str, int], set[str]]:
    """The node's own view; a durable length of 0 and no entry mean the same (nothing durable)."""
    return {p: n for p, n in files.durable.items() if n > 0}, set(files.saved)


def _read_back(root) -> tuple[dict[str, int], set[str]]:
    durable, saved = _load_bookkeeping(root)
    return {p: n for p, n in durable.items() if n > 0}, saved


def _random_operations(files: NodeFiles, rng: random.Random, steps: int) -> None:
    now = 0.0
    for _ in range(steps):
        now += 1.0
        rel = rng.choice(PATHS)
        op = rng.random()
        if op < 0.45:
            files.append(rel, rng.randbytes(rng.randint(1, 40)), now)
        elif op < 0.7:
            files.flush()
        elif op < 0.8:
            files.truncate(rel, rng.randint(0, max(files.size(rel), 1)), now)
        elif op < 0.9:
            files.replace(rel, rng.randbytes(rng.randint(0, 30)), now)
        else:
            files.delete(rel)
        assert _read_back(files.root) == _state(files)


@pytest.mark.parametrize("seed", range(6))
def test_the_journal_reads_back_as_the_nodes_state_after_every_operation(tmp_path, seed):
    files = NodeFiles(tmp_path, StorageMode.FSYNC)
    _random_operations(files, random.Random(seed), 300)
    files.close()


def test_compaction_keeps_the_state_and_bounds_the_journal(tmp_path, monkeypatch):
    monkeypatch.setattr(file_store, "JOURNAL_COMPACT_RECORDS", 10)
    files = NodeFiles(tmp_path, StorageMode.FSYNC)
    sizes = []
    rng = random.Random(7)
    for _ in range(40):
        _random_operations(files, rng, 10)
        sizes.append(os.path.getsize(tmp_path / BOOKKEEPING))
    # compacted: the file never holds more than the bound's records (each well under 100 bytes)
    assert max(sizes) < 100 * (10 + 4 * len(PATHS) + 2)
    files.close()


def test_a_torn_last_record_reads_as_the_state_before_it(tmp_path):
    files = NodeFiles(tmp_path, StorageMode.FSYNC)
    files.append("t-0/00.log", b"x" * 30, 1.0)
    files.flush()
    before = _read_back(tmp_path)
    assert before == ({"t-0/00.log": 30}, set())
    with open(tmp_path / BOOKKEEPING, "ab") as f:
        f.write(b"\x93\xa1d")  # the first bytes of ["d", path, length]: the node was killed mid-write
    assert _read_back(tmp_path) == before
    files.close()


def test_a_node_started_again_and_an_os_crash_read_the_journal(tmp_path):
    files = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)
    files.append("t-0/00.log", b"a" * 10, 1.0)
    files.flush()
    files.append("t-0/00.log", b"b" * 5, 2.0)  # written, never flushed
    files.close()
    again = NodeFiles(tmp_path, StorageMode.PAGE_CACHE)  # a process restart: the page cache kept it all
    assert again.durable["t-0/00.log"] == 10 and again.size("t-0/00.log") == 15
    again.close()
    assert os_crash(tmp_path) == {"t-0/00.log": 5}
    assert (tmp_path / "t-0/00.log").read_bytes() == b"a" * 10
