"""The KRaft quorum in the simulator: elections, replication, the high watermark, Pre-Vote, Check
Quorum, durability. Sections cited are of KIP-996, the fsync article
and protocol-facts.md ("KRaft quorum invariants")."""

import pytest

from controller_quorum.messages import LeaderChange
from controller_quorum.quorum_state import RaftState
from storage.modes import CrashKind

from .quorum_world import leader_of, propose, quorum_world, rafts

REC = LeaderChange("test", 0, ())  # any registered record type will do as a payload


def rec(i: int) -> LeaderChange:
    return LeaderChange(f"r{i}", i, ())


def test_the_quorum_elects_one_leader_and_commits_its_leader_change_record():
    sim = quorum_world(seed=1)
    sim.run_for(5_000)
    leader = leader_of(sim)
    assert leader is not None
    states = {n: r.state for n, r in rafts(sim).items()}
    assert sorted(states.values()) == sorted([RaftState.LEADER, RaftState.FOLLOWER, RaftState.FOLLOWER])
    epoch = rafts(sim)[leader].epoch
    for r in rafts(sim).values():
        assert r.epoch == epoch and r.leader == leader
        # The new leader's first entry is its LeaderChange record; committing it sets the HWM.
        assert isinstance(r.log.entries[-1].record, LeaderChange) and r.log.entries[-1].epoch == epoch
        assert r.high_watermark == r.log.end_offset
    assert sim.violations == {}


def test_records_commit_on_a_majority_and_followers_apply_only_committed_entries():
    sim = quorum_world(seed=2)
    sim.run_for(3_000)
    leader = leader_of(sim)
    followers = [n for n in rafts(sim) if n != leader]
    sim.network.isolate(followers[0])
    propose(sim, leader, [rec(i) for i in range(5)])
    sim.run_for(500)
    # Committed with the leader and one follower: a majority of 3.
    assert rafts(sim)[leader].high_watermark == rafts(sim)[leader].log.end_offset
    applied = sim.nodes[followers[1]].role.committed_entries()
    assert [e.record for e in applied[-5:]] == [rec(i) for i in range(5)]
    # The isolated follower has applied nothing new.
    assert all(e.record not in [rec(i) for i in range(5)] for e in sim.nodes[followers[0]].role.committed_entries())
    sim.network.heal()
    sim.run_for(3_000)  # its lost fetch is retried after controller.quorum.request.timeout.ms
    assert [e.record for e in sim.nodes[followers[0]].role.committed_entries()[-5:]] == [rec(i) for i in range(5)]
    assert sim.violations == {}


def test_nothing_commits_without_a_majority():
    sim = quorum_world(seed=3)
    sim.run_for(3_000)
    leader = leader_of(sim)
    for n in rafts(sim):
        if n != leader:
            sim.network.isolate(n)
    hwm = rafts(sim)[leader].high_watermark
    propose(sim, leader, [rec(1)])
    sim.run_for(2_000)
    assert rafts(sim)[leader].high_watermark == hwm


def test_a_leader_crash_elects_a_new_leader_with_every_committed_entry():
    sim = quorum_world(seed=4)
    sim.run_for(3_000)
    first = leader_of(sim)
    propose(sim, first, [rec(i) for i in range(10)])
    sim.run_for(500)
    committed = rafts(sim)[first].high_watermark
    sim.crash(first, CrashKind.OS)
    sim.run_for(10_000)
    second = leader_of(sim)
    assert second not in (None, first)
    assert rafts(sim)[second].high_watermark >= committed
    assert [e.record for e in rafts(sim)[second].log.entries[:committed]] == [
        e.record for e in sim.nodes[second].role.committed_entries()[:committed]
    ]
    sim.start(first)
    sim.run_for(5_000)
    # Section "ResignedState changes": the old leader restarted Resigned, then follows.
    assert rafts(sim)[first].state is RaftState.FOLLOWER and rafts(sim)[first].leader == second
    assert sim.violations == {}


def test_a_restarted_leader_comes_back_resigned_then_unattached_with_a_higher_epoch():
    sim = quorum_world(seed=5)
    sim.run_for(3_000)
    leader = leader_of(sim)
    epoch = rafts(sim)[leader].epoch
    for n in list(rafts(sim)):
        sim.crash(n, CrashKind.PROCESS)
    sim.start(leader)
    assert rafts(sim)[leader].state is RaftState.RESIGNED
    sim.run_for(2_500)  # past its election timeout (base + jitter < 2 x base)
    assert rafts(sim)[leader].epoch == epoch + 1
    assert rafts(sim)[leader].state in (RaftState.UNATTACHED, RaftState.PROSPECTIVE)


def test_check_quorum_an_isolated_leader_resigns_after_one_and_a_half_fetch_timeouts():
    sim = quorum_world(seed=6)
    sim.run_for(3_000)
    leader = leader_of(sim)
    isolated_at = sim.now_ms
    sim.network.isolate(leader)
    # Followers fetch at least every replica.fetch.wait (500 ms long poll), each fetch restarting
    # the 3000 ms timer: the leader still leads 2400 ms in, and has resigned by 3000 ms.
    sim.run_until(isolated_at + 2_400)
    assert rafts(sim)[leader].is_leader()
    sim.run_until(isolated_at + 3_000)
    assert not rafts(sim)[leader].is_leader()
    assert rafts(sim)[leader].state in (RaftState.RESIGNED, RaftState.UNATTACHED, RaftState.PROSPECTIVE)
    # Meanwhile the majority elected a new leader.
    others = {n: r for n, r in rafts(sim).items() if n != leader}
    assert any(r.is_leader() for r in others.values())


