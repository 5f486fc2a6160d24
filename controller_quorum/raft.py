"""One KRaft node (voter or observer): pull-based replication, elections with Pre-Vote, Check Quorum.

Kafka's KafkaRaftClient, by state. Each state is an object that holds that state's data and its
handlers, and exists only in that state: `Leader` (raft_leader.py: replica progress, parked
fetches, the high watermark), `Prospective` and `Candidate` (raft_election.py: the election
round), `Resigned` (raft_resignation.py: EndQuorumEpoch and its retries), and the `Fetcher` of a
follower or observer (raft_fetching.py, kept for the node's life so that request ids never
repeat). This module keeps what KafkaRaftClient keeps: start, `handle` (which passes each message
to the state that answers it), `tick` (the state's poll), `maybe_transition`, the transitions
that make and drop the state objects, and graceful shutdown. QuorumState (quorum_state.py) holds
and persists the epoch, the vote and the leader, and checks every transition.

The node never sends or writes by itself: every method takes the role's `Output` and appends to it.
The state machine on top (the controller, or a broker's metadata image) is a `RaftListener`; it is
told about committed entries only, in order, and about gaining or losing leadership.

Rules and where they come from:
- Followers fetch from the leader; a fetch at offset x confirms everything below x is on the
  follower's disk (KIP-595; the replication deep dive "Replication from leader"), so a voter's
  fetch is sent only after its appended entries are flushed (`raft_fsync`).
- The leader's high watermark is the offset a majority of voters (itself included, counting its own
  *flushed* end offset) have reached, and only moves past the epoch start offset, i.e. once an entry
  of its own epoch (the LeaderChange record) is committed; it never goes back.
- Divergence: the leader answers a fetch whose (offset, last fetched epoch) does not match its log
  with the end of that epoch in its own log; the follower truncates there and fetches again.
- Elections and Pre-Vote per KIP-996 (see quorum_state.py); Check Quorum: a leader that
  has not heard from a majority within 1.5 x controller.quorum.fetch.timeout.ms resigns.
- A leader that resigns (Check Quorum, shutdown, or a restart as Resigned) sends EndQuorumEpoch to
  the other voters, ranked by fetch offset; a follower of it canvasses after the election backoff
  for its rank instead of its fetch timeout, the first at once (KafkaRaftClient.pollResigned,
  handleEndQuorumEpochRequest).
- Graceful shutdown (KafkaRaftClient.shutdown): a leader resigns and keeps running, answering
  votes, until it knows another leader or the shutdown timeout passes; a follower stops at once.
"""

from __future__ import annotations

from typing import Any

from actors.contract import Envelope, FlushCompleted, Output, RandomSource
from observability.events import RaftRecovered, RaftShutdown, RaftStateChange

