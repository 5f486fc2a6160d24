"""A KRaft node's election state and every transition between its states (KIP-996).

States: Unattached, Prospective, Candidate, Leader, Follower, Resigned. Transitions with Pre-Vote
(KIP-996, "Proposed Changes"):

    Unattached  -> Unattached (higher epoch, or a vote granted), Prospective (election timeout),
                   Follower (leader discovered at an equal or larger epoch)
    Prospective -> Unattached (higher epoch; or lost/timed out with no known leader),
                   Candidate (pre-vote majority), Follower (leader discovered; or lost/timed out
                   with a known leader)
    Candidate   -> Unattached (higher epoch), Prospective (election timeout or lost election),
                   Leader (vote majority), Follower (leader at an equal or larger epoch)
    Leader      -> Unattached (higher epoch), Resigned (Check Quorum or shutdown),
                   Follower (leader at a larger epoch)
    Follower    -> Unattached (higher epoch), Prospective (fetch timeout),
                   Follower (leader at a larger epoch)
    Resigned    -> Unattached (epoch + 1 after the election timeout, or a higher epoch),
                   Follower (leader at a larger epoch), Prospective (a sole voter, at start-up)

Without Pre-Vote (`prevote: false`) the KIP-595 transitions apply instead: the timeouts lead
straight to Candidate (epoch + 1), which is what lets a partitioned voter inflate its epoch.

What is persisted (the quorum-state file) is the election state `(epoch, voted, leader)`; the
epoch never decreases. Illegal transitions raise `IllegalTransition` naming the states, epochs
and ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from actors.contract import Output, RandomSource, Replace
from storage.codec import pack, unpack

QUORUM_STATE_FILE = "raft/quorum-state"


class RaftState(str, Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


U, P, C, L, F, R = RaftState
_WITH_PREVOTE = {
    U: {U, P, F},
    P: {U, P, C, F},
    C: {U, P, L, F},
    L: {U, R, F},
    F: {U, P, F},
    # Resigned -> Prospective: only a sole voter restarting from its own leadership (Kafka's
    # KafkaRaftClient.initialize calls transitionToProspective for an only voter that is Resigned;
    # QuorumState.transitionToProspective refuses only a Leader or a Prospective).
    R: {U, P, F},
}
_WITHOUT_PREVOTE = {
    U: {U, C, F},
    P: {U, C, F},
    C: {U, C, L, F},
    L: {U, R, F},
    F: {U, C, F},
    R: {U, C, F},
}


class IllegalTransition(AssertionError):
    """A transition the state machine does not allow: a bug, so it stops the node."""


@dataclass(frozen=True)
class ElectionState:
    epoch: int = 0
    voted: str | None = None
    leader: str | None = None

    def encode(self) -> bytes:
        return pack([self.epoch, self.voted, self.leader])

    @classmethod
    def decode(cls, data: bytes | None) -> ElectionState | None:
        if not data:
            return None
        try:
            epoch, voted, leader = unpack(data)
        except Exception:  # a torn write of the tiny state file: treat as absent
            return None
        return cls(epoch, voted, leader)


@dataclass(frozen=True)
class Timing:
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int


class QuorumState:
    """The current state, epoch, vote and leader of one node, and the timers that belong to them.

    Invariants: `epoch` never decreases; `voted` is only set in Unattached, Prospective, Candidate
    (itself) or a Follower/Leader/Resigned that kept its vote of this epoch; `leader` is set in
    Follower and Leader (itself) and may be remembered in Prospective (the leader it last followed).
    """

    def __init__(
        self,
        local: str,
        voters: tuple[str, ...],
        *,
        is_voter: bool,
        prevote: bool,
        timing: Timing,
        rng: RandomSource,
    ) -> None:
        self.local = local
        self.voters = voters
        self.is_voter = is_voter
        self.prevote = prevote
        self.timing = timing
        self.rng = rng
        self.state = U
        self.epoch = 0
        self.voted: str | None = None
        self.leader: str | None = None
        # Prospective/Candidate tallies (the local vote counts as granted).
        self.granted: set[str] = set()
        self.rejected: set[str] = set()
        self.election_deadline_ms: float | None = None
        self.fetch_deadline_ms: float | None = None
        self.backoff_until_ms: float | None = None
        # Follower: whether a fetch from the leader succeeded in this epoch (KIP-996: until then it
        # still grants pre-votes).
        self.has_fetched_from_leader = False
        self.persist_pending = False  # the election state changed: the next sends wait for its flush
        self.transitions: list[tuple[str, str, int]] = []  # (from, to, epoch), drained by the owner

    # --- helpers ----------------------------------------------------------------------------

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def random_election_timeout_ms(self) -> float:
        base = self.timing.election_timeout_ms
        return base + self.rng.randrange(base)

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.voted, self.leader)

    def _persist(self, out: Output) -> None:
        out.write(Replace(QUORUM_STATE_FILE, self.election().encode()))
        self.persist_pending = True

    def _move(self, to: RaftState, epoch: int) -> None:
        allowed = (_WITH_PREVOTE if self.prevote else _WITHOUT_PREVOTE)[self.state]
        if to not in allowed:
            raise IllegalTransition(
                f"{self.local}: {self.state.value} (epoch {self.epoch}) -> {to.value} (epoch {epoch}) is not allowed"
            )
        if epoch < self.epoch:
            raise IllegalTransition(f"{self.local}: epoch would go back from {self.epoch} to {epoch} ({to.value})")
        if to is C and self.prevote and self.state is not P:
            raise IllegalTransition(f"{self.local}: only Prospective may become Candidate (from {self.state.value})")
        self.transitions.append((self.state.value, to.value, epoch))
        self.state = to
        self.granted, self.rejected = set(), set()
        self.election_deadline_ms = self.fetch_deadline_ms = self.backoff_until_ms = None
        self.has_fetched_from_leader = False

    # --- initialisation ---------------------------------------------------------------------

    def initialize(self, stored: ElectionState | None, log_last_epoch: int, now_ms: float) -> None:
        """At start-up, from the persisted election state, in the order of Kafka's
        QuorumState.initialize: a node that was leader comes back Resigned (KIP-996); one that
        had voted for itself (a Candidate) comes back a Candidate of the same epoch, its own vote
        granted, and resumes that election (`election.isVotedCandidate(local)`); one that knew a
        leader comes back its Follower (not yet having fetched); any other stays Unattached with
        its vote. (A sole voter then goes on to lead at once: RaftNode.start.)"""
        stored = stored or ElectionState()
        if log_last_epoch > stored.epoch:  # the quorum-state file is behind the log (lost write)
            stored = ElectionState(log_last_epoch)
        self.epoch, self.voted, self.leader = stored.epoch, stored.voted, stored.leader
        if not self.is_voter:
            self.state, self.leader, self.voted = U, None, None
            return
        if stored.leader == self.local:
            self.state = R
            self.election_deadline_ms = now_ms + self.random_election_timeout_ms()
        elif stored.voted == self.local:
            # Kafka checks isVotedCandidate before hasLeader: a voter that voted for itself and
            # then followed another leader of that epoch also restarts as Candidate; the answers
            # to its vote requests name that leader and it follows again.
            self.state = C
            self.leader = None
            self.granted = {self.local}
            self.election_deadline_ms = now_ms + self.random_election_timeout_ms()
        elif stored.leader is not None and stored.leader in self.voters:
            self.state = F
            self.fetch_deadline_ms = now_ms + self.timing.fetch_timeout_ms
        else:
            self.state = U
            self.leader = None
            self.election_deadline_ms = now_ms + self.random_election_timeout_ms()
        self.transitions.append(("start", self.state.value, self.epoch))

    # --- transitions ------------------------------------------------------------------------

    def become_unattached(self, epoch: int, now_ms: float, out: Output) -> None:
        """Learned of a higher epoch (vote and leader forgotten), or gave up an election in this
        epoch (the vote is kept)."""
        new_epoch = epoch > self.epoch
        if not new_epoch and self.state is U:
            return
        voted = None if new_epoch else self.voted
        self._move(U, epoch)
        self.epoch, self.voted, self.leader = epoch, voted, None
        self.election_deadline_ms = now_ms + self.random_election_timeout_ms() if self.is_voter else None
        if new_epoch:
            self._persist(out)

    def record_vote(self, candidate: str, out: Output) -> None:
        """Granted a standard vote in this epoch (Unattached or Prospective keep their state)."""
        if self.state not in (U, P) or self.voted not in (None, candidate):
            raise IllegalTransition(f"{self.local}: cannot vote for {candidate} as {self.state.value} (voted {self.voted})")
        self.voted = candidate
        self._persist(out)

    def become_prospective(self, now_ms: float) -> None:
        """Fetch or election timeout with Pre-Vote on: canvass without bumping the epoch. The last
        known leader is remembered so that losing goes back to following it."""
        remembered = self.leader if self.state is F else None
        self._move(P, self.epoch)
        self.leader = remembered
        self.granted = {self.local}
        self.election_deadline_ms = now_ms + self.random_election_timeout_ms()

    def become_candidate(self, now_ms: float, out: Output) -> None:
        self._move(C, self.epoch + 1)
        self.epoch, self.voted, self.leader = self.epoch + 1, self.local, None
        self.granted = {self.local}
        self.election_deadline_ms = now_ms + self.random_election_timeout_ms()
        self._persist(out)

    def become_leader(self, now_ms: float, out: Output) -> None:
        if self.state is not C:
            raise IllegalTransition(f"{self.local}: only a Candidate becomes Leader (is {self.state.value})")
        self._move(L, self.epoch)
        self.leader = self.local
        self._persist(out)

    def become_follower(self, epoch: int, leader: str, now_ms: float, out: Output) -> None:
        if leader == self.local:
            raise IllegalTransition(f"{self.local}: cannot follow itself in epoch {epoch}")
        if epoch == self.epoch and self.state is L:
            raise IllegalTransition(f"{self.local}: two leaders in epoch {epoch} ({self.local} and {leader})")
        if epoch == self.epoch and self.state is F and self.leader != leader:
            raise IllegalTransition(f"{self.local}: two leaders in epoch {epoch} ({self.leader} and {leader})")
        voted = self.voted if epoch == self.epoch else None
        self._move(F, epoch)
        self.epoch, self.voted, self.leader = epoch, voted, leader
        self.fetch_deadline_ms = now_ms + self.timing.fetch_timeout_ms
        self._persist(out)

    def become_resigned(self, now_ms: float) -> None:
        self._move(R, self.epoch)
        self.election_deadline_ms = now_ms + self.random_election_timeout_ms()

    def begin_backoff(self, now_ms: float) -> None:
        """A Candidate that lost waits a random backoff before canvassing again."""
        self.backoff_until_ms = now_ms + self.rng.randrange(max(self.timing.election_backoff_max_ms, 1))
        self.election_deadline_ms = None

    # --- the vote rules (KIP-996, "Pre-Vote request handling") ------------------

    def can_grant_vote(self, candidate: str, log_up_to_date: bool, pre_vote: bool) -> bool:
        s = self.state
        if not self.is_voter:
            return False
        if s is L:
            return False
        if pre_vote:
            if s is F:
                return not self.has_fetched_from_leader and log_up_to_date
            return log_up_to_date  # Unattached, Prospective, Candidate, Resigned
        if s is U:
            return candidate == self.voted or (self.voted is None and log_up_to_date)
        if s is P:
            if self.voted is not None:
                return candidate == self.voted
            return self.leader is None and log_up_to_date
        return False  # Candidate (voted for itself), Follower (has a leader), Resigned


def decode_quorum_state(files: dict[str, bytes]) -> ElectionState | None:
    return ElectionState.decode(files.get(QUORUM_STATE_FILE))
