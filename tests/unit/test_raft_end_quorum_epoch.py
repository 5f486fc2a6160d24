"""EndQuorumEpoch and a voter's graceful shutdown, as Kafka's KafkaRaftClient does them:

- a resigning leader names the other voters by the fetch offset it last saw from each, highest
  first, those it saw none from last, ties by id (LeaderState.nonLeaderVotersByDescendingFetchOffset);
- a follower of that leader canvasses after the backoff for its rank instead of its fetch timeout
  (handleEndQuorumEpochRequest -> endEpochElectionBackoff -> strictExponentialElectionBackoffMs),
  the first at once;
- a leader asked to shut down resigns, keeps answering votes, and its shutdown ends only once it
  knows a leader of a newer epoch (maybeCompleteShutdown), or after the 5 s timeout
  (KafkaRaftClientDriver.initiateShutdown: shutdown(5000)); a follower's ends at once;
- EndQuorumEpoch goes again, after the request timeout, to the voters that have not acknowledged it
  (pollResigned, ResignedState.unackedVoters).
"""

import random

from actors.contract import Envelope, Output, ShutdownRequested, StartContext, StopProcess
from actors.controller_node import ControllerNode
from controller_quorum.messages import (
    FENCED_LEADER_EPOCH,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    EndQuorumEpochResponse,
    FetchRequest,
    LeaderChange,
    VoteRequest,
    VoteResponse,
)
from controller_quorum.quorum_state import QUORUM_STATE_FILE, ElectionState, RaftState
from controller_quorum.raft import RaftConfig, RaftNode
from controller_quorum.raft_resignation import strict_exponential_election_backoff_ms
from observability.events import RaftEndQuorumEpoch, RaftShutdown
from tests.unit.raft_listener import RecordingListener
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec

FIVE = ("c1", "c2", "c3", "c4", "c5")
THREE = ("c1", "c2", "c3")


def started(voters, stored: ElectionState | None = None, local: str = "c1", **config) -> tuple[RaftNode, Output]:
    """A node started at time 0 from `stored`, and what its start sent."""
    files = {} if stored is None else {QUORUM_STATE_FILE: stored.encode()}
    out = Output()
    raft = RaftNode(local, voters, RaftConfig(raft_fsync=False, **config), files, random.Random(3), RecordingListener(), out, 0)
    raft.start(0, out)
    return raft, out


def node(voters, stored: ElectionState | None = None, local: str = "c1", **config) -> RaftNode:
    return started(voters, stored, local, **config)[0]


