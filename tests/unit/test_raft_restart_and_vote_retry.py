"""RaftNode at start-up and while canvassing, as Kafka's KafkaRaftClient does it:

- a sole voter restarting leads epoch + 1 at once (KafkaRaftClient.initialize: "When there is only
  a single voter, become leader immediately");
- a voter that had voted for itself restarts as the Candidate of that epoch and resumes the election
  (QuorumState.initialize: `election.isVotedCandidate(local)`);
- a (pre-)vote request left unanswered for the request timeout is sent again (pollProspective /
  pollCandidate -> maybeSendVoteRequests with RequestManager's request timeout).
"""

import random

from actors.contract import Envelope, Output
from controller_quorum.messages import VoteRequest, VoteResponse
from controller_quorum.quorum_state import QUORUM_STATE_FILE, ElectionState, RaftState
from controller_quorum.raft import RaftConfig, RaftNode
from tests.unit.raft_listener import RecordingListener


def node(voters, stored: ElectionState | None = None, **config) -> tuple[RaftNode, RecordingListener, Output]:
    files = {} if stored is None else {QUORUM_STATE_FILE: stored.encode()}
    listener, out = RecordingListener(), Output()
    raft = RaftNode("c1", voters, RaftConfig(**config), files, random.Random(3), listener, out, 0)
    raft.start(0, out)
    return raft, listener, out


def vote_requests(out: Output) -> list[tuple[str, VoteRequest]]:
    return [(e.dst, e.payload) for e in out.sends if isinstance(e.payload, VoteRequest)]


# --- A: a sole voter leads again at once ----------------------------------------------------------


def _assert_leads_at_once(stored: ElectionState | None, expected_epoch: int, prevote: bool = True) -> None:
    raft, listener, _ = node(("c1",), stored, prevote=prevote)
    assert (raft.state, raft.epoch, raft.leader) == (RaftState.LEADER, expected_epoch, "c1")
    assert listener.led == [expected_epoch]


def test_sole_voter_restarting_as_resigned_leads_the_next_epoch_at_once():
    _assert_leads_at_once(ElectionState(2, "c1", "c1"), 3)  # testInitializeAsResignedAndOnlyVoter


def test_sole_voter_restarting_unattached_or_empty_leads_at_once():
    _assert_leads_at_once(ElectionState(2), 3)
    _assert_leads_at_once(None, 1)  # testInitializeAsOnlyVoterWithEmptyElectionState


def test_sole_voter_leads_at_once_without_prevote_too():
    _assert_leads_at_once(ElectionState(2, "c1", "c1"), 3, prevote=False)


def test_sole_voter_restarting_as_candidate_leads_the_same_epoch():
    _assert_leads_at_once(ElectionState(4, "c1", None), 4)


def test_a_voter_of_several_still_waits_for_its_election_timeout():
    raft, listener, out = node(("c1", "c2", "c3"), ElectionState(2, "c1", "c1"))
    assert raft.state is RaftState.RESIGNED and listener.led == [] and not vote_requests(out)


# --- B: restart as the Candidate it was ------------------------------------------------------------


def test_restart_after_voting_for_itself_resumes_the_election_in_the_same_epoch():
    raft, _, out = node(("c1", "c2", "c3"), ElectionState(4, "c1", None))
    assert (raft.state, raft.epoch, raft.quorum.voted) == (RaftState.CANDIDATE, 4, "c1")
    reqs = vote_requests(out)
    assert sorted(dst for dst, _ in reqs) == ["c2", "c3"]
    assert all(r.epoch == 4 and not r.pre_vote for _, r in reqs)
    out = Output()
    raft.handle(Envelope("c2", "c1", VoteResponse(4, None, True, False)), 10, out)
    assert (raft.state, raft.epoch) == (RaftState.LEADER, 4)


def test_a_restarted_candidate_follows_the_leader_its_vote_requests_discover():
    raft, _, _ = node(("c1", "c2", "c3"), ElectionState(4, "c1", "c2"))  # voted c1, then followed c2
    assert raft.state is RaftState.CANDIDATE
    raft.handle(Envelope("c3", "c1", VoteResponse(4, "c2", False, False)), 10, Output())
    assert (raft.state, raft.epoch, raft.leader) == (RaftState.FOLLOWER, 4, "c2")


# --- E: unanswered (pre-)vote requests are sent again after the request timeout ----------------------


def _prospective(**config) -> RaftNode:
    raft, _, _ = node(("c1", "c2", "c3"), ElectionState(4, None, "c2"), election_timeout_ms=10_000, **config)
    assert raft.state is RaftState.FOLLOWER
    t = raft.quorum.fetch_deadline_ms
    raft.tick(t, Output())
    assert raft.state is RaftState.PROSPECTIVE
    return raft


def test_unanswered_pre_vote_requests_are_sent_again_after_the_request_timeout():
    raft = _prospective()
    t0 = 2_000  # the fetch timeout: when c1 became Prospective and sent its pre-votes
    assert raft.next_deadline() == t0 + 2_000  # well before the election timeout (>= 10 s)
    out = Output()
    raft.tick(t0 + 1_999, out)
    assert not vote_requests(out)
    out = Output()
    raft.tick(t0 + 2_000, out)
    reqs = vote_requests(out)
    assert sorted(dst for dst, _ in reqs) == ["c2", "c3"] and all(r.pre_vote and r.epoch == 4 for _, r in reqs)
    assert raft.state is RaftState.PROSPECTIVE
    # The answers to the retry decide: both refuse, and c1 follows its old leader again.
    for src in ("c2", "c3"):
        raft.handle(Envelope(src, "c1", VoteResponse(4, "c2", False, True)), t0 + 2_010, Output())
    assert (raft.state, raft.leader) == (RaftState.FOLLOWER, "c2")


def test_only_voters_that_have_not_answered_are_asked_again():
    raft = _prospective(prevote=True)
    raft.handle(Envelope("c2", "c1", VoteResponse(4, None, False, True)), 2_100, Output())
    assert raft.state is RaftState.PROSPECTIVE
    out = Output()
    raft.tick(4_000, out)
    assert [dst for dst, _ in vote_requests(out)] == ["c3"]
    assert raft.next_deadline() == 6_000


def test_unanswered_vote_requests_of_a_candidate_are_sent_again():
    raft, _, _ = node(("c1", "c2", "c3"), ElectionState(4, "c1", None), election_timeout_ms=10_000)
    assert raft.state is RaftState.CANDIDATE and raft.next_deadline() == 2_000
    out = Output()
    raft.tick(2_000, out)
    reqs = vote_requests(out)
    assert sorted(dst for dst, _ in reqs) == ["c2", "c3"] and all(not r.pre_vote and r.epoch == 4 for _, r in reqs)
    raft.handle(Envelope("c3", "c1", VoteResponse(4, None, True, False)), 2_050, Output())
    assert (raft.state, raft.epoch) == (RaftState.LEADER, 4)


def test_a_candidate_that_lost_stops_asking():
    raft, _, _ = node(("c1", "c2", "c3"), ElectionState(4, "c1", None), election_timeout_ms=10_000)
    for src in ("c2", "c3"):
        raft.handle(Envelope(src, "c1", VoteResponse(4, None, False, False)), 100, Output())
    assert raft.quorum.backoff_until_ms is not None
    out = Output()
    raft.tick(min(2_000, raft.quorum.backoff_until_ms - 1), out)
    assert not vote_requests(out)
