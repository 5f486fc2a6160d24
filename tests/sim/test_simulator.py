"""The deterministic simulator: determinism, FIFO links, faults, clock and timers."""

import math

import pytest

from actors.contract import Envelope, Output
from actors.runtime.network import LatencyModel
from actors.runtime.sim.simulator import SimConfig, Simulator, TimeStalled
from storage.modes import StorageMode

from .toy_roles import Note, Recorder, Sender, StuckTimer


def chatter(seed: int, *, count: int = 200) -> Simulator:
    """Three nodes sending to each other with random (exponential-tailed) latencies."""
    sim = Simulator(SimConfig(seed=seed, latency=LatencyModel("exponential", 0.2, mean_ms=3.0)))
    for name in ("a", "b", "c"):
        sim.add_host(name, StorageMode.PAGE_CACHE)
    sim.add_node("c", "c", Recorder)
    sim.add_node("a", "a", lambda ctx: Sender(ctx, "c", count))
    sim.add_node("b", "b", lambda ctx: Sender(ctx, "c", count))
    sim.run_until(10_000)
    return sim


def received(sim: Simulator, node: str) -> list[tuple[float, str, object]]:
    return sim.nodes[node].role.received


def test_same_seed_gives_the_same_trace_hash():
    assert chatter(seed=42).trace_hash() == chatter(seed=42).trace_hash()


def test_different_seeds_give_different_traces():
    hashes = {chatter(seed=s).trace_hash() for s in range(5)}
    assert len(hashes) == 5
    # ...and really different interleavings, not just a different label:
    orders = {tuple(src for _, src, _ in received(chatter(seed=s), "c")) for s in range(5)}
    assert len(orders) == 5


def test_messages_on_one_link_arrive_in_the_order_sent():
    sim = chatter(seed=7, count=500)
    got = received(sim, "c")
    for src in ("a", "b"):
        numbers = [p.n for _, s, p in got if s == src]
        assert numbers == list(range(500))
    # The two links interleave: FIFO is per link, not global.
    sources = [s for _, s, _ in got]
    assert sources != sorted(sources)


def test_the_virtual_clock_never_goes_back():
    sim = chatter(seed=3)
    times = [t for t, _, _ in received(sim, "c")]
    assert times == sorted(times)
    # Stepping event by event, now_ms is monotonic too.
    sim2 = Simulator(SimConfig(seed=3, latency=LatencyModel("exponential", 0.2, mean_ms=3.0)))
    for name in ("a", "c"):
        sim2.add_host(name, StorageMode.PAGE_CACHE)
    sim2.add_node("c", "c", Recorder)
    sim2.add_node("a", "a", lambda ctx: Sender(ctx, "c", 100))
    last = sim2.now_ms
    while sim2.step():
        assert sim2.now_ms >= last
        last = sim2.now_ms
        if last > 60_000:
            break


def two_nodes(seed: int = 0) -> Simulator:
    sim = Simulator(SimConfig(seed=seed))
    for name in ("a", "b"):
        sim.add_host(name, StorageMode.PAGE_CACHE)
        sim.add_node(name, name, Recorder)
    return sim


def send(sim: Simulator, src: str, dst: str, n: int) -> None:
    sim.transmit(Envelope(src, dst, Note(n)))


def test_a_two_way_partition_cuts_both_directions_until_healed():
    sim = two_nodes()
    sim.network.partition([["a"], ["b"]])
    send(sim, "a", "b", 1)
    send(sim, "b", "a", 2)
    sim.run_for(100)
    assert received(sim, "a") == [] and received(sim, "b") == []
    sim.network.heal()
    send(sim, "a", "b", 3)
    send(sim, "b", "a", 4)
    sim.run_for(100)
    assert [p.n for _, _, p in received(sim, "b")] == [3]
    assert [p.n for _, _, p in received(sim, "a")] == [4]


def test_a_one_way_fault_cuts_one_direction_only():
    sim = two_nodes()
    sim.network.link("a", "b", drop=1.0)
    send(sim, "a", "b", 1)
    send(sim, "b", "a", 2)
    sim.run_for(100)
    assert received(sim, "b") == []
    assert [p.n for _, _, p in received(sim, "a")] == [2]


def test_isolate_cuts_every_link_of_the_node_and_heal_node_restores_only_its_links():
    sim = Simulator(SimConfig(seed=1))
    for name in ("a", "b", "c"):
        sim.add_host(name, StorageMode.PAGE_CACHE)
        sim.add_node(name, name, Recorder)
    sim.network.isolate("a")
    sim.network.link("b", "c", drop=1.0)
    send(sim, "b", "a", 1)
    send(sim, "a", "c", 2)
    sim.run_for(100)
    assert received(sim, "a") == [] and received(sim, "c") == []
    sim.network.heal("a")
    send(sim, "b", "a", 3)
    send(sim, "b", "c", 4)  # still cut: the fault is not on a's links
    sim.run_for(100)
    assert [p.n for _, _, p in received(sim, "a")] == [3]
    assert received(sim, "c") == []


