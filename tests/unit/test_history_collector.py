"""The Ray driver's history collector (actors/runtime/ray/world.py), without Ray: events of several
processes arrive in polls, each process's in its own order; the collector hands them to the sinks in
time order up to the watermark, calls `after_batch` after each run of one node's events of one
instant, drops repeats and counts gaps."""

from actors.runtime.ray.world import HistoryCollector, RayWorld
from observability.events import DRIVER, EventRecord, ReplicaHwm, Step


def hwm(t: float, node: str, seq: int, value: int) -> EventRecord:
    return EventRecord(t, node, 0, seq, ReplicaHwm("t", 0, value))


def collector():
    c = HistoryCollector()
    seen: list[tuple[float, str, int]] = []
    batches: list[int] = []  # how many events had been handed over at each after_batch
    c.sinks.append(lambda r: seen.append((r.time_ms, r.node, r.node_seq)))
    c.after_batch = lambda: batches.append(len(seen))
    return c, seen, batches


def test_released_in_time_order_up_to_the_watermark():
    c, seen, batches = collector()
    # poll 1: b1 answered up to 30 ms, b2 up to 25 ms
    for r in (hwm(10, "b1", 0, 1), hwm(20, "b1", 1, 2), hwm(30, "b1", 2, 3), hwm(5, "b2", 0, 1), hwm(20, "b2", 1, 2), hwm(25, "b2", 2, 3)):
        c.collected(r)
    c.release(25)
    assert seen == [(5, "b2", 0), (10, "b1", 0), (20, "b1", 1), (20, "b2", 1), (25, "b2", 2)]
    assert batches == [1, 2, 3, 4, 5]  # one node's events of one instant each
    assert c.released_ms == 25
    # poll 2: b2 catches up; b1's 30 ms event was held back until now
    c.collected(hwm(28, "b2", 3, 4))
    c.release(40)
    assert seen[5:] == [(28, "b2", 3), (30, "b1", 2)]
    assert c.event_count == 7


def test_one_instant_of_one_node_is_one_batch():
    c, seen, batches = collector()
    for seq in range(3):
        c.collected(hwm(10, "b1", seq, seq))
    c.collected(hwm(10, "b2", 0, 0))
    c.release(10)
    assert batches == [3, 4]


def test_repeats_dropped_and_gaps_counted():
    c, seen, _ = collector()
    c.collected(hwm(1, "b1", 0, 0))
    c.collected(hwm(1, "b1", 0, 0))  # an answer that came twice
    c.collected(hwm(2, "b1", 3, 1))  # rows 1 and 2 never arrived
    c.release_all()
    assert [s[2] for s in seen] == [0, 3]
    assert c.gaps == 2
    assert c.cursor("b1", 0) == 4


def test_what_after_batch_records_is_released_in_time_order():
    """A check that finds a violation records it at the time of the events that show it: it must
    come out before the later events of the same release, not after them."""
    c, seen, _ = collector()
    recorded = []

    def after_batch():
        if not recorded:
            recorded.append(True)
            c.driver_event(c.released_ms, Step(0, "violation"))

    c.after_batch = after_batch
    for r in (hwm(10, "b1", 0, 1), hwm(20, "b1", 1, 2), hwm(30, "b1", 2, 3)):
        c.collected(r)
    c.release(30)
    assert seen == [(10, "b1", 0), (10, DRIVER, 0), (20, "b1", 1), (30, "b1", 2)]


def test_a_wait_sees_a_state_that_lasted_less_than_a_poll():
    """A wait's condition is judged after each batch a release hands over (RayWorld.watching), as
    the simulator judges it after every event: a replica's high watermark that passed 5 between two
    polls still satisfies a wait for 5."""
    world = RayWorld(lambda: 0.0)
    hwm_now = {}
    world.trace.sinks.append(lambda r: hwm_now.__setitem__(r.node, r.event.hwm))

    def at_five() -> bool:
        return hwm_now.get("b1") == 5

    with world.watching(at_five) as held:
        for r in (hwm(10, "b1", 0, 3), hwm(20, "b1", 1, 5), hwm(30, "b1", 2, 8)):
            world.trace.collected(r)
        world.trace.release(30)  # one poll: the view ends at 8
        assert not at_five()
        assert held()
    with world.watching(at_five) as later:
        world.trace.collected(hwm(40, "b1", 3, 9))
        world.trace.release(40)
        assert not later()  # only what came after the wait began counts
    assert world._watches == []  # a wait's condition is judged only during the wait
