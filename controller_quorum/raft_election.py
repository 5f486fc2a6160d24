"""The states of a Raft voter that canvasses: Prospective (Pre-Vote) and Candidate (the vote), and
the answer every state gives another nominee (KafkaRaftClient.transitionToProspective,
transitionToCandidate, handleVoteRequest, handleVoteResponse, pollProspective, pollCandidate;
Kafka's ProspectiveState and CandidateState). A `Prospective` or `Candidate` is the round's
requests (raft_states.ElectionRound) together with that state's handlers; the node makes one for
each round and drops it when it leaves the state (`RaftNode.start_election`,
`become_candidate`, `_drain_transitions`). The epoch, the vote and the tally are QuorumState's,
which persists them.

Rules: KIP-996 (Pre-Vote: a Prospective asks without raising its epoch, and a lost or timed-out
pre-vote sends it back to following its last known leader); a vote is granted to a nominee whose
log is at least as up to date, once per epoch (quorum_state.py); a request left unanswered for
controller.quorum.request.timeout.ms is sent again while the election can still be won.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.contract import Output
from observability.events import RaftVote

from .messages import VoteRequest, VoteResponse
from .quorum_state import RaftState
from .raft_states import ElectionRound, due

if TYPE_CHECKING:
    from .raft import RaftNode


class _Nominee(ElectionRound):
    """What Prospective and Candidate share: asking the other voters, and asking again those that
    have not answered within the request timeout."""

    pre_vote: bool

    def __init__(self, node: RaftNode) -> None:
        super().__init__()
        self.node = node

    def open(self, now_ms: float, out: Output) -> None:
        """A new round: ask every other voter (this object is new, so the requests of the previous
        round are forgotten: Kafka's resetConnections on becoming a nominee), then see whether
        this voter's own vote already makes a majority (a sole voter)."""
        self.send_vote_requests(self.node.others(), now_ms, out)
        self.maybe_win(now_ms, out)

    def send_vote_requests(self, voters: list[str], now_ms: float, out: Output) -> None:
        node = self.node
        req = VoteRequest(node.epoch, node.local, node.log.last_epoch, node.log.end_offset, self.pre_vote)
        for voter in voters:
            self.sent_at[voter] = now_ms
            node.send(out, voter, req, durable=not self.pre_vote)

    def awaiting_votes(self) -> bool:
        """Whether this voter still asks (Kafka's maybeSendVoteRequests: "as long as we still have
        a chance to win the election")."""
        raise NotImplementedError

    def maybe_win(self, now_ms: float, out: Output) -> bool:
        raise NotImplementedError

    def _unanswered_voters(self) -> list[str]:
        q = self.node.quorum
        return self.unanswered(self.node.others(), q.granted | q.rejected)

    def vote_retry_at(self) -> float | None:
        if not self.awaiting_votes():
            return None
        return self.retry_at(self._unanswered_voters(), self.node.config.request_timeout_ms)

    def resend_vote_requests(self, now_ms: float, out: Output) -> None:
        """Send the (pre-)vote request again to every voter whose answer has not come within
        controller.quorum.request.timeout.ms: the request or its answer was lost (Kafka's
        RequestManager.ConnectionState.hasRequestTimedOut makes the voter ready again, and
        pollProspective/pollCandidate -> maybeSendVoteRequests re-sends to the unrecorded voters
        while the election timeout runs)."""
        if not self.awaiting_votes():
            return
        overdue = self.due(self._unanswered_voters(), now_ms, self.node.config.request_timeout_ms)
        if overdue:
            self.send_vote_requests(overdue, now_ms, out)

    def _tally(self, src: str, granted: bool) -> bool:
        """Count an answer; whether a majority has now refused."""
        q = self.node.quorum
        (q.granted if granted else q.rejected).add(src)
        return len(q.rejected) >= len(self.node.voters) - q.majority + 1


class Prospective(_Nominee):
    """KIP-996's Prospective: canvasses with pre-votes, its epoch unchanged."""

    pre_vote = True

    def awaiting_votes(self) -> bool:
        return self.node.quorum.state is RaftState.PROSPECTIVE

    def poll(self, now_ms: float, out: Output, timeouts: bool) -> None:
        """KafkaRaftClient.pollProspective: a pre-vote that timed out is lost; else ask again."""
        if timeouts and due(self.node.quorum.election_deadline_ms, now_ms):
            self.lose(now_ms, out)
        else:
            self.resend_vote_requests(now_ms, out)

    def on_vote_response(self, src: str, resp: VoteResponse, now_ms: float, out: Output) -> None:
        if self.node.quorum.state is not RaftState.PROSPECTIVE or not resp.pre_vote:
            return
        refused = self._tally(src, resp.granted)
        if not self.maybe_win(now_ms, out) and refused:
            self.lose(now_ms, out)

    def maybe_win(self, now_ms: float, out: Output) -> bool:
        if len(self.node.quorum.granted) >= self.node.quorum.majority:
            self.node.become_candidate(now_ms, out)
            return True
        return False

    def lose(self, now_ms: float, out: Output) -> None:
        """Lost or timed out: back to following the last known leader, else Unattached (KIP-996)."""
        node, q = self.node, self.node.quorum
        if q.leader is not None:
            node.become_follower(q.epoch, q.leader, now_ms, out)
        else:
            q.become_unattached(q.epoch, now_ms, out)


class Candidate(_Nominee):
    """A Candidate of its epoch + 1, with its own vote; once a majority refuses, it backs off."""

    pre_vote = False

    def awaiting_votes(self) -> bool:
        q = self.node.quorum
        return q.state is RaftState.CANDIDATE and q.backoff_until_ms is None

    def poll(self, now_ms: float, out: Output, timeouts: bool) -> None:
        """KafkaRaftClient.pollCandidate: a Candidate that lost (its backoff over) or timed out
        starts anew; else it asks again those that have not answered."""
        q = self.node.quorum
        if timeouts and (due(q.backoff_until_ms, now_ms) or due(q.election_deadline_ms, now_ms)):
            self.node.start_election(now_ms, out)
        else:
            self.resend_vote_requests(now_ms, out)

    def on_vote_response(self, src: str, resp: VoteResponse, now_ms: float, out: Output) -> None:
        if not self.awaiting_votes() or resp.pre_vote:
            return
        refused = self._tally(src, resp.granted)
        if not self.maybe_win(now_ms, out) and refused:
            self.node.quorum.begin_backoff(now_ms)

    def maybe_win(self, now_ms: float, out: Output) -> bool:
        if len(self.node.quorum.granted) < self.node.quorum.majority:
            return False
        self.node.become_leader(now_ms, out)
        return True


def answer_vote_request(node: RaftNode, src: str, req: VoteRequest, now_ms: float, out: Output) -> None:
    """KafkaRaftClient.handleVoteRequest, in any state: refuse an older epoch; learn a higher one
    (pre-vote or not); grant by the rules of QuorumState.can_grant_vote, recording a standard vote."""
    q = node.quorum
    if req.epoch < q.epoch:
        node.send(out, src, VoteResponse(q.epoch, q.leader, False, req.pre_vote))
        return
    if req.epoch > q.epoch:  # pre-vote or not, a higher epoch is learned (KafkaRaftClient)
        node.leave_leadership(now_ms, out)
        q.become_unattached(req.epoch, now_ms, out)
    up_to_date = (req.last_epoch, req.last_offset) >= (node.log.last_epoch, node.log.end_offset)
    granted = q.can_grant_vote(req.candidate, up_to_date, req.pre_vote)
    if granted and not req.pre_vote and q.voted is None:
        q.record_vote(req.candidate, out)
        if q.state is RaftState.UNATTACHED:
            q.election_deadline_ms = now_ms + q.random_election_timeout_ms()
    out.emit(RaftVote(req.candidate, req.epoch, req.pre_vote, granted))
    node.send(out, src, VoteResponse(q.epoch, q.leader, granted, req.pre_vote), durable=q.persist_pending)
