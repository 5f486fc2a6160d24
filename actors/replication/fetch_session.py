"""Incremental fetch sessions between a follower broker and a leader broker (Kafka's KIP-227).

Without sessions every fetch carries, and every answer returns, every partition the follower
follows on that leader, so a broker's replication costs O(partitions) per round trip even when
one partition moved. With a session:

- the follower's first request is full (session epoch 0); the leader remembers each partition's
  fetch position and answers with the new session's id;
- each later request (epoch 1, 2, ...) carries only the partitions whose position changed since it
  was last sent, and the ones the follower stopped fetching (`forgotten`);
- the leader answers only the partitions with something new for the follower: records, a high
  watermark it has not sent yet, or an error. The others are left out.

A lost request or answer, a leader restart or an unknown session makes the follower start over with
a full request, as Kafka's FetchSessionHandler does after FETCH_SESSION_ID_NOT_FOUND or
INVALID_FETCH_SESSION_EPOCH.

What Kafka does on every fetch for every partition of the session, the leader here does only for
the partitions that can have changed (`LeaderSession.dirty`), and keeps the follower state of the
others exact by construction: a partition is left clean only when its follower fetched at the
leader's log end offset and already has the leader's HWM, and any change of the leader's log end
offset, HWM, role or partition state makes it dirty again. So a partition the leader skipped at a
fetch had its follower caught up at that fetch: `ReplicaManager` applies those fetches to the
follower's caught-up time (`PartitionReplica.note_skipped_fetch`) before processing the partition
again and before the ISR shrink check reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import INITIAL_SESSION_EPOCH, FetchPartition

Key = tuple[str, int]


@dataclass
class FollowerSession:
    """The follower's side of its session with one leader broker."""

    session_id: int = 0
    next_epoch: int = INITIAL_SESSION_EPOCH  # INITIAL_SESSION_EPOCH: the next request is full
    # The position last sent per partition: a partition is sent again only when it differs.
    sent: dict[Key, FetchPartition] = field(default_factory=dict)
    # The partitions whose position may have changed since it was sent (ordered sets).
    changed: dict[Key, None] = field(default_factory=dict)
    forgotten: dict[Key, None] = field(default_factory=dict)

    def reset(self) -> None:
        """Start over: the next request is full and opens a new session."""
        self.session_id = 0
        self.next_epoch = INITIAL_SESSION_EPOCH
        self.sent.clear()
        self.changed.clear()
        self.forgotten.clear()

    def add(self, key: Key) -> None:
        self.changed[key] = None
        self.forgotten.pop(key, None)

    def forget(self, key: Key) -> None:
        self.changed.pop(key, None)
        if self.sent.pop(key, None) is not None:
            self.forgotten[key] = None


@dataclass
class LeaderSession:
    """The leader's side of one follower broker's session."""

    session_id: int
    follower: int
    broker_epoch: int  # the follower's broker epoch in its requests
    # The follower's registration in the leader's metadata then: (epoch, fenced, shutting down).
    registered_epoch: tuple[int, bool, bool] | None
    epoch: int = INITIAL_SESSION_EPOCH  # the last request's session epoch
    positions: dict[Key, FetchPartition] = field(default_factory=dict)
    # Partitions to process at the next fetch (an ordered set): the follower sent a new position,
    # the leader's state for the partition changed, or its follower is not caught up yet.
    dirty: dict[Key, None] = field(default_factory=dict)
    sent_hwm: dict[Key, int] = field(default_factory=dict)  # the HWM last answered per partition
    last_processed_ms: dict[Key, float] = field(default_factory=dict)  # per partition
    last_fetch_ms: float = 0.0  # the session's latest request
    previous_fetch_ms: float = 0.0  # the one before it

    def skipped_since_processed(self, key: Key, at_ms: float) -> bool:
        """True if the partition was in the session, and skipped, at the fetch of `at_ms`."""
        done = self.last_processed_ms.get(key)
        return done is not None and done < at_ms
