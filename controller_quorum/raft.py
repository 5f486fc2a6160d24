"""One KRaft node (voter or observer): pull-based replication, elections with Pre-Vote, Check Quorum.

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

from dataclasses import dataclass
from typing import Any, Protocol

from actors.contract import Envelope, Flush, FlushCompleted, Output, RandomSource
from observability.events import (
    RaftEndQuorumEpoch,
    RaftHighWatermark,
    RaftLeaderElected,
    RaftRecovered,
    RaftResign,
    RaftShutdown,
    RaftStateChange,
    RaftTruncate,
    RaftVote,
)

from .leader_state import LeaderState
from .messages import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER,
    UNKNOWN_LEADER_EPOCH,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderChange,
    LogEntry,
    VoteRequest,
    VoteResponse,
)
from .quorum_state import QuorumState, RaftState, Timing, decode_quorum_state
from .raft_log import RaftLog

MAX_FETCH_ENTRIES = 2_000


@dataclass(frozen=True)
class RaftConfig:
    election_timeout_ms: int = 1_000
    fetch_timeout_ms: int = 2_000
    election_backoff_max_ms: int = 1_000
    append_linger_ms: int = 25
    request_timeout_ms: int = 2_000  # controller.quorum.request.timeout.ms
    fetch_max_wait_ms: int = 500  # how long the leader parks a fetch with nothing to return
    observer_retry_ms: int = 250
    prevote: bool = True
    check_quorum: bool = True
    raft_fsync: bool = True
    # How long a graceful shutdown waits for another leader before stopping anyway: Kafka's
    # KafkaRaftClientDriver.initiateShutdown calls KafkaRaftClient.shutdown(5000), a fixed value.
    shutdown_timeout_ms: int = 5_000


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


def _due(deadline_ms: float | None, now_ms: float) -> bool:
    return deadline_ms is not None and now_ms >= deadline_ms


class RaftListener(Protocol):
    def on_commit(self, entries: list[LogEntry], now_ms: float, out: Output) -> None: ...

    def on_become_leader(self, epoch: int, now_ms: float, out: Output) -> None: ...

    def on_lose_leadership(self, now_ms: float, out: Output) -> None: ...


class _Flushed:
    """Token of the leader's log flushes: `end` is the log end offset the flush covers."""

    __slots__ = ("end",)

    def __init__(self, end: int) -> None:
        self.end = end


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
        # Follower / observer fetching
        self.fetch_in_flight_since: float | None = None
        self.fetch_request_id = 0
        self.next_observer_fetch_ms: float | None = now_ms
        self._observer_rotation = 0
        # Leader: what it holds while it leads (None otherwise; leader_state.py).
        self.leader_state: LeaderState | None = None
        self.elections_won = 0
        # Prospective/Candidate: when the (pre-)vote request to each other voter was last sent. One
        # left unanswered for request_timeout_ms is sent again (Kafka's maybeSendVoteRequests with
        # RequestManager: a timed-out request makes the connection ready again).
        self.vote_sent_at: dict[str, float] = {}
        # Resigned: the successors named in its EndQuorumEpoch, and when that was last sent to each
        # voter that has not acknowledged it (ResignedState.preferredSuccessors, unackedVoters).
        self.preferred_successors: tuple[str, ...] = ()
        self.end_quorum_sent_at: dict[str, float] = {}
        # Graceful shutdown (KafkaRaftClient.GracefulShutdown): when it stops waiting for another
        # leader (None: not shutting down), and how it ended ("completed", "timed_out"; None: not yet).
        self.shutdown_deadline_ms: float | None = None
        self.shutdown_outcome: str | None = None

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
            if ls.parked:
                candidates.append(min(deadline for _, _, deadline in ls.parked.values()))
        if self._shutting_down():
            candidates.append(self.shutdown_deadline_ms)
        else:
            # A voter shutting down starts no election and leaves none by timing out (below, tick).
            candidates += [q.election_deadline_ms, q.fetch_deadline_ms, q.backoff_until_ms]
        retry = self._vote_retry_at()
        if retry is not None:
            candidates.append(retry)
        fetching = q.state is RaftState.FOLLOWER or not self.is_voter
        if fetching and self.fetch_in_flight_since is not None:
            candidates.append(self.fetch_in_flight_since + self.config.request_timeout_ms)
        if not self.is_voter and self.fetch_in_flight_since is None:
            candidates.append(self.next_observer_fetch_ms)
        present = [c for c in candidates if c is not None]
        return min(present) if present else None

    def tick(self, now_ms: float, out: Output) -> None:
        # KafkaRaftClient.poll: maybeCompleteShutdown first; a finished shutdown polls nothing more.
        if self._poll_shutdown(now_ms, out):
            self._drain_transitions(out)
            return
        q = self.quorum
        s = q.state
        # KafkaRaftClient's poll<State> methods: while shutting down, a voter keeps asking for votes
        # or repeating EndQuorumEpoch, but no timeout moves it to another state.
        timeouts = not self._shutting_down()
        if s is RaftState.LEADER:
            ls = self._leading()
            if ls.linger_deadline_ms is not None and now_ms >= ls.linger_deadline_ms:
                self._append_pending(now_ms, out)
            self._expire_parked(now_ms, out)
            if ls.begin_quorum_epoch_at_ms is not None and now_ms >= ls.begin_quorum_epoch_at_ms:
                self._send_begin_quorum_epoch(now_ms, out)
            if ls.check_quorum_deadline_ms is not None and now_ms >= ls.check_quorum_deadline_ms:
                self._resign(now_ms, out, reason="check_quorum")
        elif s is RaftState.FOLLOWER:
            if q.fetch_deadline_ms is not None and now_ms >= q.fetch_deadline_ms and self.is_voter:
                self._start_election(now_ms, out)
            elif self.fetch_in_flight_since is not None and now_ms >= self.fetch_in_flight_since + self.config.request_timeout_ms:
                self._send_fetch(now_ms, out)  # the request or its answer was lost: ask again
        elif s is RaftState.CANDIDATE:
            if timeouts and (_due(q.backoff_until_ms, now_ms) or _due(q.election_deadline_ms, now_ms)):
                self._start_election(now_ms, out)
            else:
                self._resend_vote_requests(now_ms, out)
        elif s is RaftState.PROSPECTIVE:
            if timeouts and _due(q.election_deadline_ms, now_ms):
                self._lose_prevote(now_ms, out)
            else:
                self._resend_vote_requests(now_ms, out)
        elif s is RaftState.RESIGNED:
            self._resend_end_quorum_epoch(now_ms, out)
            if timeouts and _due(q.election_deadline_ms, now_ms):
                if self.config.prevote:
                    q.become_unattached(q.epoch + 1, now_ms, out)
                    q.election_deadline_ms = now_ms  # KIP-996: canvass at once
                else:
                    self._become_candidate(now_ms, out)
        elif s is RaftState.UNATTACHED:
            if timeouts and self.is_voter and _due(q.election_deadline_ms, now_ms):
                self._start_election(now_ms, out)
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

    # --- elections --------------------------------------------------------------------------

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
        self.vote_sent_at = {}
        self._send_vote_requests(self._others(), pre_vote, now_ms, out)

    def _send_vote_requests(self, voters: list[str], pre_vote: bool, now_ms: float, out: Output) -> None:
        q = self.quorum
        req = VoteRequest(q.epoch, self.local, self.log.last_epoch, self.log.end_offset, pre_vote)
        for voter in voters:
            self.vote_sent_at[voter] = now_ms
            self._send(out, voter, req, durable=not pre_vote)

    def _awaiting_votes(self) -> bool:
        """Whether this node still asks for votes: a Prospective, or a Candidate that has not lost
        (Kafka's maybeSendVoteRequests: "as long as we still have a chance to win the election")."""
        q = self.quorum
        return q.state is RaftState.PROSPECTIVE or (q.state is RaftState.CANDIDATE and q.backoff_until_ms is None)

    def _unanswered_voters(self) -> list[str]:
        q = self.quorum
        return [v for v in self._others() if v not in q.granted and v not in q.rejected and v in self.vote_sent_at]

    def _vote_retry_at(self) -> float | None:
        if not self._awaiting_votes():
            return None
        pending = [self.vote_sent_at[v] for v in self._unanswered_voters()]
        return min(pending) + self.config.request_timeout_ms if pending else None

    def _resend_vote_requests(self, now_ms: float, out: Output) -> None:
        """Send the (pre-)vote request again to every voter whose answer has not come within
        controller.quorum.request.timeout.ms: the request or its answer was lost (Kafka's
        RequestManager.ConnectionState.hasRequestTimedOut makes the voter ready again, and
        pollProspective/pollCandidate -> maybeSendVoteRequests re-sends to the unrecorded voters
        while the election timeout runs)."""
        if not self._awaiting_votes():
            return
        due = [v for v in self._unanswered_voters() if now_ms >= self.vote_sent_at[v] + self.config.request_timeout_ms]
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

    # --- leadership ---------------------------------------------------------------------------

    def _on_become_leader(self, now_ms: float, out: Output) -> None:
        q = self.quorum
        self.elections_won += 1
        # Check Quorum watches the other voters; a single voter is its own majority.
        watch = self.config.check_quorum and len(self.voters) > 1
        ls = self.leader_state = LeaderState(self.log.end_offset, now_ms + 1.5 * self.config.fetch_timeout_ms if watch else None)
        # A new leader does not know the high watermark until an entry of its epoch commits (its
        # follower-time value may be stale, section 6.4 of the protocol description for Raft too).
        self.high_watermark = None
        self._drain_transitions(out)
        out.emit(RaftLeaderElected(q.epoch, ls.epoch_start_offset))
        # The high watermark only moves once an entry of this epoch is committed: write one now.
        ls.pending.insert(0, LeaderChange(self.local, q.epoch, self.voters))
        self._append_pending(now_ms, out)
        self._send_begin_quorum_epoch(now_ms, out)
        self.listener.on_become_leader(q.epoch, now_ms, out)

    def _send_begin_quorum_epoch(self, now_ms: float, out: Output) -> None:
        """Tell every other voter this node leads the epoch: at election, then every half fetch
        timeout while it leads (Kafka's KafkaRaftClient.maybeSendBeginQuorumEpochRequests,
        LeaderState's beginQuorumEpochTimer of fetchTimeoutMs / 2). The repeats reach a voter that
        missed the first (cut off, or down): a leader of an older epoch that never heard of this
        one steps down when one arrives, Check Quorum on or off."""
        q = self.quorum
        for voter in self._others():
            self._send(out, voter, BeginQuorumEpoch(q.epoch, self.local), durable=True)
        self._leading().begin_quorum_epoch_at_ms = now_ms + self.config.fetch_timeout_ms / 2

    def _leave_leadership(self, now_ms: float, out: Output) -> None:
        if self.quorum.state is RaftState.LEADER:
            self._stop_leading(now_ms, out)

    def _stop_leading(self, now_ms: float, out: Output) -> None:
        """Leadership ends: parked fetches are answered NOT_LEADER, queued records dropped, and
        the leader's state goes with it."""
        for src, req, _ in self._leading().parked.values():
            self._send(out, src, FetchResponse(self.quorum.epoch, None, NOT_LEADER, request_id=req.request_id))
        self.leader_state = None
        self.listener.on_lose_leadership(now_ms, out)

    def _leading(self) -> LeaderState:
        """The leader's state; only called where the quorum state is Leader."""
        ls = self.leader_state
        assert ls is not None, "leader state used while not leading"
        return ls

    def _resign(self, now_ms: float, out: Output, reason: str) -> None:
        """KafkaRaftClient.pollLeader -> transitionToResigned(nonLeaderVotersByDescendingFetchOffset),
        on Check Quorum or shutdown alike; pollResigned then sends EndQuorumEpoch."""
        successors = self._voters_by_descending_fetch_offset()
        out.emit(RaftResign(self.quorum.epoch, reason))
        self._stop_leading(now_ms, out)
        self.quorum.become_resigned(now_ms)
        self._begin_end_quorum_epoch(successors, now_ms, out)

    def _voters_by_descending_fetch_offset(self) -> tuple[str, ...]:
        """LeaderState.nonLeaderVotersByDescendingFetchOffset: the other voters by the fetch offset
        this leader last saw from each in its epoch, highest first, then those it saw none from;
        ties in voter id order (ReplicaState.compareTo; `voters` lists them by id)."""
        rank = {v: i for i, v in enumerate(self.voters)}

        replica_end = self._leading().replica_end

        def key(voter: str) -> tuple[bool, int, int]:
            end = replica_end.get(voter)
            return (end is None, -(end or 0), rank[voter])

        return tuple(sorted(self._others(), key=key))

    # --- EndQuorumEpoch -------------------------------------------------------------------------

    def _begin_end_quorum_epoch(self, successors: tuple[str, ...], now_ms: float, out: Output) -> None:
        """Become a Resigned leader that tells every other voter (ResignedState: all unacknowledged)."""
        self.preferred_successors = successors
        self.end_quorum_sent_at = {}
        self._send_end_quorum_epoch(self._others(), now_ms, out)

    def _send_end_quorum_epoch(self, voters: list[str], now_ms: float, out: Output) -> None:
        req = EndQuorumEpoch(self.quorum.epoch, self.local, self.preferred_successors)
        for voter in voters:
            self.end_quorum_sent_at[voter] = now_ms
            self._send(out, voter, req)

    def _end_quorum_retry_at(self) -> float | None:
        if self.quorum.state is not RaftState.RESIGNED or not self.end_quorum_sent_at:
            return None
        return min(self.end_quorum_sent_at.values()) + self.config.request_timeout_ms

    def _resend_end_quorum_epoch(self, now_ms: float, out: Output) -> None:
        """Send EndQuorumEpoch again to every voter that has not acknowledged it within
        controller.quorum.request.timeout.ms (pollResigned -> maybeSendRequests to
        ResignedState.unackedVoters; RequestManager makes a timed-out voter ready again)."""
        due = [v for v, at in self.end_quorum_sent_at.items() if now_ms >= at + self.config.request_timeout_ms]
        if due:
            self._send_end_quorum_epoch(due, now_ms, out)

    def _on_end_quorum_epoch_response(self, src: str, resp: EndQuorumEpochResponse, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.handleEndQuorumEpochResponse: a newer epoch or leader is learned as from
        any response (maybeHandleCommonResponse); otherwise the voter has acknowledged the
        resignation and is not sent it again (ResignedState.acknowledgeResignation)."""
        q = self.quorum
        if resp.epoch < q.epoch or self._maybe_transition(resp.leader, resp.epoch, now_ms, out):
            return
        if q.state is RaftState.RESIGNED and resp.error is None:
            self.end_quorum_sent_at.pop(src, None)

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

    def append(self, records: list[Any], now_ms: float, out: Output) -> int | None:
        """Leader only: queue records; they are appended after controller.quorum.append.linger.ms.
        Returns the offset the last one will have, or None when not leader."""
        if self.quorum.state is not RaftState.LEADER:
            return None
        ls = self._leading()
        ls.pending.extend(records)
        if ls.linger_deadline_ms is None:
            ls.linger_deadline_ms = now_ms + self.config.append_linger_ms
        return self.log.end_offset + len(ls.pending) - 1

    def _append_pending(self, now_ms: float, out: Output) -> None:
        ls = self._leading()
        ls.linger_deadline_ms = None
        if not ls.pending:
            return
        start, epoch = self.log.end_offset, self.quorum.epoch
        entries = [LogEntry(start + i, epoch, rec) for i, rec in enumerate(ls.pending)]
        ls.pending = []
        self.log.append(entries, out)
        if self.config.raft_fsync:
            # The leader counts its own end offset only once flushed.
            out.write(Flush(_Flushed(self.log.end_offset)))
        else:
            self._on_leader_flushed(self.log.end_offset, now_ms, out)
            return
        self._complete_parked(now_ms, out)

    def _on_leader_flushed(self, end: int, now_ms: float, out: Output) -> None:
        if self.quorum.state is not RaftState.LEADER:
            return
        ls = self._leading()
        ls.flushed_end = max(ls.flushed_end, min(end, self.log.end_offset))
        self._maybe_advance_high_watermark(now_ms, out)
        self._complete_parked(now_ms, out)

    def _maybe_advance_high_watermark(self, now_ms: float, out: Output) -> None:
        ls = self._leading()
        ends = sorted(
            [ls.flushed_end] + [ls.replica_end.get(v, -1) for v in self._others()],
            reverse=True,
        )
        majority_end = ends[self.quorum.majority - 1]
        if majority_end > ls.epoch_start_offset and (self.high_watermark is None or majority_end > self.high_watermark):
            self.high_watermark = majority_end
            out.emit(RaftHighWatermark(self.quorum.epoch, majority_end))
            self._apply_committed(now_ms, out)
            self._complete_parked(now_ms, out)

    # --- fetching (leader side) -----------------------------------------------------------------

    def _on_fetch_request(self, src: str, req: FetchRequest, now_ms: float, out: Output) -> None:
        q = self.quorum
        if q.state is not RaftState.LEADER:
            self._send(out, src, FetchResponse(q.epoch, q.leader, NOT_LEADER, request_id=req.request_id))
            return
        if req.epoch < q.epoch:
            self._send(out, src, FetchResponse(q.epoch, self.local, FENCED_LEADER_EPOCH, request_id=req.request_id))
            return
        if req.epoch > q.epoch:
            self._send(out, src, FetchResponse(q.epoch, self.local, UNKNOWN_LEADER_EPOCH, request_id=req.request_id))
            return
        if req.fetch_offset > 0 or req.last_fetched_epoch > 0:
            epoch, end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or end < req.fetch_offset:
                self._send(
                    out,
                    src,
                    FetchResponse(q.epoch, self.local, None, high_watermark=self.high_watermark, diverging_epoch=epoch, diverging_end_offset=end, request_id=req.request_id),
                )
                return
        ls = self._leading()
        if not req.observer and req.replica in self.voters:
            ls.replica_end[req.replica] = req.fetch_offset
            ls.fetched_since_check.add(req.replica)
            if ls.check_quorum_deadline_ms is not None and len(ls.fetched_since_check | {self.local}) >= q.majority:
                ls.check_quorum_deadline_ms = now_ms + 1.5 * self.config.fetch_timeout_ms
                ls.fetched_since_check = set()
            self._maybe_advance_high_watermark(now_ms, out)
        stale_hwm = self.high_watermark is not None and (req.high_watermark is None or req.high_watermark < self.high_watermark)
        if req.fetch_offset < self.log.end_offset or stale_hwm:
            self._answer_fetch(src, req, out)
        else:
            old = ls.parked.pop(req.replica, None)
            if old is not None:
                self._answer_fetch(old[0], old[1], out)
            ls.parked[req.replica] = (src, req, now_ms + self.config.fetch_max_wait_ms)

    def _answer_fetch(self, src: str, req: FetchRequest, out: Output) -> None:
        entries = self.log.entries_from(req.fetch_offset, MAX_FETCH_ENTRIES)
        self._send(out, src, FetchResponse(self.quorum.epoch, self.local, None, entries, self.high_watermark, request_id=req.request_id))

    def _complete_parked(self, now_ms: float, out: Output) -> None:
        ls = self._leading()
        if not ls.parked:
            return
        parked, ls.parked = ls.parked, {}
        for src, req, _ in parked.values():
            self._answer_fetch(src, req, out)

    def _expire_parked(self, now_ms: float, out: Output) -> None:
        ls = self._leading()
        for replica, (src, req, deadline) in list(ls.parked.items()):
            if now_ms >= deadline:
                del ls.parked[replica]
                self._answer_fetch(src, req, out)

    # --- fetching (follower and observer side) ---------------------------------------------------

    def _send_fetch(self, now_ms: float, out: Output, target: str | None = None) -> None:
        q = self.quorum
        dst = target or q.leader
        if dst is None:
            return
        self.fetch_request_id += 1
        req = FetchRequest(q.epoch, self.local, self.log.end_offset, self.log.last_epoch, not self.is_voter, self.high_watermark, self.fetch_request_id)
        self.fetch_in_flight_since = now_ms
        self._send(out, dst, req, durable=True)

    def _observer_poll(self, now_ms: float, out: Output) -> None:
        """An observer with nobody to fetch from tries the voters in turn."""
        if self.fetch_in_flight_since is not None and now_ms >= self.fetch_in_flight_since + self.config.request_timeout_ms:
            self.fetch_in_flight_since = None
            self.quorum.leader = None  # unreachable: look for the leader among the voters again
        if self.fetch_in_flight_since is None and self.next_observer_fetch_ms is not None and now_ms >= self.next_observer_fetch_ms:
            target = self.quorum.leader
            if target is None:
                target = self.voters[self._observer_rotation % len(self.voters)]
                self._observer_rotation += 1
            self._send_fetch(now_ms, out, target)
            self.next_observer_fetch_ms = now_ms + self.config.observer_retry_ms

    def _on_fetch_response(self, src: str, resp: FetchResponse, now_ms: float, out: Output) -> None:
        q = self.quorum
        if resp.request_id != self.fetch_request_id:
            return  # the answer to a fetch this node already replaced by a newer one
        self.fetch_in_flight_since = None
        if not self.is_voter:
            return self._on_observer_fetch_response(src, resp, now_ms, out)
        if self._maybe_transition(resp.leader, resp.epoch, now_ms, out):
            if self.quorum.state is RaftState.FOLLOWER:
                self._send_fetch(now_ms, out)
            return
        if q.state is not RaftState.FOLLOWER or src != q.leader or resp.epoch != q.epoch or resp.error:
            return
        q.has_fetched_from_leader = True
        q.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        self._follow(resp, now_ms, out)
        self._send_fetch(now_ms, out)

    def _on_observer_fetch_response(self, src: str, resp: FetchResponse, now_ms: float, out: Output) -> None:
        q = self.quorum
        if resp.leader is not None and resp.epoch >= q.epoch and not (resp.error == NOT_LEADER and resp.leader == src):
            q.epoch, q.leader = resp.epoch, resp.leader
        elif resp.error == NOT_LEADER and src == q.leader:
            # The voter this observer followed no longer leads and names no other leader (a leader
            # that resigned on Check Quorum, cut off from the voters that elected another): look
            # for the leader among the voters again, as a Kafka observer whose leader fails it
            # fetches from any voter (KafkaRaftClient.pollFollowerAsObserver). Asking the same
            # voter again would never learn of the new epoch.
            q.leader = None
        if resp.error is not None or src != resp.leader:
            self.next_observer_fetch_ms = now_ms + (0 if resp.leader and resp.leader != src else self.config.observer_retry_ms)
            return
        self._follow(resp, now_ms, out)
        self.next_observer_fetch_ms = now_ms
        self._send_fetch(now_ms, out, q.leader)

    def _follow(self, resp: FetchResponse, now_ms: float, out: Output) -> None:
        """Apply a successful fetch response: truncate on divergence, else append and learn the HWM."""
        if resp.diverging_epoch is not None:
            _, own_end = self.log.end_offset_for_epoch(resp.diverging_epoch)
            target = min(resp.diverging_end_offset, own_end)
            below_hwm = self.high_watermark is not None and target < self.high_watermark
            out.emit(RaftTruncate(target, self.log.end_offset, self.high_watermark if below_hwm else None))
            if below_hwm:
                self.high_watermark = target
                self.applied = min(self.applied, target)
            self.log.truncate_to(target, out)
            return
        entries = [e for e in resp.entries if e.offset >= self.log.end_offset]
        if entries and entries[0].offset == self.log.end_offset:
            self.log.append(entries, out)
        if resp.high_watermark is not None:
            hwm = min(resp.high_watermark, self.log.end_offset)
            if self.high_watermark is None or hwm > self.high_watermark:
                self.high_watermark = hwm
                out.emit(RaftHighWatermark(self.quorum.epoch, hwm))
                self._apply_committed(now_ms, out)

    def _apply_committed(self, now_ms: float, out: Output) -> None:
        hwm = self.high_watermark or 0
        if hwm > self.applied:
            entries = self.log.entries[self.applied : hwm]
            self.applied = hwm
            self.listener.on_commit(entries, now_ms, out)

    # --- follower transitions ------------------------------------------------------------------

    def _become_follower(self, epoch: int, leader: str, now_ms: float, out: Output) -> None:
        self._leave_leadership(now_ms, out)
        self.quorum.become_follower(epoch, leader, now_ms, out)
        self.fetch_in_flight_since = None
        self._send_fetch(now_ms, out)

    def _drain_transitions(self, out: Output) -> None:
        q = self.quorum
        if q.transitions and q.state is not RaftState.FOLLOWER and self.is_voter:
            self.fetch_in_flight_since = None
        for frm, to, epoch in q.transitions:
            out.emit(RaftStateChange(frm, to, epoch))
        q.transitions.clear()
        q.persist_pending = False

    # --- graceful shutdown ------------------------------------------------------------------------

    def begin_shutdown(self, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.shutdown(timeoutMs): start a graceful shutdown that ends within
        `shutdown_timeout_ms`. The caller stops the process once `shutdown_outcome` is set, here or
        in a later tick or handle."""
        if self.shutdown_deadline_ms is None:
            self.shutdown_deadline_ms = now_ms + self.config.shutdown_timeout_ms
        self._poll_shutdown(now_ms, out)
        self._drain_transitions(out)

    def _shutting_down(self) -> bool:
        return self.shutdown_deadline_ms is not None and self.shutdown_outcome is None

    def _poll_shutdown(self, now_ms: float, out: Output) -> bool:
        """KafkaRaftClient.maybeCompleteShutdown, then pollLeader: the shutdown ends once timed out
        or once it may complete (`_shutdown_may_complete`); until then a leader resigns and keeps
        running Resigned. Returns whether the shutdown has ended."""
        if not self._shutting_down():
            return self.shutdown_outcome is not None
        if now_ms >= self.shutdown_deadline_ms:
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
        self.shutdown_outcome = outcome
        out.emit(RaftShutdown(outcome, self.quorum.state.value, self.quorum.epoch))
