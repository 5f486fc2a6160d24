"""Protocol invariants re-checked by Spark from the history (observability/analysis/invariants.py):
each on a small hand-built history that breaks exactly it, a history that breaks none, and the
look-alikes that must not count (a broker back from an unclean shutdown that rejoined the ISR
before its ELR election; truncations the protocol allows: of uncommitted records, after an unclean
election or recovery, beyond the tolerance of lossy crashes, of a replica deleted and created
again). All cases are runs of one campaign directory, checked in one Spark pass: so they also show
that one run's rows never meet another's (the unclean elections of one run excuse nothing in the
others)."""

from __future__ import annotations

import pytest

from observability.analysis.invariants import recheck_invariants
from observability.analysis.loading import discover, load_history
from observability.events import (
    Appended,
    BecomeFollower,
    BecomeLeader,
    BeyondTolerance,
    BrokerChange,
    BrokerRegistered,
    Election,
    Fault,
    PartitionChange,
    RaftLeaderElected,
    ReplicaDeleted,
    ReplicaHwm,
    ReplicaRecovered,
    Truncated,
)

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


# --- LeaderCompleteness, its truncation part: broker 2 follows t-0 and cuts its log ----------------


def follows(h: History, leader_epoch: int, incarnation: int = 0) -> History:
    return h.add("b2", BecomeFollower("t", 0, 1, leader_epoch, "follower", 0, 0), incarnation=incarnation)


def learns_hwm(h: History, hwm: int) -> History:
    return h.add("b2", ReplicaHwm("t", 0, hwm))


def cuts(h: History, from_offset: int, to: int, incarnation: int = 0) -> History:
    return h.add("b2", Truncated("t", 0, "diverging_epoch", from_offset, to), incarnation=incarnation)


def knows_ten_committed() -> History:
    """Broker 2 follows leader epoch 0 and has learned HWM 10: offsets 0..9 are committed."""
    return learns_hwm(follows(History(), 0), 10)


def committed_cut_twice() -> History:
    """After a clean election (leader epoch 1) broker 2 cuts committed offsets 4..9 to match its
    leader; it then catches up to 9 and cuts to 6 in leader epoch 2: above the HWM it has since
    that first cut (4), so only the first cut counts."""
    h = follows(knows_ten_committed(), 1)
    cuts(h, 12, 4).add("b2", Appended("t", 0, 4, 5, 1, 7))
    return cuts(follows(h, 2), 9, 6)


def recovered_then_cut() -> History:
    """Broker 2 restarts with offsets 0..9 on disk and HWM 8 checkpointed, and cuts to 5 after a
    clean election: the HWM it recovered with counts as one it learned."""
    h = History().add("b2", ReplicaRecovered("t", 0, 10, 8, 0, (0,), (10,), (0,), (7,)), incarnation=1)
    return cuts(follows(h, 2, incarnation=1), 10, 5, incarnation=1)


def unclean_then_cut(kind: str = "unclean") -> History:
    """An unclean election (or unclean recovery, `kind`) in leader epoch 1: broker 2, which knew
    0..9 committed in epoch 0, cuts them all to match the new leader, as the protocol allows."""
    h = elected(knows_ten_committed(), 20, 3, 1, kind)
    return cuts(follows(h, 1), 10, 0)


def unclean_then_committed_cut() -> History:
    """After the allowed cut of an unclean election, broker 2 learns HWM 6 from the new leader in
    epoch 1; a clean election (epoch 2) later makes it cut to 3: those records were committed after
    the unclean election, which excuses only the loss of the ones committed before it."""
    h = learns_hwm(unclean_then_cut().add("b2", Appended("t", 0, 0, 8, 1, 7)), 6)
    return cuts(follows(h, 2), 8, 3)


def lossy_crashes_then_cut(beyond_tolerance: bool) -> History:
    """Brokers 1 and 3 (MinISR 2) lose unflushed records in OS crashes; broker 3 is elected
    cleanly with a shorter log and broker 2 cuts committed records to match it. Allowed once the
    run's checker recorded the partition beyond tolerance; else an incomplete leader."""
    h = knows_ten_committed().add("driver", Fault("crash_os", "b1")).add("driver", Fault("crash_os", "b3"))
    if beyond_tolerance:
        h.add("driver", BeyondTolerance("t", 0, (1, 3)))
    return cuts(follows(elected(h, 20, 3, 1, "clean"), 1), 10, 3)


def cut_then_fetched_again(same: bool) -> History:
    """Broker 2 holds 0..9 as two batches of leader epoch 0 and knows them committed; after a
    clean election (epoch 1) it cuts to 5 and fetches from its leader, at 5, the batch it had there
    (`same`: the same count and CRC, stamped epoch 1, as when a zombie leader of epoch 0 advanced
    its HWM alone and the new leader took the producer's retry of that batch) or another one."""
    h = follows(History(), 0).add("b2", Appended("t", 0, 0, 5, 0, 11)).add("b2", Appended("t", 0, 5, 5, 0, 12))
    h = cuts(follows(learns_hwm(h, 10), 1), 10, 5)
    return h.add("b2", Appended("t", 0, 5, 5, 1, 12 if same else 13))


def recreated_then_cut() -> History:
    """Broker 2's replica is deleted (reassigned away) and created again, empty: the HWM 10 it
    knew went with it, so cutting the new log's uncommitted 2..4 cuts nothing committed."""
    h = knows_ten_committed().add("b2", ReplicaDeleted("t", 0))
    return cuts(follows(h, 3).add("b2", Appended("t", 0, 0, 5, 3, 7)), 5, 2)


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
    "committed-records-cut": (committed_cut_twice(), {"LeaderCompleteness": 1}),
    "recovered-committed-records-cut": (recovered_then_cut(), {"LeaderCompleteness": 1}),
    "records-committed-after-unclean-election-cut": (unclean_then_committed_cut(), {"LeaderCompleteness": 1}),
    "lossy-crashes-below-tolerance-then-cut": (lossy_crashes_then_cut(beyond_tolerance=False),
                                               {"LeaderCompleteness": 1}),
    "committed-records-cut-then-others-fetched": (cut_then_fetched_again(same=False), {"LeaderCompleteness": 1}),
    "uncommitted-records-cut": (cuts(cuts(knows_ten_committed(), 14, 12), 12, 10), {}),
    "committed-records-cut-then-the-same-fetched-again": (cut_then_fetched_again(same=True), {}),
    "cut-after-unclean-election": (unclean_then_cut(), {}),
    "cut-after-unclean-recovery": (unclean_then_cut("last_known_leader"), {}),
    "cut-beyond-tolerance": (lossy_crashes_then_cut(beyond_tolerance=True), {}),
    "cut-in-replica-created-again": (recreated_then_cut(), {}),
}


@pytest.fixture(scope="module")
def found(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("invariants")
    for name, (history, _) in CASES.items():
        history.write(root / "runs" / name)
    history = load_history(spark, discover(root))
    return recheck_invariants(history.control, history.rows)


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
    cut = found["committed-records-cut"]["LeaderCompleteness"]["examples"][0]["detail"]
    assert "b2 cut its log from 12 to 4 (diverging_epoch) in leader epoch 1, below the HWM 10 it knew" in cut
    assert "in leader epoch 2, below the HWM 6 it knew" in (
        found["records-committed-after-unclean-election-cut"]["LeaderCompleteness"]["examples"][0]["detail"])
