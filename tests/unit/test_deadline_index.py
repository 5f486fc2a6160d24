"""The timers index the producer and the replica manager share (actors/deadline_index.py)."""

from actors.deadline_index import DeadlineIndex


def index(deadlines: dict, idle: list | None = None) -> DeadlineIndex:
    return DeadlineIndex(deadlines.get, on_idle=None if idle is None else idle.append)


def test_the_earliest_is_checked_against_each_keys_actual_deadline():
    deadlines = {"a": 30.0, "b": 10.0}
    ix = index(deadlines)
    ix.schedule("a")
    ix.schedule("b")
    assert ix.earliest() == 10.0
    deadlines["b"] = 50.0  # moved later: nothing is scheduled, the index finds out
    assert ix.earliest() == 30.0
    deadlines["a"] = 5.0  # moved earlier: the owner schedules it
    ix.schedule("a")
    assert ix.earliest() == 5.0


def test_due_keys_come_in_deadline_order_and_leave_until_scheduled_again():
    deadlines = {"a": 20.0, "b": 10.0, "c": 40.0}
    ix = index(deadlines)
    for key in "abc":
        ix.schedule(key)
    assert ix.pop_due(25.0) == ["b", "a"]
    assert ix.earliest() == 40.0
    ix.schedule("a")  # still due (its owner did not move it): back in the index
    assert ix.pop_due(25.0) == ["a"]


def test_an_entry_found_early_moves_to_the_actual_deadline():
    deadlines = {"a": 10.0}
    ix = index(deadlines)
    ix.schedule("a")
    deadlines["a"] = 30.0
    assert ix.pop_due(20.0) == []
    assert ix.pop_due(30.0) == ["a"]


def test_a_key_without_a_deadline_any_more_is_reported_idle_once():
    deadlines, idle = {"a": 10.0, "b": 20.0}, []
    ix = index(deadlines, idle)
    ix.schedule("a")
    ix.schedule("b")
    del deadlines["a"]
    assert ix.earliest() == 20.0
    assert idle == ["a"]
    del deadlines["b"]
    assert ix.pop_due(100.0) == [] and idle == ["a", "b"]
    assert ix.earliest() is None
