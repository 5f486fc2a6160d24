"""A Raft leader that gives up its epoch, and the voters it tells: Resigned, EndQuorumEpoch and
the successors' election backoff (KafkaRaftClient.transitionToResigned, pollResigned,
handleEndQuorumEpochRequest, handleEndQuorumEpochResponse, endEpochElectionBackoff). The data of
the state is a ResignedState (raft_states.py).

Rules: a leader that resigns (Check Quorum, shutdown, or a restart as Resigned) sends
EndQuorumEpoch to the other voters, ranked by fetch offset, and sends it again to those that have
not acknowledged it; a follower of that leader canvasses after the election backoff for its rank
instead of its fetch timeout, the first at once.
"""

from __future__ import annotations

from actors.contract import Output
from observability.events import RaftEndQuorumEpoch, RaftResign

from .messages import FENCED_LEADER_EPOCH, EndQuorumEpoch, EndQuorumEpochResponse
from .quorum_state import RaftState
from .raft_states import ResignedState, due


def strict_exponential_election_backoff_ms(position: int, successors: int, backoff_max_ms: int) -> int:
    """KafkaRaftClient.strictExponentialElectionBackoffMs: the election backoff of the voter at
    `position` among `successors` preferred successors. The first canvasses at once, the others
    wait backoff_max >> (successors - 1), doubled for each place further down (capped at
    backoff_max), so that the most up-to-date voter is asked for first; a voter not named waits the
    whole backoff_max (controller.quorum.election.backoff.max.ms)."""
    if position == 0:
        return 0
    if position < 0 or position >= successors:
        return backoff_max_ms
    base = backoff_max_ms >> (successors - 1)
    return min(backoff_max_ms, base << (position - 1))


class Resignation:
    """RaftNode's handlers for resigning and EndQuorumEpoch (a mixin of RaftNode: it uses the
    node's quorum, config, leader state and sending)."""

    def _poll_resigned(self, now_ms: float, out: Output, timeouts: bool) -> None:
        """KafkaRaftClient.pollResigned: EndQuorumEpoch again to the voters that have not
        acknowledged it; once the election timeout passes, canvass (with Pre-Vote, from Unattached
        of the next epoch at once, KIP-996; without, as a Candidate)."""
        q = self.quorum
        self._resend_end_quorum_epoch(now_ms, out)
        if timeouts and due(q.election_deadline_ms, now_ms):
            if self.config.prevote:
                q.become_unattached(q.epoch + 1, now_ms, out)
                q.election_deadline_ms = now_ms  # KIP-996: canvass at once
            else:
                self._become_candidate(now_ms, out)

    def _resign(self, now_ms: float, out: Output, reason: str) -> None:
        """KafkaRaftClient.pollLeader -> transitionToResigned(nonLeaderVotersByDescendingFetchOffset),
        on Check Quorum or shutdown alike; pollResigned then sends EndQuorumEpoch."""
        rank = {v: i for i, v in enumerate(self.voters)}  # `voters` lists them by id
        successors = self._leading().voters_by_descending_fetch_offset(self._others(), rank)
        out.emit(RaftResign(self.quorum.epoch, reason))
        self._stop_leading(now_ms, out)
        self.quorum.become_resigned(now_ms)
        self._begin_end_quorum_epoch(successors, now_ms, out)

    def _begin_end_quorum_epoch(self, successors: tuple[str, ...], now_ms: float, out: Output) -> None:
        """Become a Resigned leader that tells every other voter (ResignedState: all unacknowledged)."""
        self.resigned = ResignedState(successors)
        self._send_end_quorum_epoch(self._others(), now_ms, out)

    def _send_end_quorum_epoch(self, voters: list[str], now_ms: float, out: Output) -> None:
        req = EndQuorumEpoch(self.quorum.epoch, self.local, self.resigned.preferred_successors)
        for voter in voters:
            self.resigned.unacked_sent_at[voter] = now_ms
            self._send(out, voter, req)

    def _end_quorum_retry_at(self) -> float | None:
        if self.quorum.state is not RaftState.RESIGNED or self.resigned is None:
            return None
        return self.resigned.retry_at(self.config.request_timeout_ms)

    def _resend_end_quorum_epoch(self, now_ms: float, out: Output) -> None:
        """Send EndQuorumEpoch again to every voter that has not acknowledged it within
        controller.quorum.request.timeout.ms (pollResigned -> maybeSendRequests to
        ResignedState.unackedVoters; RequestManager makes a timed-out voter ready again)."""
        if self.resigned is None:
            return
        due = self.resigned.due(now_ms, self.config.request_timeout_ms)
        if due:
            self._send_end_quorum_epoch(due, now_ms, out)

    def _on_end_quorum_epoch_response(self, src: str, resp: EndQuorumEpochResponse, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.handleEndQuorumEpochResponse: a newer epoch or leader is learned as from
        any response (maybeHandleCommonResponse); otherwise the voter has acknowledged the
        resignation and is not sent it again (ResignedState.acknowledgeResignation)."""
        q = self.quorum
        if resp.epoch < q.epoch or self._maybe_transition(resp.leader, resp.epoch, now_ms, out):
            return
        if q.state is RaftState.RESIGNED and resp.error is None and self.resigned is not None:
            self.resigned.acknowledge(src)

    def _on_end_quorum_epoch(self, src: str, req: EndQuorumEpoch, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.handleEndQuorumEpochRequest: refuse an older epoch; learn the epoch and
        leader as from any message (maybeTransition: a newer epoch makes this voter a follower of
        the resigned leader); a follower of that leader then canvasses after the backoff for its
        rank among the successors instead of its fetch timeout (FollowerState.overrideFetchTimeout)."""
        q = self.quorum
        if req.epoch < q.epoch:
            self._send(out, src, EndQuorumEpochResponse(q.epoch, q.leader, FENCED_LEADER_EPOCH))
            return
        self._maybe_transition(req.leader, req.epoch, now_ms, out)
        if q.state is RaftState.FOLLOWER and q.leader == req.leader:
            self._back_off_for_succession(req.preferred_successors, now_ms, out)
        self._send(out, src, EndQuorumEpochResponse(q.epoch, q.leader, None), durable=q.persist_pending)

    def _back_off_for_succession(self, successors: tuple[str, ...], now_ms: float, out: Output) -> None:
        """KafkaRaftClient.endEpochElectionBackoff: this voter's place among the successors (their
        number when it is not named) sets its backoff; the fetch timeout then ends after it, and
        tick canvasses: Prospective with Pre-Vote, Candidate without (`_start_election`)."""
        q = self.quorum
        rank = successors.index(self.local) if self.local in successors else len(successors)
        backoff = strict_exponential_election_backoff_ms(rank, len(successors), self.config.election_backoff_max_ms)
        q.fetch_deadline_ms = now_ms + backoff
        out.emit(RaftEndQuorumEpoch(q.epoch, rank, backoff))
