"""KRaft RPCs (KIP-595, with KIP-996's PreVote flag), as frozen dataclasses.

Replica ids are node names (`c1` for voter 1, `b2` for broker 2 observing the log). `epoch` is the
sender's current quorum epoch. Offsets are 0-based; end offsets are exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.contract import pickled_by_fields
from storage.codec import record_type


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record of the replicated log at `offset`, written by the leader of `epoch`."""

    offset: int
    epoch: int
    record: Any


@record_type
@pickled_by_fields
@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The control record a new leader writes at its epoch start offset (committing it commits
    everything before it, and lets the high watermark advance in the new epoch)."""

    leader: str
    epoch: int
    voters: tuple[str, ...]


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class VoteRequest:
    epoch: int  # Candidate: its bumped epoch; Prospective (pre_vote): its current, unbumped epoch
    candidate: str
    last_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    leader: str | None
    granted: bool
    pre_vote: bool


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    """Sent by a new leader to every voter."""

    epoch: int
    leader: str


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """Sent by a resigned leader to every other voter until each acknowledges it (KafkaRaftClient
    pollResigned): the leader of `epoch` gives it up. `preferred_successors` are the other voters by
    the fetch offset the leader last saw from each, highest first
    (LeaderState.nonLeaderVotersByDescendingFetchOffset); empty from a leader that restarted
    Resigned, which saw no fetches (QuorumState.initialize)."""

    epoch: int
    leader: str
    preferred_successors: tuple[str, ...]


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    epoch: int  # the receiver's epoch, with the leader it knows: a resigned leader behind learns it
    leader: str | None
    error: str | None  # None, or FENCED_LEADER_EPOCH for a request of an older epoch


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class FetchRequest:
    epoch: int  # the epoch the fetcher believes current
    replica: str
    fetch_offset: int  # everything below it is on the fetcher's disk (KIP-595)
    last_fetched_epoch: int
    observer: bool  # brokers observe; only voters count toward the high watermark
    # The high watermark the fetcher knows (KIP-1166): the leader answers at once, instead of
    # parking the fetch, when it can tell the fetcher a newer one.
    high_watermark: int | None = None
    # Echoed in the response: a fetcher acts only on the answer to its latest fetch (an answer to
    # one it already replaced must not trigger another fetch, or two would stay in flight).
    request_id: int = 0


# FetchResponse errors
NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class FetchResponse:
    epoch: int
    leader: str | None
    error: str | None
    entries: tuple[LogEntry, ...] = ()
    high_watermark: int | None = None  # None: the leader does not know it yet in its epoch
    diverging_epoch: int | None = None  # set: truncate to the end of this epoch first
    diverging_end_offset: int | None = None
    request_id: int = 0
