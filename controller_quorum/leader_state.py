"""What a Raft voter holds while it leads an epoch, and only then: Kafka's LeaderState
(org.apache.kafka.raft.LeaderState). The voter (controller_quorum/raft.py) makes one when it wins
an election and drops it when it stops leading, so that "this field is None unless leader" is the
structure rather than a comment.

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