def leader(voters, epoch: int = 4, **config) -> RaftNode:
    """c1 leading `epoch`: restarted as the Candidate of that epoch, then granted a majority."""
    raft = node(voters, ElectionState(epoch, "c1", None), **config)
    for voter in voters[1 : len(voters) // 2 + 1]:
        raft.handle(Envelope(voter, "c1", VoteResponse(epoch, None, True, False)), 10, Output())
    assert (raft.state, raft.epoch) == (RaftState.LEADER, epoch)
    return raft


def fetch(raft: RaftNode, voter: str, offset: int, now_ms: float) -> None:
    last_epoch = raft.log.entries[offset - 1].epoch if offset else 0
    raft.handle(Envelope(voter, "c1", FetchRequest(raft.epoch, voter, offset, last_epoch, False)), now_ms, Output())


def sent(out: Output, kind: type) -> list[tuple[str, object]]:
    return [(e.dst, e.payload) for e in out.sends if isinstance(e.payload, kind)]


def events(out: Output, kind: type) -> list:
    return [e for e in out.events if isinstance(e, kind)]


# --- the ranking and the backoffs -------------------------------------------------------------------


def test_strict_exponential_backoffs_by_rank():
    # Four successors, controller.quorum.election.backoff.max.ms = 1000: 1000 >> 3 = 125, doubled per place.
    assert [strict_exponential_election_backoff_ms(p, 4, 1_000) for p in range(4)] == [0, 125, 250, 500]
    assert strict_exponential_election_backoff_ms(4, 4, 1_000) == 1_000  # not named: the whole backoff
    assert [strict_exponential_election_backoff_ms(p, 2, 1_000) for p in range(2)] == [0, 500]
    assert strict_exponential_election_backoff_ms(0, 0, 1_000) == 0  # no successors named: at once


def test_a_resigning_leader_ranks_the_other_voters_by_descending_fetch_offset():
    raft = leader(FIVE)
    raft.append([LeaderChange("c1", 4, FIVE)] * 3, 20, Output())  # any registered record type
    raft.tick(raft.leader_state.linger_deadline_ms, Output())
    assert raft.log.end_offset == 4  # the LeaderChange record and three more
    fetch(raft, "c5", 1, 100)
    fetch(raft, "c3", 4, 100)
    fetch(raft, "c2", 1, 100)  # c4 never fetches
    out = Output()
    raft.begin_shutdown(200, out)
    assert raft.state is RaftState.RESIGNED
    requests = sent(out, EndQuorumEpoch)
    assert sorted(dst for dst, _ in requests) == ["c2", "c3", "c4", "c5"]
    # Highest offset first, ties (c2, c5 at 1) by id, the voter never heard from last.
    assert {req for _, req in requests} == {EndQuorumEpoch(4, "c1", ("c3", "c2", "c5", "c4"))}


def test_each_follower_backs_off_for_its_rank():
    successors = ("c3", "c2", "c5", "c4")
    for local, rank, backoff in (("c3", 0, 0), ("c2", 1, 125), ("c5", 2, 250), ("c4", 3, 500)):
        raft = node(FIVE, ElectionState(4, None, "c1"), local=local)
        assert raft.state is RaftState.FOLLOWER and raft.next_deadline() == 2_000  # the fetch timeout
        out = Output()
        raft.handle(Envelope("c1", local, EndQuorumEpoch(4, "c1", successors)), 300, out)
        assert events(out, RaftEndQuorumEpoch) == [RaftEndQuorumEpoch(4, rank, backoff)]
        assert sent(out, EndQuorumEpochResponse) == [("c1", EndQuorumEpochResponse(4, "c1", None))]
        assert raft.quorum.fetch_deadline_ms == 300 + backoff


def test_a_voter_not_named_waits_the_whole_backoff():
    raft = node(FIVE, ElectionState(4, None, "c1"), local="c5")
    raft.handle(Envelope("c1", "c5", EndQuorumEpoch(4, "c1", ("c2", "c3"))), 300, Output())
    assert raft.quorum.fetch_deadline_ms == 300 + 1_000


# --- the first successor canvasses at once ------------------------------------------------------------


def test_a_follower_named_first_canvasses_at_once():
    raft = node(THREE, ElectionState(4, None, "c2"))
    raft.handle(Envelope("c2", "c1", EndQuorumEpoch(4, "c2", ("c1", "c3"))), 100, Output())
    assert raft.state is RaftState.FOLLOWER and raft.next_deadline() == 100
    out = Output()
    raft.tick(100, out)
    assert raft.state is RaftState.PROSPECTIVE
    assert sorted(dst for dst, req in sent(out, VoteRequest) if req.pre_vote and req.epoch == 4) == ["c2", "c3"]


def test_without_prevote_the_first_successor_is_candidate_at_once():
    raft = node(THREE, ElectionState(4, None, "c2"), prevote=False)
    raft.handle(Envelope("c2", "c1", EndQuorumEpoch(4, "c2", ("c1", "c3"))), 100, Output())
    out = Output()
    raft.tick(100, out)
    assert (raft.state, raft.epoch) == (RaftState.CANDIDATE, 5)
    assert sorted(dst for dst, req in sent(out, VoteRequest) if not req.pre_vote) == ["c2", "c3"]


def test_the_second_successor_waits_for_its_backoff():
    raft = node(THREE, ElectionState(4, None, "c2"))
    raft.handle(Envelope("c2", "c1", EndQuorumEpoch(4, "c2", ("c3", "c1"))), 100, Output())
    assert raft.next_deadline() == 600
    raft.tick(599, Output())
    assert raft.state is RaftState.FOLLOWER
    raft.tick(600, Output())
    assert raft.state is RaftState.PROSPECTIVE


def test_a_first_successor_that_loses_follows_again_and_grants_the_next_one_its_pre_vote():
    raft = node(FIVE, ElectionState(4, None, "c5"))
    raft.handle(Envelope("c5", "c1", EndQuorumEpoch(4, "c5", ("c1", "c2", "c3", "c4"))), 100, Output())
    raft.tick(100, Output())
    for voter in ("c2", "c3", "c4"):  # followers that have fetched from c5 refuse
        raft.handle(Envelope(voter, "c1", VoteResponse(4, "c5", False, True)), 105, Output())
    assert (raft.state, raft.leader, raft.quorum.has_fetched_from_leader) == (RaftState.FOLLOWER, "c5", False)
    out = Output()
    raft.handle(Envelope("c2", "c1", VoteRequest(4, "c2", raft.log.last_epoch, raft.log.end_offset, True)), 225, out)
    assert sent(out, VoteResponse) == [("c2", VoteResponse(4, "c5", True, True))]


def test_an_unattached_voter_follows_the_resigned_leader_and_canvasses_at_once():
    # testEndQuorumStartsNewElectionImmediatelyIfFollowerUnattached
    raft = node(THREE, ElectionState(4))
    assert raft.state is RaftState.UNATTACHED
    raft.handle(Envelope("c2", "c1", EndQuorumEpoch(4, "c2", ("c1", "c3"))), 100, Output())
    assert (raft.state, raft.leader) == (RaftState.FOLLOWER, "c2")
    raft.tick(100, Output())
    assert raft.state is RaftState.PROSPECTIVE


def test_an_end_quorum_epoch_of_an_older_epoch_is_refused():
    raft = node(THREE, ElectionState(5, None, "c3"))
    out = Output()
    raft.handle(Envelope("c2", "c1", EndQuorumEpoch(4, "c2", ("c1", "c3"))), 100, out)
    assert sent(out, EndQuorumEpochResponse) == [("c2", EndQuorumEpochResponse(5, "c3", FENCED_LEADER_EPOCH))]
    assert (raft.state, raft.leader, raft.quorum.fetch_deadline_ms) == (RaftState.FOLLOWER, "c3", 2_000)


# --- EndQuorumEpoch is sent again until acknowledged -----------------------------------------------------


def test_end_quorum_epoch_goes_again_only_to_voters_that_have_not_acknowledged():
    raft = leader(THREE, election_timeout_ms=10_000)
    raft.begin_shutdown(100, Output())
    raft.handle(Envelope("c2", "c1", EndQuorumEpochResponse(4, "c1", None)), 110, Output())
    assert raft.next_deadline() == 100 + 2_000  # the request timeout, for c3
    out = Output()
    raft.tick(2_100, out)
    assert [dst for dst, _ in sent(out, EndQuorumEpoch)] == ["c3"]


def test_a_leader_restarting_resigned_sends_end_quorum_epoch_with_no_successors():
    raft, out = started(THREE, ElectionState(4, "c1", "c1"))
    assert raft.state is RaftState.RESIGNED
    no_successors = EndQuorumEpoch(4, "c1", ())
    assert sorted(sent(out, EndQuorumEpoch)) == [("c2", no_successors), ("c3", no_successors)]


# --- graceful shutdown ---------------------------------------------------------------------------------


def test_a_resigned_leader_answers_votes_and_stops_only_once_a_newer_leader_is_known():
    raft = leader(THREE)
    out = Output()
    raft.begin_shutdown(100, out)
    assert raft.state is RaftState.RESIGNED and raft.shutdown_outcome is None
    # Past its election timeout (< 2 x 1000 ms) it stays Resigned in its epoch: no election of its own.
    raft.tick(2_500, Output())
    assert (raft.state, raft.epoch, raft.shutdown_outcome) == (RaftState.RESIGNED, 4, None)
    end, offset = raft.log.last_epoch, raft.log.end_offset
    out = Output()
    raft.handle(Envelope("c2", "c1", VoteRequest(4, "c2", end, offset, True)), 2_600, out)
    assert sent(out, VoteResponse) == [("c2", VoteResponse(4, "c1", True, True))]  # ResignedState grants pre-votes
    out = Output()
    raft.handle(Envelope("c2", "c1", VoteRequest(5, "c2", end, offset, False)), 2_610, out)
    assert sent(out, VoteResponse) == [("c2", VoteResponse(5, None, True, False))]
    assert (raft.state, raft.epoch, raft.shutdown_outcome) == (RaftState.UNATTACHED, 5, None)  # no leader known yet
    out = Output()
    raft.handle(Envelope("c2", "c1", BeginQuorumEpoch(5, "c2")), 2_620, out)
    assert (raft.state, raft.shutdown_outcome) == (RaftState.FOLLOWER, "completed")
    assert events(out, RaftShutdown) == [RaftShutdown("completed", "follower", 5)]


def test_the_shutdown_times_out_after_five_seconds_without_a_new_leader():
    raft = leader(THREE)
    raft.begin_shutdown(100, Output())
    assert raft.next_deadline() == 100 + 2_000  # EndQuorumEpoch again to c2 and c3 (unanswered)
    raft.tick(2_100, Output())
    assert raft.next_deadline() == 4_100
    raft.tick(4_100, Output())
    assert raft.next_deadline() == 5_100  # Kafka's 5 s shutdown timeout
    out = Output()
    raft.tick(5_099, out)
    assert raft.shutdown_outcome is None
    raft.tick(5_100, out)
    assert raft.shutdown_outcome == "timed_out"
    assert events(out, RaftShutdown) == [RaftShutdown("timed_out", "resigned", 4)]


def test_a_follower_shuts_down_at_once():
    raft = node(THREE, ElectionState(4, None, "c2"))
    out = Output()
    raft.begin_shutdown(100, out)
    assert raft.shutdown_outcome == "completed"
    assert events(out, RaftShutdown) == [RaftShutdown("completed", "follower", 4)]


def test_an_unattached_voter_waits_for_a_leader_without_canvassing():
    raft = node(THREE, ElectionState(4))
    raft.begin_shutdown(100, Output())
    assert raft.shutdown_outcome is None and raft.next_deadline() == 5_100
    out = Output()
    raft.tick(3_000, out)  # past its election timeout: no Prospective while shutting down
    assert raft.state is RaftState.UNATTACHED and not sent(out, VoteRequest)
    raft.handle(Envelope("c2", "c1", BeginQuorumEpoch(4, "c2")), 3_100, Output())
    assert raft.shutdown_outcome == "completed"


def test_a_sole_voter_stops_at_once_without_resigning():
    raft = node(("c1",))
    assert raft.is_leader()
    out = Output()
    raft.begin_shutdown(100, out)
    assert raft.shutdown_outcome == "completed" and raft.state is RaftState.LEADER


def test_the_controller_process_stops_only_when_the_raft_shutdown_ends():
    settings = cluster_settings(ClusterSpec.model_validate({"brokers": 1, "controllers": 3}))
    stored = {QUORUM_STATE_FILE: ElectionState(4, "c1", None).encode()}
    c1 = ControllerNode(StartContext("c1", stored, None, random.Random(0)), settings)
    c1.start(0.0)
    c1.handle(Envelope("c2", "c1", VoteResponse(4, None, True, False)), 10.0)
    assert c1.raft.is_leader()
    out = c1.handle(Envelope("runner", "c1", ShutdownRequested()), 100.0)
    assert not any(isinstance(op, StopProcess) for op in out.storage)
    assert c1.raft.state is RaftState.RESIGNED and out.next_deadline_ms is not None
    out = c1.handle(Envelope("c2", "c1", BeginQuorumEpoch(5, "c2")), 200.0)
    assert any(isinstance(op, StopProcess) for op in out.storage)
