"""The storage modes as a role and a client see them through the simulator: acknowledgements,
fsync latency, crashes during a flush, clean shutdown, and what a restarted process recovers."""

import pytest

from actors.contract import Envelope
from actors.runtime.network import LatencyModel
from actors.runtime.sim.simulator import SimConfig, Simulator
from storage.modes import CrashKind, StorageMode

from .toy_roles import Ack, AckingWriter, Recorder, Write


def writer_world(mode: StorageMode, fsync_ms: float = 5.0) -> Simulator:
    sim = Simulator(
        SimConfig(
            seed=5,
            latency=LatencyModel("constant", 1.0),
            fsync_latency=LatencyModel("constant", fsync_ms),
            background_flush_interval_ms=1e9,  # no background flush unless a test wants one
        )
    )
    sim.add_host("w", mode)
    sim.add_host("client", StorageMode.PAGE_CACHE)
    sim.add_node("w", "w", lambda ctx: AckingWriter(ctx, mode))
    sim.add_node("client", "client", Recorder)
    return sim


def write(sim: Simulator, value: bytes) -> None:
    sim.transmit(Envelope("client", "w", Write(value)))


def acked(sim: Simulator) -> list[bytes]:
    return [p.value for _, _, p in sim.nodes["client"].role.received if isinstance(p, Ack)]


def recovered_after(sim: Simulator, kind: CrashKind) -> bytes:
    sim.crash("w", kind)
    sim.start("w")
    return sim.nodes["w"].role.recovered


@pytest.mark.parametrize("mode", list(StorageMode))
@pytest.mark.parametrize("kind", [CrashKind.PROCESS, CrashKind.OS])
def test_acknowledged_writes_after_a_crash(mode, kind):
    sim = writer_world(mode)
    for v in (b"a", b"b", b"c"):
        write(sim, v)
    sim.run_for(50)
    assert acked(sim) == [b"a", b"b", b"c"]
    log = recovered_after(sim, kind)
    loses_unflushed = kind is CrashKind.OS or mode is StorageMode.PROCESS_BUFFER
    if mode is StorageMode.FSYNC:
        assert log == b"abc"  # nothing acknowledged is lost
    elif loses_unflushed:
        assert log == b""  # acknowledged, never flushed, gone
    else:
        assert log == b"abc"  # page cache survives a process crash


def test_fsync_mode_acknowledges_only_after_the_fsync_latency():
    sim = writer_world(StorageMode.FSYNC, fsync_ms=5.0)
    write(sim, b"a")
    sim.run_for(1.5)  # delivered at 1.0; the fsync ends at 6.0
    assert acked(sim) == []
    sim.run_for(10)
    (at, _, _), = sim.nodes["client"].role.received
    assert at == pytest.approx(1.0 + 5.0 + 1.0)


def test_page_cache_mode_acknowledges_at_once():
    sim = writer_world(StorageMode.PAGE_CACHE)
    write(sim, b"a")
    sim.run_for(10)
    (at, _, _), = sim.nodes["client"].role.received
    assert at == pytest.approx(2.0)


def test_an_os_crash_during_the_fsync_loses_the_write_and_its_ack():
    sim = writer_world(StorageMode.FSYNC, fsync_ms=5.0)
    write(sim, b"a")
    sim.run_for(3)  # the write is in the page cache, the fsync in flight
    assert recovered_after(sim, CrashKind.OS) == b""
    sim.run_for(20)
    assert acked(sim) == []


def test_clean_shutdown_flushes_and_the_next_start_sees_the_marker():
    sim = writer_world(StorageMode.PROCESS_BUFFER)
    write(sim, b"abc")
    sim.run_for(10)
    sim.request_shutdown("w")
    assert not sim.is_running("w")
    sim.crash("w", CrashKind.OS)  # power loss after a clean shutdown loses nothing
    sim.start("w")
    role = sim.nodes["w"].role
    assert role.recovered == b"abc" and role.clean_start
    # That start consumed the marker: a crash now is unclean.
    sim.crash("w", CrashKind.PROCESS)
    sim.start("w")
    assert not sim.nodes["w"].role.clean_start


def test_an_explicit_flush_is_reported_back_when_durable():
    sim = writer_world(StorageMode.PAGE_CACHE, fsync_ms=4.0)
    write(sim, b"a")
    sim.run_for(2)
    sim.send_from_runner("w", "flush")
    sim.run_for(2)
    assert sim.nodes["w"].role.flushed_tokens == []
    sim.run_for(10)
    assert sim.nodes["w"].role.flushed_tokens == ["t1"]
    assert recovered_after(sim, CrashKind.OS) == b"a"


def test_page_cache_background_writeback_makes_old_writes_durable():
    sim = Simulator(SimConfig(seed=1, background_flush_interval_ms=1_000, dirty_expire_ms=5_000))
    sim.add_host("w", StorageMode.PAGE_CACHE)
    sim.add_node("w", "w", lambda ctx: AckingWriter(ctx, StorageMode.PAGE_CACHE))
    sim.add_host("client", StorageMode.PAGE_CACHE)
    sim.add_node("client", "client", Recorder)
    write(sim, b"old")
    sim.run_for(4_000)
    assert recovered_after(sim, CrashKind.OS) == b""  # not yet expired: lost
    write(sim, b"old")
    sim.run_for(7_000)
    assert recovered_after(sim, CrashKind.OS) == b"old"


def test_disk_loss_wipes_the_host():
    sim = writer_world(StorageMode.FSYNC)
    write(sim, b"a")
    sim.run_for(20)
    assert recovered_after(sim, CrashKind.DISK) == b""
