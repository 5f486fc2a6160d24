"""The purgatory of waiting requests (actors/replication/purgatory.py): requests come out when
their condition holds or their deadline comes, in the order they went in."""

from __future__ import annotations

from dataclasses import dataclass

from actors.replication.purgatory import Purgatory


@dataclass
class Waiting:
    name: str
    offset: int
    deadline_ms: float


def test_requests_complete_in_arrival_order_when_their_condition_holds_and_the_others_keep_waiting():
    purgatory: Purgatory[Waiting] = Purgatory()
    for w in (Waiting("a", 30, 900), Waiting("b", 10, 500), Waiting("c", 20, 700)):
        purgatory.watch(w)
    # The high watermark reaches 25: the requests for offsets 10 and 20 are answered, a before b.
    assert [w.name for w in purgatory.complete(lambda w: w.offset <= 25)] == ["b", "c"]
    assert [w.name for w in purgatory] == ["a"]
    assert purgatory.complete(lambda w: w.offset <= 25) == []


def test_the_earliest_deadline_is_the_next_wake_up_and_expired_requests_come_out_then():
    purgatory: Purgatory[Waiting] = Purgatory()
    assert purgatory.next_deadline() is None and not purgatory
    for w in (Waiting("a", 1, 900), Waiting("b", 2, 500), Waiting("c", 3, 500)):
        purgatory.watch(w)
    assert purgatory.next_deadline() == 500
    assert purgatory.expire(499) == []
    assert [w.name for w in purgatory.expire(500)] == ["b", "c"]
    assert purgatory.next_deadline() == 900 and len(purgatory) == 1


def test_take_all_empties_it_for_a_partition_that_changed_hands():
    purgatory: Purgatory[Waiting] = Purgatory()
    purgatory.watch(Waiting("a", 1, 900))
    purgatory.watch(Waiting("b", 2, 100))
    assert [w.name for w in purgatory.take_all()] == ["a", "b"]
    assert not purgatory and purgatory.next_deadline() is None
