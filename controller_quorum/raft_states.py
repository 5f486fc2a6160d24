"""The data of a Raft node's states other than leading (leader_state.py), with the rules that
need nothing else: Kafka's ProspectiveState and CandidateState (the vote requests of the election
round), ResignedState (EndQuorumEpoch's successors and unacknowledged voters), the fetching of
FollowerState and of an observer, and KafkaRaftClient's GracefulShutdown.

Each state's object is a subclass that adds the node and the state's handlers: Prospective and
Candidate (raft_election.py), Resigned (raft_resignation.py), Fetcher (raft_fetching.py). The
node (raft.py) makes one when it enters the state and drops it when it leaves, so that "this field
means nothing outside that state" is the structure rather than a comment. The quorum's election
facts (epoch, vote, granted and rejected voters) stay in QuorumState (quorum_state.py), which
persists them."""

from __future__ import annotations

from dataclasses import dataclass, field


def due(deadline_ms: float | None, now_ms: float) -> bool:
    """Whether a state's timer, if set, has come due."""
    return deadline_ms is not None and now_ms >= deadline_ms


@dataclass
class ElectionRound:
    """A Prospective's or Candidate's requests of the current round: when the (pre-)vote request to
    each other voter was last sent. One left unanswered for controller.quorum.request.timeout.ms is
    sent again (Kafka's maybeSendVoteRequests with RequestManager: a timed-out request makes the
    connection ready again). A new round (a new epoch or a new pre-vote) starts empty (Kafka's
    resetConnections on becoming a nominee)."""

    sent_at: dict[str, float] = field(default_factory=dict)

    def unanswered(self, others: list[str], answered: set[str]) -> list[str]:
        """The voters asked in this round that have not answered, in voter order."""
        return [v for v in others if v not in answered and v in self.sent_at]

    def retry_at(self, unanswered: list[str], request_timeout_ms: float) -> float | None:
        pending = [self.sent_at[v] for v in unanswered]
        return min(pending) + request_timeout_ms if pending else None

    def due(self, unanswered: list[str], now_ms: float, request_timeout_ms: float) -> list[str]:
        return [v for v in unanswered if now_ms >= self.sent_at[v] + request_timeout_ms]


@dataclass
class ResignedState:
    """A leader that gave up its epoch (Check Quorum, shutdown, or a restart as Resigned): the
    successors named in its EndQuorumEpoch, by descending fetch offset, and when that was last sent
    to each voter that has not acknowledged it (ResignedState.preferredSuccessors, unackedVoters)."""

    preferred_successors: tuple[str, ...]
    unacked_sent_at: dict[str, float] = field(default_factory=dict)

    def retry_at(self, request_timeout_ms: float) -> float | None:
        if not self.unacked_sent_at:
            return None
        return min(self.unacked_sent_at.values()) + request_timeout_ms

    def due(self, now_ms: float, request_timeout_ms: float) -> list[str]:
        return [v for v, at in self.unacked_sent_at.items() if now_ms >= at + request_timeout_ms]

    def acknowledge(self, voter: str) -> None:
        """ResignedState.acknowledgeResignation: the voter is not sent EndQuorumEpoch again."""
        self.unacked_sent_at.pop(voter, None)


@dataclass
class FetchState:
    """A follower's or observer's fetching. Invariant: at most one fetch is in flight, the one with
    `request_id`; an answer to an older one is ignored. Unlike the other states' objects, the node
    keeps it for its whole life, so that request ids never repeat: a voter's fetch in flight is
    forgotten (`in_flight_since` None) whenever it stops following, and an observer always fetches
    (from whichever voter it believes leads)."""

    # When the fetch in flight was sent (None: none in flight); past request.timeout.ms it is
    # taken as lost and sent again.
    in_flight_since: float | None = None
    request_id: int = 0
    # Observer: when it next asks a voter, and which voter it asks next when no leader is known.
    next_observer_fetch_ms: float | None = None
    observer_rotation: int = 0

    def timed_out(self, now_ms: float, request_timeout_ms: float) -> bool:
        return self.in_flight_since is not None and now_ms >= self.in_flight_since + request_timeout_ms

    def next_request_id(self, now_ms: float) -> int:
        """A new fetch leaves now: it replaces the one in flight, if any."""
        self.request_id += 1
        self.in_flight_since = now_ms
        return self.request_id


@dataclass
class GracefulShutdown:
    """KafkaRaftClient.GracefulShutdown: when the node stops waiting for another leader, and how
    the shutdown ended ("completed", "timed_out"; None: not yet)."""

    deadline_ms: float
    outcome: str | None = None

    @property
    def running(self) -> bool:
        return self.outcome is None
