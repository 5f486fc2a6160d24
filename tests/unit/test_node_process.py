"""The Ray runtime's node loop without Ray (actors/runtime/ray/node_process.py): fsync runs on a
worker thread, acknowledgements wait for it, the node goes on handling inputs meanwhile, and what
needs a flush while one is in flight shares the next one (group commit), in order on each link."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from actors.contract import Envelope
from actors.runtime.ray import file_store
from actors.runtime.ray.file_store import NodeFiles, durable_view
from actors.runtime.ray.node_process import Clock, NodeProcess
from storage.disk import CLEAN_SHUTDOWN_MARKER
from storage.modes import StorageMode
from tests.sim.toy_roles import Ack, AckingWriter, Write


class GatedFsync:
    """Replaces `FileFlush.sync`: each fsync on the node's fsync thread waits until the test opens
    the gate (a flush on the event loop's own thread, as a clean shutdown's, does not)."""

    def __init__(self, monkeypatch) -> None:
        self.gate = threading.Event()
        self.started = 0
        real_sync = file_store.FileFlush.sync

        def sync(flush):
            if threading.current_thread().name.startswith("fsync-"):
                self.started += 1
                assert self.gate.wait(5), "the test never opened the fsync gate"
            real_sync(flush)

        monkeypatch.setattr(file_store.FileFlush, "sync", sync)


async def until(cond, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def run_writer(tmp_path: Path, mode: StorageMode, script) -> None:
    async def main():
        received: list[tuple[str, Envelope]] = []

        async def transport(dst, batch):
            received.extend((dst, env) for _at, env in batch)

        node = NodeProcess("w", lambda ctx: AckingWriter(ctx, mode), NodeFiles(tmp_path, mode), Clock(time.time()), transport, seed=1)
        node.start()
        try:
            await script(node, received)
        finally:
            node.close()

    asyncio.run(main())


def write(node: NodeProcess, *values: bytes) -> None:
    node.deliver([(0.0, Envelope("client", "w", Write(v))) for v in values])


def acks(received) -> list[bytes]:
    return [env.payload.value for _dst, env in received if isinstance(env.payload, Ack)]


def test_fsync_mode_acknowledges_after_the_fsync_and_groups_what_came_meanwhile(tmp_path: Path, monkeypatch):
    fsync = GatedFsync(monkeypatch)

    async def script(node: NodeProcess, received):
        write(node, b"a")
        await until(lambda: fsync.started == 1)
        write(node, b"b")
        write(node, b"c")
        await asyncio.sleep(0.05)
        # The node handled b and c (they are in the file) but acknowledged nothing: a's fsync
        # is still running, and b, c wait for the next flush.
        assert (tmp_path / "log").read_bytes() == b"abc"
        assert acks(received) == []
        assert durable_view(tmp_path) == {"log": b""}
        fsync.gate.set()
        await until(lambda: len(acks(received)) == 3)
        assert acks(received) == [b"a", b"b", b"c"]
        # a alone, then b and c together: two fsyncs for three writes.
        assert node.files.fsyncs == 2
        assert durable_view(tmp_path) == {"log": b"abc"}
        assert node.links_idle()

    run_writer(tmp_path, StorageMode.FSYNC, script)


def test_page_cache_acknowledges_at_once_and_keeps_order_behind_a_flush(tmp_path: Path, monkeypatch):
    """An explicit Flush (log.flush.interval.*) holds back what the node sends after it, so an
    acknowledgement that needs no flush does not overtake one that waits for it."""
    fsync = GatedFsync(monkeypatch)

    async def script(node: NodeProcess, received):
        write(node, b"a")
        await until(lambda: acks(received) == [b"a"])  # page cache: no flush before acknowledging
        node.deliver([(0.0, Envelope("client", "w", "flush"))])
        await until(lambda: fsync.started == 1)
        write(node, b"b")
        await asyncio.sleep(0.05)
        assert acks(received) == [b"a"] and node.role.flushed_tokens == []
        fsync.gate.set()
        await until(lambda: acks(received) == [b"a", b"b"])
        await until(lambda: node.role.flushed_tokens == ["t1"])
        assert durable_view(tmp_path) == {"log": b"a"}  # b was written after the flush began

    run_writer(tmp_path, StorageMode.PAGE_CACHE, script)


def test_clean_shutdown_releases_what_waited_for_a_flush(tmp_path: Path, monkeypatch):
    fsync = GatedFsync(monkeypatch)

    async def script(node: NodeProcess, received):
        write(node, b"a")
        await until(lambda: fsync.started == 1)
        assert acks(received) == []
        node.request_shutdown()  # flushes everything on the spot, while a's fsync still runs
        await until(lambda: acks(received) == [b"a"])
        assert node.stopped and (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
        assert durable_view(tmp_path) == {"log": b"a"}
        fsync.gate.set()  # let the worker thread finish before the node closes

    run_writer(tmp_path, StorageMode.FSYNC, script)
