"""QuorumState: KIP-996's states, transitions and vote rules (KIP-996)."""

import random

import pytest

from actors.contract import Output
from controller_quorum.quorum_state import ElectionState, IllegalTransition, QuorumState, RaftState, Timing

VOTERS = ("c1", "c2", "c3")


def state(prevote: bool = True, stored: ElectionState | None = None, local: str = "c1") -> QuorumState:
    q = QuorumState(local, VOTERS, is_voter=True, prevote=prevote, timing=Timing(1000, 2000, 1000), rng=random.Random(1))
    q.initialize(stored, log_last_epoch=0, now_ms=0)
    return q


def in_state(s: RaftState, epoch: int = 5) -> QuorumState:
    """A voter c1 in state `s` at `epoch`, reached through legal transitions."""
    out = Output()
    q = state(stored=ElectionState(epoch - 1))
    if s is RaftState.UNATTACHED:
        q.become_unattached(epoch, 0, out)
    elif s is RaftState.FOLLOWER:
        q.become_follower(epoch, "c2", 0, out)
    elif s is RaftState.PROSPECTIVE:
        q.become_unattached(epoch, 0, out)
        q.become_prospective(0)
    elif s is RaftState.CANDIDATE:
        q.become_prospective(0)
        q.become_candidate(0, out)
    elif s is RaftState.LEADER:
        q.become_prospective(0)
        q.become_candidate(0, out)
        q.become_leader(0, out)
    elif s is RaftState.RESIGNED:
        q.become_prospective(0)
        q.become_candidate(0, out)
        q.become_leader(0, out)
        q.become_resigned(0)
    assert q.state is s
    return q


# --- "Pre-Vote request handling" of the KIP, state by state ------------------------------------


def test_leader_rejects_pre_votes_and_votes():
    q = in_state(RaftState.LEADER)
    assert not q.can_grant_vote("c2", log_up_to_date=True, pre_vote=True)
    assert not q.can_grant_vote("c2", log_up_to_date=True, pre_vote=False)


@pytest.mark.parametrize("s", [RaftState.UNATTACHED, RaftState.PROSPECTIVE, RaftState.CANDIDATE, RaftState.RESIGNED])
def test_unattached_prospective_candidate_resigned_grant_pre_votes_to_up_to_date_logs(s):
    q = in_state(s)
    assert q.can_grant_vote("c2", log_up_to_date=True, pre_vote=True)
    assert not q.can_grant_vote("c2", log_up_to_date=False, pre_vote=True)


def test_pre_votes_may_be_granted_to_several_candidates_even_after_a_standard_vote():
    q = in_state(RaftState.UNATTACHED)
    q.record_vote("c2", Output())
    assert q.can_grant_vote("c3", log_up_to_date=True, pre_vote=True)
    assert q.can_grant_vote("c2", log_up_to_date=True, pre_vote=True)


def test_follower_grants_pre_votes_only_before_it_has_fetched_from_its_leader():
    q = in_state(RaftState.FOLLOWER)
    assert q.can_grant_vote("c3", log_up_to_date=True, pre_vote=True)
    q.has_fetched_from_leader = True
    assert not q.can_grant_vote("c3", log_up_to_date=True, pre_vote=True)
    assert not q.can_grant_vote("c3", log_up_to_date=True, pre_vote=False)


def test_unattached_grants_one_standard_vote_per_epoch():
    q = in_state(RaftState.UNATTACHED)
    assert q.can_grant_vote("c2", True, False)
    assert not q.can_grant_vote("c2", False, False)
    q.record_vote("c2", Output())
    assert q.can_grant_vote("c2", True, False)  # the same candidate again: yes
    assert not q.can_grant_vote("c3", True, False)


def test_prospective_rejects_standard_votes_while_it_remembers_a_leader():
    out = Output()
    q = in_state(RaftState.FOLLOWER)
    q.become_prospective(0)
    assert q.leader == "c2"
    assert not q.can_grant_vote("c3", True, False)
    q2 = in_state(RaftState.PROSPECTIVE)
    assert q2.leader is None and q2.can_grant_vote("c3", True, False)
    q2.record_vote("c3", out)
    assert q2.state is RaftState.PROSPECTIVE and q2.voted == "c3"
    assert not q2.can_grant_vote("c2", True, False)


