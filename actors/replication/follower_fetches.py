"""A partition leader's side of its followers' fetches: the answer to each (records, an error,
or the point where the follower's log diverges), and what the leader learns from it (the
follower's log end, when it was last caught up, its broker epoch): Kafka's Partition.fetchRecords
and updateFollowerFetchState with Replica.updateFetchState. A mixin of PartitionReplica
(replica.py), whose log, high watermark and followers it reads and updates.

Rules: a fetch at offset x confirms everything below x (§6.5); a fetch is refused with an older
or newer leader epoch (KIP-320), from an earlier broker session (KIP-903), or from a broker that is
not a replica; a last fetched epoch the leader's log does not match gets the end of that epoch
(§6.6); a follower is caught up when it reaches the leader's log end, or as of its previous fetch
when it reaches what the log end was then.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.contract import Output

from .messages import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    STALE_BROKER_EPOCH,
    UNKNOWN_LEADER_EPOCH,
    FetchedPartition,
    FetchPartition,
)

# The most batches one fetch answer carries for a partition.
MAX_FETCH_BATCHES = 256


@dataclass
class FollowerState:
    """What the leader knows of one follower in the current leader epoch."""

    leo: int = -1  # -1: no fetch yet in this epoch
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_leo: int = -1
    broker_epoch: int = -1
    fetch_epoch: int = -1  # the leader epoch of the last fetch received


class FollowerFetches:
    def on_follower_fetch(self, fp: FetchPartition, follower: int, broker_epoch: int, now_ms: float, out: Output) -> FetchedPartition | None:
        """Update the follower's state from its fetch; return an answer to send now (an error,
        a divergence, or records), or None when there is nothing to return yet (long poll)."""
        error = self.check_leader_epoch(fp.current_leader_epoch)
        if error is not None:
            return self._error(error)
        reg = self.env.image.brokers.get(follower)
        if self.env.settings.protocol.broker_epoch_in_alter_partition and reg is not None and broker_epoch < reg.epoch:
            return self._error(STALE_BROKER_EPOCH)  # KIP-903: a fetch from an earlier session
        if follower not in self.followers:
            return self._error(NOT_LEADER_OR_FOLLOWER)  # not a replica of this partition (any more)
        if fp.last_fetched_epoch >= 0:
            epoch, end = self.log.end_offset_for_epoch(fp.last_fetched_epoch)
            if epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
                return FetchedPartition(self.topic, self.partition, None, self.hwm, self.log.end_offset, diverging_epoch=(epoch, end), topic_id=self.topic_id)
        if fp.fetch_offset > self.log.end_offset:
            return FetchedPartition(self.topic, self.partition, OFFSET_OUT_OF_RANGE, self.hwm, self.log.end_offset, topic_id=self.topic_id)
        self._update_follower(follower, fp.fetch_offset, broker_epoch, now_ms, out)
        if fp.fetch_offset < self.log.end_offset:
            return self.read_for_follower(fp)
        return None

    def read_for_follower(self, fp: FetchPartition) -> FetchedPartition:
        error = self.check_leader_epoch(fp.current_leader_epoch)
        if error is not None:
            return self._error(error)
        batches = self.log.read_from(fp.fetch_offset, MAX_FETCH_BATCHES)
        return FetchedPartition(self.topic, self.partition, None, self.hwm, self.log.end_offset, batches=batches, topic_id=self.topic_id)

    def has_data_for(self, fp: FetchPartition) -> bool:
        return not self.is_leader or fp.current_leader_epoch != self.leader_epoch or fp.fetch_offset < self.log.end_offset

    def check_leader_epoch(self, epoch: int) -> str | None:
        if not self.is_leader:
            return NOT_LEADER_OR_FOLLOWER
        if epoch < self.leader_epoch:
            return FENCED_LEADER_EPOCH
        if epoch > self.leader_epoch:
            return UNKNOWN_LEADER_EPOCH
        return None

    def _error(self, error: str) -> FetchedPartition:
        return FetchedPartition(self.topic, self.partition, error, self.hwm, self.log.end_offset, topic_id=self.topic_id)

    def note_skipped_fetch(self, follower: int, at_ms: float) -> None:
        """The follower's fetch at `at_ms` left this partition out (fetch_session.py): it was at
        the leader's log end then, so caught up then, as Kafka's processing of the whole session
        would have recorded."""
        f = self.followers.get(follower)
        if f is None or f.fetch_epoch != self.leader_epoch or at_ms <= f.last_fetch_ms:
            return
        f.last_caught_up_ms = max(f.last_caught_up_ms, at_ms)
        f.last_fetch_ms = at_ms
        f.last_fetch_leader_leo = f.leo

    def _update_follower(self, follower: int, fetch_offset: int, broker_epoch: int, now_ms: float, out: Output) -> None:
        f = self.followers[follower]
        leader_leo = self.log.end_offset
        # Kafka's Replica.updateFetchState: caught up now if the fetch reached the leader's LEO,
        # or as of the previous fetch if it reached what the LEO was then.
        if fetch_offset >= leader_leo:
            f.last_caught_up_ms = now_ms
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.last_fetch_leader_leo = leader_leo
        f.last_fetch_ms = now_ms
        f.leo = fetch_offset
        f.broker_epoch = broker_epoch
        f.fetch_epoch = self.leader_epoch
        if fetch_offset <= self.hwm and follower in self.isr and (self.pending_isr is None or follower in self.pending_isr):
            # An in-sync follower (in the replication quorum either way) at or below the HWM:
            # the HWM, the smallest LEO of the quorum, cannot move on this fetch, and everything
            # else that could move it re-evaluates it itself. The common case of a fetch on an
            # idle partition, so that it costs no more than the bookkeeping above.
            return
        self.maybe_expand_isr(follower, now_ms, out)
        self.maybe_advance_high_watermark(now_ms, out)
