"""A Raft voter's elections: Pre-Vote as a Prospective, then the vote as a Candidate, the answers
it gives other nominees, and the polls of the states that canvass (KafkaRaftClient.
transitionToProspective, transitionToCandidate, handleVoteRequest, handleVoteResponse,
pollUnattached, pollProspective, pollCandidate). The requests of the round are an ElectionRound
(raft_states.py); the epoch, the vote and the tally are QuorumState's, which persists them.

Rules: KIP-996 (Pre-Vote: a Prospective asks without raising its epoch, and a lost or timed-out
pre-vote sends it back to following its last known leader); a vote is granted to a nominee whose
log is at least as up to date, once per epoch (quorum_state.py); a request left unanswered for
controller.quorum.request.timeout.ms is sent again while the election can still be won.
"""

from __future__ import annotations

from actors.contract import Output
from observability.events import RaftVote

from .messages import VoteRequest, VoteResponse
from .quorum_state import RaftState
from .raft_states import ElectionRound, due


class Elections:
    """RaftNode's handlers for elections (a mixin of RaftNode: it uses the node's quorum, log,
    config and sending)."""

    # --- each state's poll (KafkaRaftClient.pollCandidate, pollProspective, pollUnattached) --------

    def _poll_candidate(self, now_ms: float, out: Output, timeouts: bool) -> None:
        """A Candidate that lost (its backoff over) or timed out starts anew; else it asks again
        those that have not answered."""
        q = self.quorum
        if timeouts and (due(q.backoff_until_ms, now_ms) or due(q.election_deadline_ms, now_ms)):
            self._start_election(now_ms, out)
        else:
            self._resend_vote_requests(now_ms, out)

    def _poll_prospective(self, now_ms: float, out: Output, timeouts: bool) -> None:
        """A Prospective whose pre-vote timed out loses it; else it asks again."""
        if timeouts and due(self.quorum.election_deadline_ms, now_ms):
            self._lose_prevote(now_ms, out)
        else:
            self._resend_vote_requests(now_ms, out)

    def _poll_unattached(self, now_ms: float, out: Output, timeouts: bool) -> None:
        """An Unattached voter whose election timeout passed canvasses."""
        if timeouts and self.is_voter and due(self.quorum.election_deadline_ms, now_ms):
            self._start_election(now_ms, out)

    # --- the election ----------------------------------------------------------------------------

    def _start_election(self, now_ms: float, out: Output) -> None:
        if self.config.prevote:
            self.quorum.become_prospective(now_ms)
            self._request_votes(pre_vote=True, now_ms=now_ms, out=out)
            self._maybe_win_prevote(now_ms, out)
        else:
            self._become_candidate(now_ms, out)

    def _become_candidate(self, now_ms: float, out: Output) -> None:
        self.quorum.become_candidate(now_ms, out)
        self._request_votes(pre_vote=False, now_ms=now_ms, out=out)
        self._maybe_win_election(now_ms, out)

    def _request_votes(self, *, pre_vote: bool, now_ms: float, out: Output) -> None:
        """A new election round (Prospective or Candidate): ask every other voter, forgetting the
        requests of the previous round (Kafka's resetConnections on becoming a nominee)."""
        self.election = ElectionRound()
        self._send_vote_requests(self._others(), pre_vote, now_ms, out)

    def _send_vote_requests(self, voters: list[str], pre_vote: bool, now_ms: float, out: Output) -> None:
        q = self.quorum
        req = VoteRequest(q.epoch, self.local, self.log.last_epoch, self.log.end_offset, pre_vote)
        for voter in voters:
            self.election.sent_at[voter] = now_ms
            self._send(out, voter, req, durable=not pre_vote)

    def _awaiting_votes(self) -> bool:
        """Whether this node still asks for votes: a Prospective, or a Candidate that has not lost
        (Kafka's maybeSendVoteRequests: "as long as we still have a chance to win the election")."""
        q = self.quorum
        awaiting = q.state is RaftState.PROSPECTIVE or (q.state is RaftState.CANDIDATE and q.backoff_until_ms is None)
        return awaiting and self.election is not None

    def _unanswered_voters(self) -> list[str]:
        q = self.quorum
        return self.election.unanswered(self._others(), q.granted | q.rejected)

    def _vote_retry_at(self) -> float | None:
        if not self._awaiting_votes():
            return None
        return self.election.retry_at(self._unanswered_voters(), self.config.request_timeout_ms)

    def _resend_vote_requests(self, now_ms: float, out: Output) -> None:
        """Send the (pre-)vote request again to every voter whose answer has not come within
        controller.quorum.request.timeout.ms: the request or its answer was lost (Kafka's
        RequestManager.ConnectionState.hasRequestTimedOut makes the voter ready again, and
        pollProspective/pollCandidate -> maybeSendVoteRequests re-sends to the unrecorded voters
        while the election timeout runs)."""
        if not self._awaiting_votes():
            return
        due = self.election.due(self._unanswered_voters(), now_ms, self.config.request_timeout_ms)
        if due:
            self._send_vote_requests(due, self.quorum.state is RaftState.PROSPECTIVE, now_ms, out)

    def _on_vote_request(self, src: str, req: VoteRequest, now_ms: float, out: Output) -> None:
        q = self.quorum
        if req.epoch < q.epoch:
            self._send(out, src, VoteResponse(q.epoch, q.leader, False, req.pre_vote))
            return
        if req.epoch > q.epoch:  # pre-vote or not, a higher epoch is learned (KafkaRaftClient)
            self._leave_leadership(now_ms, out)
            q.become_unattached(req.epoch, now_ms, out)
        up_to_date = (req.last_epoch, req.last_offset) >= (self.log.last_epoch, self.log.end_offset)
        granted = q.can_grant_vote(req.candidate, up_to_date, req.pre_vote)
        if granted and not req.pre_vote and q.voted is None:
            q.record_vote(req.candidate, out)
            if q.state is RaftState.UNATTACHED:
                q.election_deadline_ms = now_ms + q.random_election_timeout_ms()
        out.emit(RaftVote(req.candidate, req.epoch, req.pre_vote, granted))
        self._send(out, src, VoteResponse(q.epoch, q.leader, granted, req.pre_vote), durable=q.persist_pending)

    def _on_vote_response(self, src: str, resp: VoteResponse, now_ms: float, out: Output) -> None:
        q = self.quorum
        if resp.epoch < q.epoch or self._maybe_transition(resp.leader, resp.epoch, now_ms, out):
            return
        if q.state is RaftState.PROSPECTIVE and resp.pre_vote:
            (q.granted if resp.granted else q.rejected).add(src)
            if not self._maybe_win_prevote(now_ms, out) and len(q.rejected) >= len(self.voters) - q.majority + 1:
                self._lose_prevote(now_ms, out)
        elif q.state is RaftState.CANDIDATE and not resp.pre_vote and q.backoff_until_ms is None:
            (q.granted if resp.granted else q.rejected).add(src)
            if not self._maybe_win_election(now_ms, out) and len(q.rejected) >= len(self.voters) - q.majority + 1:
                q.begin_backoff(now_ms)

    def _maybe_win_prevote(self, now_ms: float, out: Output) -> bool:
        if len(self.quorum.granted) >= self.quorum.majority:
            self._become_candidate(now_ms, out)
            return True
        return False

    def _lose_prevote(self, now_ms: float, out: Output) -> None:
        """Lost or timed out: back to following the last known leader, else Unattached (KIP-996)."""
        q = self.quorum
        if q.leader is not None:
            self._become_follower(q.epoch, q.leader, now_ms, out)
        else:
            q.become_unattached(q.epoch, now_ms, out)

    def _maybe_win_election(self, now_ms: float, out: Output) -> bool:
        q = self.quorum
        if len(q.granted) < q.majority:
            return False
        q.become_leader(now_ms, out)
        self._on_become_leader(now_ms, out)
        return True