def test_a_link_delay_adds_to_the_latency():
    sim = Simulator(SimConfig(seed=1, latency=LatencyModel("constant", 1.0)))
    for name in ("a", "b"):
        sim.add_host(name, StorageMode.PAGE_CACHE)
        sim.add_node(name, name, Recorder)
    sim.network.link("a", "b", delay_ms=50)
    send(sim, "a", "b", 1)
    sim.run_for(100)
    assert received(sim, "b")[0][0] == pytest.approx(51.0)


@pytest.mark.parametrize("drop", [0.1, 0.3, 0.5])
def test_random_drops_follow_the_configured_rate(drop):
    n = 20_000
    sim = two_nodes(seed=11)
    sim.network.link("a", "b", drop=drop)
    for i in range(n):
        send(sim, "a", "b", i)
    sim.run_for(1_000)
    delivered = len(received(sim, "b"))
    mean, sd = n * (1 - drop), math.sqrt(n * drop * (1 - drop))
    assert abs(delivered - mean) < 5 * sd, (delivered, mean, sd)
    assert sim.trace.drop_count == n - delivered


def test_timers_fire_in_deadline_order_and_a_new_deadline_replaces_the_old():
    sim = Simulator(SimConfig(seed=0))
    deadlines = {"a": 300.0, "b": 100.0, "c": 200.0}
    fired: list[tuple[float, str]] = []

    class Timer:
        def __init__(self, ctx):
            self.node_id = ctx.node_id

        def start(self, now_ms):
            # Ask for a far deadline first, then replace it: only the second must fire.
            return Output(next_deadline_ms=deadlines[self.node_id] + 1_000)

        def handle(self, env, now_ms):
            return Output(next_deadline_ms=deadlines[self.node_id])

        def tick(self, now_ms):
            fired.append((now_ms, self.node_id))
            return Output()

    for name in deadlines:
        sim.add_host(name, StorageMode.PAGE_CACHE)
        sim.add_node(name, name, Timer)
        sim.send_from_runner(name, Note(0))
    sim.run_until(5_000)
    assert fired == [(100.0, "b"), (200.0, "c"), (300.0, "a")]


def test_a_deadline_in_the_past_fires_now_not_earlier():
    sim = two_nodes()
    sim.run_for(50)

    class Late(Recorder):
        def start(self, now_ms):
            return Output(next_deadline_ms=now_ms - 10)

    sim.add_host("late", StorageMode.PAGE_CACHE)
    sim.add_node("late", "late", Late)
    sim.run_for(1)
    assert sim.nodes["late"].role.ticks == [50.0]


def test_messages_to_a_crashed_or_restarted_process_are_dropped():
    from storage.modes import CrashKind

    sim = two_nodes()
    send(sim, "a", "b", 1)
    sim.crash("b", CrashKind.PROCESS)
    sim.start("b")
    sim.run_for(100)
    assert received(sim, "b") == []  # addressed to the previous incarnation
    send(sim, "a", "b", 2)
    sim.run_for(100)
    assert [p.n for _, _, p in received(sim, "b")] == [2]


def test_the_invariant_hook_runs_after_every_event_and_records_violations():
    sim = two_nodes()
    calls = []

    def at_most_two_deliveries(s: Simulator):
        calls.append(s.now_ms)
        return None if len(received(s, "b")) <= 2 else f"b got {len(received(s, 'b'))} messages"

    sim.add_invariant("AtMostTwo", at_most_two_deliveries)
    for i in range(4):
        send(sim, "a", "b", i)
    before = sim.events_processed
    sim.run_for(100)
    assert len(calls) == sim.events_processed - before
    v = sim.violations["AtMostTwo"]
    assert v.detail == "b got 3 messages" and v.count == 2
    assert v.at_ms == received(sim, "b")[2][0]


def test_a_role_that_keeps_asking_to_be_woken_now_stops_the_run_with_its_name_instead_of_hanging():
    sim = Simulator(SimConfig(seed=1))
    sim.add_host("x", StorageMode.PAGE_CACHE)
    sim.add_node("x", "x", StuckTimer)
    with pytest.raises(TimeStalled, match=r"virtual time stopped at 5\.000 ms: .* woken again and again: x"):
        sim.run_until(1_000)