from .messages import (
    NOT_LEADER,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from .quorum_state import QuorumState, RaftState, Timing, decode_quorum_state
from .raft_config import RaftConfig, RaftListener
from .raft_election import Candidate, Prospective, answer_vote_request
from .raft_fetching import Fetcher
from .raft_leader import Flushed, Leader
from .raft_log import RaftLog
from .raft_resignation import Resigned, answer_end_quorum_epoch
from .raft_states import GracefulShutdown, due

__all__ = ["RaftConfig", "RaftListener", "RaftNode"]


class RaftNode:
    def __init__(
        self,
        local: str,
        voters: tuple[str, ...],
        config: RaftConfig,
        files: dict[str, bytes],
        rng: RandomSource,
        listener: RaftListener,
        out: Output,
        now_ms: float,
    ) -> None:
        self.local = local
        self.voters = voters
        self.is_voter = local in voters
        self.config = config
        self.listener = listener
        self.log = RaftLog.recover(files, out)
        stored = decode_quorum_state(files)
        out.emit(RaftRecovered(tuple(e.epoch for e in self.log.entries), tuple(self.log.crcs), 0 if stored is None else stored.epoch))
        self.quorum = QuorumState(
            local,
            voters,
            is_voter=self.is_voter,
            prevote=config.prevote,
            timing=Timing(config.election_timeout_ms, config.fetch_timeout_ms, config.election_backoff_max_ms),
            rng=rng,
        )
        self.quorum.initialize(stored, self.log.last_epoch, now_ms)
        # The high watermark this node knows (exclusive); None until learned. Applied entries are
        # exactly those below `applied`, which never exceeds the high watermark.
        self.high_watermark: int | None = None
        self.applied = 0
        # The states' objects. Invariants (kept by the transitions below and `_drain_transitions`):
        # `leader_state` is a Leader exactly while the quorum state is Leader; `election` is the
        # Prospective or Candidate of the round while in that state, else None; `resigned` is set
        # only while Resigned; `fetching` lives as long as the node.
        self.fetching = Fetcher(self, now_ms)
        self.leader_state: Leader | None = None
        self.election: Prospective | Candidate | None = None
        self.resigned: Resigned | None = None
        self.elections_won = 0
        # Graceful shutdown (KafkaRaftClient.GracefulShutdown), None until it begins.
        self.shutdown: GracefulShutdown | None = None

    # --- views ------------------------------------------------------------------------------

    @property
    def pending(self) -> list[Any]:
        """The records a leader queued for its next append (none when not leading)."""
        return self.leader_state.pending if self.leader_state is not None else []

    @property
    def state(self) -> RaftState:
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader(self) -> str | None:
        return self.quorum.leader

    def is_leader(self) -> bool:
        return self.quorum.state is RaftState.LEADER

    # --- what every state uses ------------------------------------------------------------------

    def send(self, out: Output, dst: str, payload: Any, *, durable: bool = False) -> None:
        """`durable`: the message vouches for what this node persisted (a vote, an epoch, a fetch
        offset), so it leaves only once that is flushed, when KRaft voters fsync."""
        after_flush = durable and self.config.raft_fsync and self.is_voter
        out.send(Envelope(self.local, dst, payload, after_flush))

    def others(self) -> list[str]:
        return [v for v in self.voters if v != self.local]

    def apply_committed(self, now_ms: float, out: Output) -> None:
        """Hand the listener every entry newly below the high watermark, in order."""
        hwm = self.high_watermark or 0
        if hwm > self.applied:
            entries = self.log.entries[self.applied : hwm]
            self.applied = hwm
            self.listener.on_commit(entries, now_ms, out)

    def append(self, records: list[Any], now_ms: float, out: Output) -> int | None:
        """Leader only: queue records; they are appended after controller.quorum.append.linger.ms.
        Returns the offset the last one will have, or None when not leader."""
        if self.leader_state is None:
            return None
        return self.leader_state.append(records, now_ms)

    # --- start and time -----------------------------------------------------------------------

    def start(self, now_ms: float, out: Output) -> None:
        self._drain_transitions(out)
        q = self.quorum
        if self.is_voter and len(self.voters) == 1 and q.state in (RaftState.UNATTACHED, RaftState.FOLLOWER, RaftState.RESIGNED):
            # Kafka's KafkaRaftClient.initialize: "When there is only a single voter, become leader
            # immediately" -- Prospective, whose own pre-vote is a majority, then Candidate of
            # epoch + 1, whose own vote is one too, then Leader; no election timeout is waited for.
            self.start_election(now_ms, out)
        elif q.state is RaftState.CANDIDATE:
            # Restarted as the Candidate it was (QuorumState.initialize): resume the election of
            # the same epoch (KafkaRaftClient.initialize -> onBecomeCandidate, then pollCandidate
            # sends the vote requests).
            self._canvass(Candidate(self), now_ms, out)
        elif q.state is RaftState.FOLLOWER:
            self.fetching.send_fetch(now_ms, out)
        elif q.state is RaftState.RESIGNED:
            # QuorumState.initialize: a leader restarts Resigned with no preferred successors (it
            # saw no fetches), and pollResigned sends EndQuorumEpoch to every other voter all the same.
            self.resigned = Resigned.begin(self, (), now_ms, out)
        self._drain_transitions(out)

    def next_deadline(self) -> float | None:
        q = self.quorum
        candidates: list[float | None] = []
        if self.resigned is not None:
            candidates.append(self.resigned.end_quorum_retry_at())
        if self.leader_state is not None:
            candidates += self.leader_state.deadlines()
        if self._shutting_down():
            candidates.append(self.shutdown.deadline_ms)
        else:
            # A voter shutting down starts no election and leaves none by timing out (below, tick).
            candidates += [q.election_deadline_ms, q.fetch_deadline_ms, q.backoff_until_ms]
        if self.election is not None:
            candidates.append(self.election.vote_retry_at())
        candidates += self.fetching.deadlines()
        present = [c for c in candidates if c is not None]
        return min(present) if present else None

    def tick(self, now_ms: float, out: Output) -> None:
        # KafkaRaftClient.poll: maybeCompleteShutdown first; a finished shutdown polls nothing more.
        if self._poll_shutdown(now_ms, out):
            self._drain_transitions(out)
            return
        s = self.quorum.state
        # The state's poll (KafkaRaftClient's poll<State>): while shutting down, a voter keeps
        # asking for votes or repeating EndQuorumEpoch, but no timeout moves it to another state
        # (`timeouts`).
        timeouts = not self._shutting_down()
        if s is RaftState.LEADER:
            self.leader_state.poll(now_ms, out)
        elif s is RaftState.FOLLOWER:
            self.fetching.poll_follower(now_ms, out)
        elif s in (RaftState.CANDIDATE, RaftState.PROSPECTIVE):
            self.election.poll(now_ms, out, timeouts)
        elif s is RaftState.RESIGNED:
            self.resigned.poll(now_ms, out, timeouts)
        elif s is RaftState.UNATTACHED:
            # KafkaRaftClient.pollUnattached: a voter whose election timeout passed canvasses.
            if timeouts and self.is_voter and due(self.quorum.election_deadline_ms, now_ms):
                self.start_election(now_ms, out)
        if not self.is_voter:
            self.fetching.poll_observer(now_ms, out)
        self._drain_transitions(out)

    # --- messages -----------------------------------------------------------------------------

    def handle(self, env: Envelope, now_ms: float, out: Output) -> bool:
        """Handle a Raft message; False if the payload is not one. Requests every state answers
        (votes, EndQuorumEpoch, BeginQuorumEpoch) are answered here or by their module's function;
        the rest go to the state that expects them."""
        p, src = env.payload, env.src
        if isinstance(p, FetchRequest):
            if self.leader_state is not None:
                self.leader_state.on_fetch_request(src, p, now_ms, out)
            else:
                self.send(out, src, FetchResponse(self.epoch, self.leader, NOT_LEADER, request_id=p.request_id))
        elif isinstance(p, FetchResponse):
            self.fetching.on_fetch_response(src, p, now_ms, out)
        elif isinstance(p, VoteRequest):
            answer_vote_request(self, src, p, now_ms, out)
        elif isinstance(p, VoteResponse):
            # What any response teaches first (maybeHandleCommonResponse), then the nominee counts it.
            if p.epoch >= self.epoch and not self.maybe_transition(p.leader, p.epoch, now_ms, out) and self.election is not None:
                self.election.on_vote_response(src, p, now_ms, out)
        elif isinstance(p, BeginQuorumEpoch):
            self.maybe_transition(p.leader, p.epoch, now_ms, out)
        elif isinstance(p, EndQuorumEpoch):
            answer_end_quorum_epoch(self, src, p, now_ms, out)
        elif isinstance(p, EndQuorumEpochResponse):
            if p.epoch >= self.epoch and not self.maybe_transition(p.leader, p.epoch, now_ms, out) and self.resigned is not None:
                self.resigned.on_end_quorum_epoch_response(src, p)
        elif isinstance(p, FlushCompleted) and isinstance(p.token, Flushed):
            if self.leader_state is not None:
                self.leader_state.on_flushed(p.token.end, now_ms, out)
        else:
            return False
        self._poll_shutdown(now_ms, out)  # the poll after a message (KafkaRaftClient.poll)
        self._drain_transitions(out)
        return True

    def maybe_transition(self, leader: str | None, epoch: int, now_ms: float, out: Output) -> bool:
        """What any message with a (leader, epoch) teaches: a higher epoch, or the leader of ours.
        Returns True if the node changed state."""
        q = self.quorum
        if epoch > q.epoch:
            if leader is not None and leader != self.local:
                self.become_follower(epoch, leader, now_ms, out)
            else:
                self.leave_leadership(now_ms, out)
                q.become_unattached(epoch, now_ms, out)
            return True
        # Same epoch: follow a leader we did not know (Kafka's maybeTransition: "!hasLeader()"). A
        # Prospective that remembers its old leader does not go back to it on hearsay, else two
        # prospectives could bounce each other back to a dead leader forever.
        if epoch == q.epoch and leader is not None and leader != self.local and q.leader is None:
            self.become_follower(epoch, leader, now_ms, out)
            return True
        return False

    # --- transitions (KafkaRaftClient.transitionTo<State>): each makes the new state's object ------

    def start_election(self, now_ms: float, out: Output) -> None:
        """A voter's fetch or election timeout: canvass as a Prospective (Pre-Vote, KIP-996), or
        straight as a Candidate without it."""
        if self.config.prevote:
            self.quorum.become_prospective(now_ms)
            self._canvass(Prospective(self), now_ms, out)
        else:
            self.become_candidate(now_ms, out)

    def become_candidate(self, now_ms: float, out: Output) -> None:
        self.quorum.become_candidate(now_ms, out)
        self._canvass(Candidate(self), now_ms, out)

    def _canvass(self, nominee: Prospective | Candidate, now_ms: float, out: Output) -> None:
        self.election = nominee
        nominee.open(now_ms, out)

    def become_leader(self, now_ms: float, out: Output) -> None:
        self.quorum.become_leader(now_ms, out)
        self.elections_won += 1
        self.leader_state = Leader(self, now_ms)
        # A new leader does not know the high watermark until an entry of its epoch commits (its
        # follower-time value may be stale, section 6.4 of the protocol description for Raft too).
        self.high_watermark = None
        self._drain_transitions(out)
        self.leader_state.begin(now_ms, out)

    def leave_leadership(self, now_ms: float, out: Output) -> None:
        """Leadership ends (a higher epoch, another leader, or resigning): the Leader answers its
        parked fetches NOT_LEADER and is dropped with its queued records."""
        if self.leader_state is None:
            return
        self.leader_state.stop(out)
        self.leader_state = None
        self.listener.on_lose_leadership(now_ms, out)

    def become_resigned(self, successors: tuple[str, ...], now_ms: float, out: Output) -> None:
        self.leave_leadership(now_ms, out)
        self.quorum.become_resigned(now_ms)
        self.resigned = Resigned.begin(self, successors, now_ms, out)

    def become_follower(self, epoch: int, leader: str, now_ms: float, out: Output) -> None:
        self.leave_leadership(now_ms, out)
        self.quorum.become_follower(epoch, leader, now_ms, out)
        self.fetching.in_flight_since = None
        self.fetching.send_fetch(now_ms, out)

    def _drain_transitions(self, out: Output) -> None:
        """Tell the state changes since the last drain, and drop what the states left behind held
        (a voter's fetch in flight once it no longer follows, an election round, a resignation)."""
        q = self.quorum
        if q.transitions and q.state is not RaftState.FOLLOWER and self.is_voter:
            self.fetching.in_flight_since = None
        if q.state not in (RaftState.PROSPECTIVE, RaftState.CANDIDATE):
            self.election = None
        if q.state is not RaftState.RESIGNED:
            self.resigned = None
        for frm, to, epoch in q.transitions:
            out.emit(RaftStateChange(frm, to, epoch))
        q.transitions.clear()
        q.persist_pending = False

    # --- graceful shutdown ------------------------------------------------------------------------

    def begin_shutdown(self, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.shutdown(timeoutMs): start a graceful shutdown that ends within
        `shutdown_timeout_ms`. The caller stops the process once `shutdown_outcome` is set, here or
        in a later tick or handle."""
        if self.shutdown is None:
            self.shutdown = GracefulShutdown(now_ms + self.config.shutdown_timeout_ms)
        self._poll_shutdown(now_ms, out)
        self._drain_transitions(out)

    @property
    def shutdown_outcome(self) -> str | None:
        """How the graceful shutdown ended ("completed", "timed_out"), None while it has not."""
        return None if self.shutdown is None else self.shutdown.outcome

    def _shutting_down(self) -> bool:
        return self.shutdown is not None and self.shutdown.running

    def _poll_shutdown(self, now_ms: float, out: Output) -> bool:
        """KafkaRaftClient.maybeCompleteShutdown, then pollLeader: the shutdown ends once timed out
        or once it may complete (`_shutdown_may_complete`); until then a leader resigns and keeps
        running Resigned. Returns whether the shutdown has ended."""
        if not self._shutting_down():
            return self.shutdown_outcome is not None
        if now_ms >= self.shutdown.deadline_ms:
            self._end_shutdown("timed_out", out)
        elif self._shutdown_may_complete():
            self._end_shutdown("completed", out)
        elif self.quorum.state is RaftState.LEADER:
            self.leader_state.resign(now_ms, out, reason="shutdown")
        return self.shutdown_outcome is not None

    def _shutdown_may_complete(self) -> bool:
        """maybeCompleteShutdown's condition to stop before the timeout: an observer, the only voter,
        or a voter that knows another node leads (QuorumState.hasRemoteLeader: a follower, or a
        Prospective that remembers its leader). An Unattached voter, a Candidate or a Resigned
        leader goes on until a leader makes itself known, so that its vote can still help elect one."""
        q = self.quorum
        only_voter = self.voters == (self.local,)
        return not self.is_voter or only_voter or q.leader not in (None, self.local)

    def _end_shutdown(self, outcome: str, out: Output) -> None:
        self._drain_transitions(out)  # the state it stops in is told first
        self.shutdown.outcome = outcome
        out.emit(RaftShutdown(outcome, self.quorum.state.value, self.quorum.epoch))