def test_without_check_quorum_an_isolated_leader_keeps_leading():
    sim = quorum_world(seed=6, check_quorum=False)
    sim.run_for(3_000)
    leader = leader_of(sim)
    sim.network.isolate(leader)
    sim.run_for(10_000)
    assert rafts(sim)[leader].is_leader()  # a stale leader, next to the majority's new one
    assert sum(r.is_leader() for r in rafts(sim).values()) == 2
    assert sim.violations == {}  # different epochs: not an ElectionSafety violation


def test_a_leader_shut_down_gracefully_hands_over_at_once_and_stops_once_it_knows_the_new_leader():
    # KafkaRaftClient.shutdown: the leader resigns and sends EndQuorumEpoch; its first preferred
    # successor canvasses at once (with the resigned leader's pre-vote and vote), long before a
    # fetch timeout; the old leader stops once the new one's BeginQuorumEpoch reaches it.
    sim = quorum_world(seed=9)
    sim.run_for(3_000)
    leader = leader_of(sim)
    epoch = rafts(sim)[leader].epoch
    asked = sim.now_ms
    sim.request_shutdown(leader)
    assert sim.is_running(leader) and rafts(sim)[leader].state is RaftState.RESIGNED
    sim.run_for(5_000, stop=lambda: not sim.is_running(leader))
    assert sim.now_ms - asked < 100  # the fetch timeout is 2000 ms
    new = leader_of(sim)
    assert new not in (None, leader) and rafts(sim)[new].epoch == epoch + 1
    assert sim.violations == {}


def test_a_leader_that_learns_of_no_new_leader_stops_after_the_shutdown_timeout():
    sim = quorum_world(seed=10)
    sim.run_for(3_000)
    leader = leader_of(sim)
    sim.network.isolate(leader)
    asked = sim.now_ms
    sim.request_shutdown(leader)
    sim.run_until(asked + 4_999)
    assert sim.is_running(leader)  # Resigned, waiting (its election timeout does not apply)
    assert rafts(sim)[leader].state is RaftState.RESIGNED
    sim.run_until(asked + 5_000)
    assert not sim.is_running(leader)  # KafkaRaftClientDriver's shutdown(5000)


def partition_a_follower(prevote: bool, seed: int = 7):
    sim = quorum_world(seed=seed, prevote=prevote)
    sim.run_for(3_000)
    leader = leader_of(sim)
    epoch = rafts(sim)[leader].epoch
    follower = next(n for n in rafts(sim) if n != leader)
    sim.network.isolate(follower)
    sim.run_for(20_000)
    return sim, leader, follower, epoch


def test_prevote_a_partitioned_follower_does_not_raise_its_epoch_or_disrupt_the_leader_on_heal():
    sim, leader, follower, epoch = partition_a_follower(prevote=True)
    assert rafts(sim)[follower].epoch == epoch  # it canvassed (Prospective) but never bumped
    sim.network.heal()
    sim.run_for(5_000)
    assert leader_of(sim) == leader and rafts(sim)[leader].epoch == epoch
    assert rafts(sim)[follower].state is RaftState.FOLLOWER
    assert sim.violations == {}


def test_without_prevote_a_partitioned_follower_inflates_its_epoch_and_disrupts_the_leader_on_heal():
    sim, leader, follower, epoch = partition_a_follower(prevote=False)
    assert rafts(sim)[follower].epoch > epoch + 3  # one bump per election timeout while cut off
    sim.network.heal()
    sim.run_for(5_000)
    new_epoch = max(r.epoch for r in rafts(sim).values())
    assert new_epoch > epoch + 3  # the whole quorum had to move to the inflated epoch
    assert leader_of(sim) is not None
    assert sim.violations == {}


def test_the_same_seed_gives_the_same_quorum_trace():
    def trace(seed):
        sim = quorum_world(seed=seed)
        sim.run_for(3_000)
        sim.crash(leader_of(sim), CrashKind.OS)
        sim.run_for(5_000)
        return sim.trace_hash()

    assert trace(11) == trace(11)
    assert trace(11) != trace(12)


def test_the_same_seed_gives_the_same_trace_through_a_graceful_shutdown():
    def trace(seed):
        sim = quorum_world(seed=seed)
        sim.run_for(3_000)
        sim.request_shutdown(leader_of(sim))
        sim.run_for(5_000)
        return sim.trace_hash()

    assert trace(11) == trace(11)
    assert trace(11) != trace(12)


@pytest.mark.parametrize("voters", [1, 5])
def test_quorums_of_other_sizes_elect_a_leader(voters):
    sim = quorum_world(seed=8, voters=voters)
    sim.run_for(5_000)
    assert leader_of(sim) is not None
    assert sum(r.is_leader() for r in rafts(sim).values()) == 1
