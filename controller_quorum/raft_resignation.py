"""The Resigned state of a Raft voter, and the voters it tells: EndQuorumEpoch and the successors'
election backoff (KafkaRaftClient.transitionToResigned, pollResigned, handleEndQuorumEpochRequest,
handleEndQuorumEpochResponse, endEpochElectionBackoff; Kafka's ResignedState). A `Resigned` is the
ResignedState (raft_states.py: the successors, the unacknowledged voters) together with the
handlers of the state; the node makes one when it resigns or restarts Resigned and drops it when it
leaves the state (`RaftNode.become_resigned`, `_drain_transitions`).

Rules: a leader that resigns (Check Quorum, shutdown, or a restart as Resigned) sends
EndQuorumEpoch to the other voters, ranked by fetch offset, and sends it again to those that have
not acknowledged it; a follower of that leader canvasses after the election backoff for its rank
instead of its fetch timeout, the first at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.contract import Output
from observability.events import RaftEndQuorumEpoch

from .messages import FENCED_LEADER_EPOCH, EndQuorumEpoch, EndQuorumEpochResponse
from .quorum_state import RaftState
from .raft_states import ResignedState, due

if TYPE_CHECKING:
    from .raft import RaftNode


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


class Resigned(ResignedState):
    """A leader that gave up its epoch: ResignedState's data and the state's handlers."""

    def __init__(self, node: RaftNode, preferred_successors: tuple[str, ...]) -> None:
        super().__init__(preferred_successors)
        self.node = node

    @classmethod
    def begin(cls, node: RaftNode, preferred_successors: tuple[str, ...], now_ms: float, out: Output) -> Resigned:
        """Become a Resigned leader that tells every other voter (all unacknowledged)."""
        resigned = cls(node, preferred_successors)
        resigned.send_end_quorum_epoch(node.others(), now_ms, out)
        return resigned

    def poll(self, now_ms: float, out: Output, timeouts: bool) -> None:
        """KafkaRaftClient.pollResigned: EndQuorumEpoch again to the voters that have not
        acknowledged it; once the election timeout passes, canvass (with Pre-Vote, from Unattached
        of the next epoch at once, KIP-996; without, as a Candidate)."""
        node, q = self.node, self.node.quorum
        self.resend_end_quorum_epoch(now_ms, out)
        if timeouts and due(q.election_deadline_ms, now_ms):
            if node.config.prevote:
                q.become_unattached(q.epoch + 1, now_ms, out)
                q.election_deadline_ms = now_ms  # KIP-996: canvass at once
            else:
                node.become_candidate(now_ms, out)

    def send_end_quorum_epoch(self, voters: list[str], now_ms: float, out: Output) -> None:
        node = self.node
        req = EndQuorumEpoch(node.epoch, node.local, self.preferred_successors)
        for voter in voters:
            self.unacked_sent_at[voter] = now_ms
            node.send(out, voter, req)

    def end_quorum_retry_at(self) -> float | None:
        if self.node.quorum.state is not RaftState.RESIGNED:
            return None
        return self.retry_at(self.node.config.request_timeout_ms)

    def resend_end_quorum_epoch(self, now_ms: float, out: Output) -> None:
        """Send EndQuorumEpoch again to every voter that has not acknowledged it within
        controller.quorum.request.timeout.ms (pollResigned -> maybeSendRequests to
        ResignedState.unackedVoters; RequestManager makes a timed-out voter ready again)."""
        overdue = self.due(now_ms, self.node.config.request_timeout_ms)
        if overdue:
            self.send_end_quorum_epoch(overdue, now_ms, out)

    def on_end_quorum_epoch_response(self, src: str, resp: EndQuorumEpochResponse) -> None:
        """KafkaRaftClient.handleEndQuorumEpochResponse, once the node learned what the answer
        teaches of epochs and leaders: the voter has acknowledged the resignation and is not sent
        it again (ResignedState.acknowledgeResignation)."""
        if self.node.quorum.state is RaftState.RESIGNED and resp.error is None:
            self.acknowledge(src)


def answer_end_quorum_epoch(node: RaftNode, src: str, req: EndQuorumEpoch, now_ms: float, out: Output) -> None:
    """KafkaRaftClient.handleEndQuorumEpochRequest, in any state: refuse an older epoch; learn the
    epoch and leader as from any message (maybeTransition: a newer epoch makes this voter a
    follower of the resigned leader); a follower of that leader then canvasses after the backoff
    for its rank among the successors instead of its fetch timeout (FollowerState.overrideFetchTimeout)."""
    q = node.quorum
    if req.epoch < q.epoch:
        node.send(out, src, EndQuorumEpochResponse(q.epoch, q.leader, FENCED_LEADER_EPOCH))
        return
    node.maybe_transition(req.leader, req.epoch, now_ms, out)
    if q.state is RaftState.FOLLOWER and q.leader == req.leader:
        _back_off_for_succession(node, req.preferred_successors, now_ms, out)
    node.send(out, src, EndQuorumEpochResponse(q.epoch, q.leader, None), durable=q.persist_pending)


def _back_off_for_succession(node: RaftNode, successors: tuple[str, ...], now_ms: float, out: Output) -> None:
    """KafkaRaftClient.endEpochElectionBackoff: this voter's place among the successors (their
    number when it is not named) sets its backoff; the fetch timeout then ends after it, and the
    follower's poll canvasses: Prospective with Pre-Vote, Candidate without (`start_election`)."""
    q = node.quorum
    rank = successors.index(node.local) if node.local in successors else len(successors)
    backoff = strict_exponential_election_backoff_ms(rank, len(successors), node.config.election_backoff_max_ms)
    q.fetch_deadline_ms = now_ms + backoff
    out.emit(RaftEndQuorumEpoch(q.epoch, rank, backoff))
