"""One KRaft node (voter or observer): pull-based replication, elections with Pre-Vote, Check Quorum.

Kafka's KafkaRaftClient, by state: this module keeps what every state shares (start, `handle`,
`tick`, `_maybe_transition`, graceful shutdown); `tick` calls the state's poll (pollLeader,
pollFollower, ...), and each state's poll and handlers are in a module of its own, mixed into
`RaftNode`: raft_election.py (Unattached, Prospective, Candidate), raft_leader.py
(Leader), raft_resignation.py (Resigned, EndQuorumEpoch), raft_fetching.py (Follower, observer).
What a state holds is an object that exists only in that state: LeaderState (leader_state.py),
ElectionRound and ResignedState (raft_states.py); QuorumState (quorum_state.py) holds and persists
the epoch, the vote and the leader.

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

from .leader_state import LeaderState
from .messages import (
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
from .raft_election import Elections
from .raft_fetching import Fetching
from .raft_leader import Leadership, _Flushed
from .raft_log import RaftLog
from .raft_resignation import Resignation
from .raft_states import ElectionRound, FetchState, GracefulShutdown, ResignedState

__all__ = ["RaftConfig", "RaftListener", "RaftNode"]


class RaftNode(Leadership, Elections, Resignation, Fetching):
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
        # Follower / observer fetching (kept for the node's life: raft_states.FetchState).
        self.fetching = FetchState(next_observer_fetch_ms=now_ms)
        # What a state holds, None outside it: the leader's (leader_state.py), a Prospective's or
        # Candidate's election round, a Resigned leader's EndQuorumEpoch (raft_states.py).
        self.leader_state: LeaderState | None = None
        self.election: ElectionRound | None = None
        self.resigned: ResignedState | None = None
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

    # --- sending ----------------------------------------------------------------------------

    def _send(self, out: Output, dst: str, payload: Any, *, durable: bool = False) -> None:
        """`durable`: the message vouches for what this node persisted (a vote, an epoch, a fetch
        offset), so it leaves only once that is flushed, when KRaft voters fsync."""
        after_flush = durable and self.config.raft_fsync and self.is_voter
        out.send(Envelope(self.local, dst, payload, after_flush))

    def _others(self) -> list[str]:
        return [v for v in self.voters if v != self.local]

    # --- start and time -----------------------------------------------------------------------

    def start(self, now_ms: float, out: Output) -> None:
        self._drain_transitions(out)
        q = self.quorum
        if self.is_voter and len(self.voters) == 1 and q.state in (RaftState.UNATTACHED, RaftState.FOLLOWER, RaftState.RESIGNED):
            # Kafka's KafkaRaftClient.initialize: "When there is only a single voter, become leader
            # immediately" -- Prospective, whose own pre-vote is a majority, then Candidate of
            # epoch + 1, whose own vote is one too, then Leader; no election timeout is waited for.
            self._start_election(now_ms, out)
        elif q.state is RaftState.CANDIDATE:
            # Restarted as the Candidate it was (QuorumState.initialize): resume the election of
            # the same epoch (KafkaRaftClient.initialize -> onBecomeCandidate, then pollCandidate
            # sends the vote requests).
            self._request_votes(pre_vote=False, now_ms=now_ms, out=out)
            self._maybe_win_election(now_ms, out)
        elif q.state is RaftState.FOLLOWER:
            self._send_fetch(now_ms, out)
        elif q.state is RaftState.RESIGNED:
            # QuorumState.initialize: a leader restarts Resigned with no preferred successors (it
            # saw no fetches), and pollResigned sends EndQuorumEpoch to every other voter all the same.
            self._begin_end_quorum_epoch((), now_ms, out)
        self._drain_transitions(out)

    def next_deadline(self) -> float | None:
        q = self.quorum
        ls = self.leader_state
        candidates = [self._end_quorum_retry_at()]
        if ls is not None:
            candidates += [ls.check_quorum_deadline_ms, ls.linger_deadline_ms, ls.begin_quorum_epoch_at_ms]
            candidates.append(ls.next_parked_deadline())
        if self._shutting_down():
            candidates.append(self.shutdown.deadline_ms)
        else:
            # A voter shutting down starts no election and leaves none by timing out (below, tick).
            candidates += [q.election_deadline_ms, q.fetch_deadline_ms, q.backoff_until_ms]
        retry = self._vote_retry_at()
        if retry is not None:
            candidates.append(retry)
        f = self.fetching
        if (q.state is RaftState.FOLLOWER or not self.is_voter) and f.in_flight_since is not None:
            candidates.append(f.in_flight_since + self.config.request_timeout_ms)
        if not self.is_voter and f.in_flight_since is None:
            candidates.append(f.next_observer_fetch_ms)
        present = [c for c in candidates if c is not None]
        return min(present) if present else None

    def tick(self, now_ms: float, out: Output) -> None:
        # KafkaRaftClient.poll: maybeCompleteShutdown first; a finished shutdown polls nothing more.
        if self._poll_shutdown(now_ms, out):
            self._drain_transitions(out)
            return
        s = self.quorum.state
        # KafkaRaftClient's poll<State> methods, each in its state's module: while shutting down, a
        # voter keeps asking for votes or repeating EndQuorumEpoch, but no timeout moves it to
        # another state (`timeouts`).
        timeouts = not self._shutting_down()
        if s is RaftState.LEADER:
            self._poll_leader(now_ms, out)
        elif s is RaftState.FOLLOWER:
            self._poll_follower(now_ms, out)
        elif s is RaftState.CANDIDATE:
            self._poll_candidate(now_ms, out, timeouts)
        elif s is RaftState.PROSPECTIVE:
            self._poll_prospective(now_ms, out, timeouts)
        elif s is RaftState.RESIGNED:
            self._poll_resigned(now_ms, out, timeouts)
        elif s is RaftState.UNATTACHED:
            self._poll_unattached(now_ms, out, timeouts)
        if not self.is_voter:
            self._observer_poll(now_ms, out)
        self._drain_transitions(out)

    # --- messages -----------------------------------------------------------------------------

    def handle(self, env: Envelope, now_ms: float, out: Output) -> bool:
        """Handle a Raft message; False if the payload is not one."""
        p = env.payload
        if isinstance(p, FetchRequest):
            self._on_fetch_request(env.src, p, now_ms, out)
        elif isinstance(p, FetchResponse):
            self._on_fetch_response(env.src, p, now_ms, out)
        elif isinstance(p, VoteRequest):
            self._on_vote_request(env.src, p, now_ms, out)
        elif isinstance(p, VoteResponse):
            self._on_vote_response(env.src, p, now_ms, out)
        elif isinstance(p, BeginQuorumEpoch):
            self._maybe_transition(p.leader, p.epoch, now_ms, out)
        elif isinstance(p, EndQuorumEpoch):
            self._on_end_quorum_epoch(env.src, p, now_ms, out)
        elif isinstance(p, EndQuorumEpochResponse):
            self._on_end_quorum_epoch_response(env.src, p, now_ms, out)
        elif isinstance(p, FlushCompleted) and isinstance(p.token, _Flushed):
            self._on_leader_flushed(p.token.end, now_ms, out)
        else:
            return False
        self._poll_shutdown(now_ms, out)  # the poll after a message (KafkaRaftClient.poll)
        self._drain_transitions(out)
        return True

    def _maybe_transition(self, leader: str | None, epoch: int, now_ms: float, out: Output) -> bool:
        """What any message with a (leader, epoch) teaches: a higher epoch, or the leader of ours.
        Returns True if the node changed state."""
        q = self.quorum
        if epoch > q.epoch:
            if leader is not None and leader != self.local:
                self._become_follower(epoch, leader, now_ms, out)
            else:
                self._leave_leadership(now_ms, out)
                q.become_unattached(epoch, now_ms, out)
            return True
        # Same epoch: follow a leader we did not know (Kafka's maybeTransition: "!hasLeader()"). A
        # Prospective that remembers its old leader does not go back to it on hearsay, else two
        # prospectives could bounce each other back to a dead leader forever.
        if epoch == q.epoch and leader is not None and leader != self.local and q.leader is None:
            self._become_follower(epoch, leader, now_ms, out)
            return True
        return False

    # --- follower transitions ------------------------------------------------------------------

    def _become_follower(self, epoch: int, leader: str, now_ms: float, out: Output) -> None:
        self._leave_leadership(now_ms, out)
        self.quorum.become_follower(epoch, leader, now_ms, out)
        self.fetching.in_flight_since = None
        self._send_fetch(now_ms, out)

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
            self._resign(now_ms, out, reason="shutdown")
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
