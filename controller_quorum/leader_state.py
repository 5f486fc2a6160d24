"""What a Raft voter holds while it leads an epoch, and only then: Kafka's LeaderState
(org.apache.kafka.raft.LeaderState), the data and the rules that need nothing else. The Leader
state object (raft_leader.py) adds the node and the leader's handlers; the node (raft.py) makes
one when it wins an election and drops it when it stops leading, so that "this field is None
unless leader" is the structure rather than a comment.

Invariants while it exists: the voter's quorum state is Leader of the epoch it was made for;
`replica_end` and `fetched_since_check` name other voters only; `parked` holds at most one fetch
per replica, answered at its deadline, when the log or the high watermark moves, or with
NOT_LEADER when leadership ends; `pending` holds records appended after the linger deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .messages import FetchRequest


@dataclass
class LeaderState:
    # The log end when leadership began: the high watermark moves only past it, once an entry of
    # this epoch is committed (the protocol description §6.4 holds for Raft too).
    epoch_start_offset: int
    # Check Quorum (KIP-996's companion): resign unless a majority fetched within 1.5 fetch
    # timeouts (None: not watched, a single voter is its own majority).
    check_quorum_deadline_ms: float | None
    # When BeginQuorumEpoch goes to every other voter again (LeaderState's beginQuorumEpochTimer).
    begin_quorum_epoch_at_ms: float | None = None
    # The leader's own end offset as flushed (it counts only what it saw flushed in this epoch).
    flushed_end: int = 0
    # Each other voter's fetch offset as last seen in this epoch (LeaderState's ReplicaState).
    replica_end: dict[str, int] = field(default_factory=dict)
    # The voters that fetched since Check Quorum's deadline was last pushed back.
    fetched_since_check: set[str] = field(default_factory=set)
    # Fetches with nothing new to answer: replica -> (source, request, deadline).
    parked: dict[str, tuple[str, FetchRequest, float]] = field(default_factory=dict)
    # Records waiting for the append linger (controller.quorum.append.linger.ms), and its deadline.
    pending: list[Any] = field(default_factory=list)
    linger_deadline_ms: float | None = None

    # --- what the leader learns from the voters' fetches (LeaderState.updateReplicaState) ---------

    def update_replica(self, replica: str, fetch_offset: int, local: str, majority: int, now_ms: float, check_quorum_span_ms: float) -> None:
        """A voter fetched at `fetch_offset`: everything below it is on its disk. Once a majority
        (this leader included) fetched since Check Quorum's deadline was last pushed back, push it
        back again by `check_quorum_span_ms`."""
        self.replica_end[replica] = fetch_offset
        self.fetched_since_check.add(replica)
        if self.check_quorum_deadline_ms is not None and len(self.fetched_since_check | {local}) >= majority:
            self.check_quorum_deadline_ms = now_ms + check_quorum_span_ms
            self.fetched_since_check = set()

    def majority_end(self, others: list[str], majority: int) -> int:
        """The highest offset that a majority of the voters (this leader's flushed end included)
        have reached: the high watermark's candidate (LeaderState.maybeUpdateHighWatermark)."""
        ends = sorted([self.flushed_end] + [self.replica_end.get(v, -1) for v in others], reverse=True)
        return ends[majority - 1]

    def voters_by_descending_fetch_offset(self, others: list[str], rank: dict[str, int]) -> tuple[str, ...]:
        """LeaderState.nonLeaderVotersByDescendingFetchOffset: the other voters by the fetch offset
        this leader last saw from each in its epoch, highest first, then those it saw none from;
        ties in `rank` order (voter id order: ReplicaState.compareTo)."""

        def key(voter: str) -> tuple[bool, int, int]:
            end = self.replica_end.get(voter)
            return (end is None, -(end or 0), rank[voter])

        return tuple(sorted(others, key=key))

    # --- parked fetches (the leader's fetch purgatory) ------------------------------------------

    def park(self, replica: str, src: str, req: FetchRequest, deadline_ms: float) -> tuple[str, FetchRequest] | None:
        """Park a fetch with nothing new to answer; returns the one it replaces, to be answered now."""
        old = self.parked.pop(replica, None)
        self.parked[replica] = (src, req, deadline_ms)
        return None if old is None else (old[0], old[1])

    def take_parked(self) -> list[tuple[str, FetchRequest]]:
        """Every parked fetch, to be answered now (the log or the high watermark moved)."""
        parked, self.parked = self.parked, {}
        return [(src, req) for src, req, _ in parked.values()]

    def take_expired(self, now_ms: float) -> list[tuple[str, FetchRequest]]:
        """The parked fetches whose wait (controller.quorum.fetch.max.wait) has ended."""
        expired = [replica for replica, (_, _, deadline) in self.parked.items() if now_ms >= deadline]
        return [self.parked.pop(replica)[:2] for replica in expired]

    def next_parked_deadline(self) -> float | None:
        return min((deadline for _, _, deadline in self.parked.values()), default=None)
