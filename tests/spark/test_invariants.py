"""Protocol invariants re-checked by Spark from the history (observability/analysis/invariants.py):
each on a small hand-built history that breaks exactly it, a history that breaks none, and the
look-alikes that must not count (a broker back from an unclean shutdown that rejoined the ISR
before its ELR election). All cases are runs of one campaign directory, checked in one Spark pass:
so they also show that one run's rows never meet another's."""

from __future__ import annotations

import pytest

from observability.analysis.invariants import recheck_invariants
from observability.analysis.loading import discover, load_history
from observability.events import BecomeLeader, BrokerChange, BrokerRegistered, Election, PartitionChange, RaftLeaderElected

from .histories import History


def committed(h: History, offset: int, leader, leader_epoch: int, partition_epoch: int, isr, elr=(), replicas=(1, 2, 3),
              min_isr: int = 2) -> History:
    """A committed partition record of t-0, as two voters report it."""
    for voter in ("c1", "c2"):
        h.add(voter, PartitionChange("t", 0, leader, leader_epoch, partition_epoch, tuple(replicas), tuple(isr), tuple(elr), (),
                                     offset, len(isr) < min_isr, min_isr, "", "test"))
    return h


def broker(h: History, offset: int, broker_id: int, epoch: int, fenced: bool) -> History:
    for voter in ("c1", "c2"):
        h.add(voter, BrokerChange(broker_id, epoch, fenced, offset))
    return h


def elected(h: History, offset: int, leader: int, leader_epoch: int, kind: str = "elr") -> History:
    return h.add("c1", Election("t", 0, leader, leader_epoch, kind, offset))


def healthy() -> History:
    """Everything a run of ELR does, and nothing wrong: brokers registered, t-0 led by 1, the ISR
    shrinks below MinISR into the ELR, broker 1 is fenced, broker 2 (unfenced, clean) is elected
    from the ELR; one KRaft leader per epoch; one broker becomes leader per leader epoch."""
    h = History()
    h.add("c1", RaftLeaderElected(1, 0)).add("c2", RaftLeaderElected(2, 3))
    for b in (1, 2, 3):
        broker(h, b, b, 10 + b, False)
    committed(h, 4, 1, 0, 0, (1, 2, 3))
    h.add("b1", BecomeLeader("t", 0, 0, 0, 0, (1, 2, 3)))
    committed(h, 6, 1, 0, 1, (1,), elr=(2, 3))
    broker(h, 7, 1, 11, True)
    committed(h, 8, 2, 1, 2, (2,), elr=(3,))
    elected(h, 8, 2, 1)
    h.add("b2", BecomeLeader("t", 0, 1, 0, 0, (2,)))
    h.add("b2", BecomeLeader("t", 0, 1, 0, 0, (2,)), incarnation=1)  # the same broker again, restarted: one leader
    return h


def unclean_return(back_in_isr: bool) -> History:
    """Broker 2 restarts after an unclean shutdown (registered with a new epoch, clean false), and
    is later elected from the ELR; `back_in_isr`: it rejoined the ISR in between (then it may)."""
    h = History()
    for b in (1, 2, 3):
        broker(h, b, b, 10 + b, False)
    committed(h, 4, 1, 0, 0, (1, 2, 3))
    h.add("b2", BrokerRegistered(20, False), incarnation=1)
    broker(h, 10, 2, 20, False)
    if back_in_isr:
        committed(h, 11, 1, 0, 1, (1, 2))
        committed(h, 12, 1, 0, 2, (1,), elr=(2,))
    committed(h, 13, 2, 1, 3, (2,))
    elected(h, 13, 2, 1)
    return h


CASES = {
    "healthy": (healthy(), {}),
    "unclean-broker-back-in-isr": (unclean_return(True), {}),
    "two-kraft-leaders": (History().add("c1", RaftLeaderElected(3, 0)).add("c2", RaftLeaderElected(3, 0)), {"ElectionSafety": 1}),
    "two-brokers-lead-one-epoch": (History().add("b1", BecomeLeader("t", 0, 2, 0, 0, (1, 2)))
                                   .add("b2", BecomeLeader("t", 0, 2, 0, 0, (1, 2))), {"ElectionSafety": 1}),
    "committed-two-leaders-one-epoch": (committed(committed(History(), 5, 1, 2, 2, (1, 2)), 7, 2, 2, 3, (2,)), {"ElectionSafety": 1}),
    "leader-epoch-goes-back": (committed(committed(History(), 5, 1, 3, 3, (1, 2)), 8, 2, 2, 4, (2, 1)), {"MonotonicEpochs": 1}),
    "partition-epoch-goes-back": (committed(committed(History(), 5, 1, 3, 3, (1, 2)), 8, 1, 3, 2, (1,)), {"MonotonicEpochs": 1}),
    "broker-epoch-goes-back": (broker(broker(History(), 4, 1, 10, False), 9, 1, 8, False), {"MonotonicEpochs": 1}),
    "isr-and-elr-overlap": (committed(History(), 5, 1, 0, 0, (1,), elr=(1, 2)), {"IsrElrShape": 1}),
    "elr-not-empty-at-min-isr": (committed(History(), 5, 1, 0, 0, (1, 2), elr=(3,)), {"IsrElrShape": 1}),
    "isr-outside-replicas": (committed(History(), 5, 1, 0, 0, (1, 4)), {"IsrElrShape": 1}),
    "fenced-broker-elected-from-elr": (elected(committed(broker(History(), 3, 2, 12, True), 6, 2, 1, 1, (2,)), 6, 2, 1),
                                       {"NoFencedInIsr": 1}),
    "unclean-broker-elected-from-elr": (unclean_return(False), {"UncleanExclusion": 1}),
}


@pytest.fixture(scope="module")
def found(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("invariants")
    for name, (history, _) in CASES.items():
        history.write(root / "runs" / name)
    return recheck_invariants(load_history(spark, discover(root)))


@pytest.mark.parametrize("case", list(CASES))
def test_each_invariant_on_a_history_that_breaks_exactly_it(found, case):
    expected = CASES[case][1]
    got = {name: v["count"] for name, v in found.get(case, {}).items()}
    assert got == expected
    for v in found.get(case, {}).values():
        assert v["examples"] and all(e["detail"] and e["at_ms"] is not None for e in v["examples"])


def test_the_examples_say_what_broke(found):
    assert "c1 and c2" in found["two-kraft-leaders"]["ElectionSafety"]["examples"][0]["detail"]
    assert "brokers b1 and b2 both became leader" in found["two-brokers-lead-one-epoch"]["ElectionSafety"]["examples"][0]["detail"]
    assert "went from (3, 3) to (2, 4)" in found["leader-epoch-goes-back"]["MonotonicEpochs"]["examples"][0]["detail"]
    assert "broker 2 elected from the ELR" in found["fenced-broker-elected-from-elr"]["NoFencedInIsr"]["examples"][0]["detail"]