@pytest.mark.parametrize("s", [RaftState.CANDIDATE, RaftState.RESIGNED, RaftState.FOLLOWER])
def test_candidate_resigned_follower_reject_standard_votes(s):
    assert not in_state(s).can_grant_vote("c2", True, False)


# --- transitions --------------------------------------------------------------------------------


def test_only_prospective_becomes_candidate_with_prevote():
    for s in (RaftState.UNATTACHED, RaftState.FOLLOWER, RaftState.RESIGNED):
        with pytest.raises(IllegalTransition, match="not allowed|only Prospective"):
            in_state(s).become_candidate(0, Output())


def test_without_prevote_timeouts_lead_straight_to_candidate():
    out = Output()
    q = state(prevote=False, stored=ElectionState(4))
    q.become_follower(5, "c2", 0, out)
    q.become_candidate(0, out)
    assert (q.state, q.epoch, q.voted) == (RaftState.CANDIDATE, 6, "c1")


def test_prospective_does_not_bump_the_epoch_and_candidate_does():
    out = Output()
    q = in_state(RaftState.FOLLOWER, epoch=5)
    q.become_prospective(0)
    assert q.epoch == 5
    q.become_candidate(0, out)
    assert q.epoch == 6 and q.voted == "c1"


def test_two_leaders_in_one_epoch_is_an_illegal_transition():
    q = in_state(RaftState.FOLLOWER, epoch=5)
    with pytest.raises(IllegalTransition, match="two leaders in epoch 5"):
        q.become_follower(5, "c3", 0, Output())


def test_the_epoch_never_goes_back():
    q = in_state(RaftState.FOLLOWER, epoch=5)
    with pytest.raises(IllegalTransition, match="epoch would go back"):
        q.become_follower(4, "c3", 0, Output())


def test_every_epoch_change_and_vote_is_persisted():
    out = Output()
    q = state(stored=ElectionState(2))
    q.become_unattached(3, 0, out)
    q.record_vote("c2", out)
    stored = [ElectionState.decode(op.data) for op in out.storage]
    assert stored == [ElectionState(3, None, None), ElectionState(3, "c2", None)]


# --- restart ------------------------------------------------------------------------------------


def test_a_restarted_leader_comes_back_resigned():
    assert state(stored=ElectionState(7, "c1", "c1")).state is RaftState.RESIGNED


def test_a_restarted_voter_keeps_its_vote_and_its_leader():
    q = state(stored=ElectionState(7, "c2", None))
    assert (q.state, q.epoch, q.voted) == (RaftState.UNATTACHED, 7, "c2")
    q = state(stored=ElectionState(7, None, "c3"))
    assert (q.state, q.leader, q.has_fetched_from_leader) == (RaftState.FOLLOWER, "c3", False)


def test_a_restarted_voter_that_voted_for_itself_is_a_candidate_of_the_same_epoch():
    # Kafka's QuorumState.initialize: election.isVotedCandidate(local) -> CandidateState(epoch).
    q = state(stored=ElectionState(7, "c1", None))
    assert (q.state, q.epoch, q.voted, q.leader, q.granted) == (RaftState.CANDIDATE, 7, "c1", None, {"c1"})
    assert q.election_deadline_ms is not None
    assert q.transitions == [("start", "candidate", 7)]


def test_a_sole_resigned_voter_may_become_prospective():
    # KafkaRaftClient.initialize: an only voter that is Resigned transitions to Prospective.
    q = QuorumState("c1", ("c1",), is_voter=True, prevote=True, timing=Timing(1000, 2000, 1000), rng=random.Random(1))
    q.initialize(ElectionState(2, "c1", "c1"), log_last_epoch=0, now_ms=0)
    assert q.state is RaftState.RESIGNED
    q.become_prospective(0)
    assert (q.state, q.epoch) == (RaftState.PROSPECTIVE, 2)


def test_the_log_epoch_wins_over_a_stale_quorum_state_file():
    q = QuorumState("c1", VOTERS, is_voter=True, prevote=True, timing=Timing(1000, 2000, 1000), rng=random.Random(1))
    q.initialize(ElectionState(3), log_last_epoch=5, now_ms=0)
    assert q.epoch == 5


def test_election_timeout_is_base_plus_jitter_below_base():
    q = state()
    draws = [q.random_election_timeout_ms() for _ in range(200)]
    assert min(draws) >= 1000 and max(draws) < 2000 and len(set(draws)) > 50
