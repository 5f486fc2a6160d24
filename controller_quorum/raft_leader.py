"""The Leader state of a Raft voter: becoming leader, appending, the high watermark, and answering
the voters' and observers' fetches (KafkaRaftClient.onBecomeLeader, appendAsLeader,
handleFetchRequest, maybeUpdateHighWatermark, pollLeader and the fetch purgatory). A `Leader` is
the LeaderState (leader_state.py: replica progress, parked fetches, the linger) together with the
handlers that run only while leading; the node makes one when it wins an election and drops it
when leadership ends (`RaftNode._become_leader`, `_leave_leadership`).

Rules (module docstring of raft.py): followers pull; a fetch at offset x confirms everything below
x is on the follower's disk; the high watermark is what a majority reached, counting the leader's
own *flushed* end, moves only past the epoch start offset (once an entry of this epoch, the
LeaderChange record, commits), and never goes back; a fetch whose (offset, last fetched epoch) does
not match the leader's log is answered with the end of that epoch (divergence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.contract import Flush, Output
from observability.events import RaftHighWatermark, RaftLeaderElected, RaftResign

from .leader_state import LeaderState
from .messages import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER,
    UNKNOWN_LEADER_EPOCH,
    BeginQuorumEpoch,
    FetchRequest,
    FetchResponse,
    LeaderChange,
    LogEntry,
)
from .raft_config import MAX_FETCH_ENTRIES
from .raft_states import due

if TYPE_CHECKING:
    from .raft import RaftNode


class Flushed:
    """Token of the leader's log flushes: `end` is the log end offset the flush covers."""

    __slots__ = ("end",)

    def __init__(self, end: int) -> None:
        self.end = end


class Leader(LeaderState):
    """A voter leading its epoch: LeaderState's data and the leader's handlers. Exists exactly
    while the node's quorum state is Leader (invariant of `RaftNode.leader_state`)."""

    def __init__(self, node: RaftNode, now_ms: float) -> None:
        # Check Quorum watches the other voters; a single voter is its own majority.
        watch = node.config.check_quorum and len(node.voters) > 1
        super().__init__(node.log.end_offset, now_ms + 1.5 * node.config.fetch_timeout_ms if watch else None)
        self.node = node

    def begin(self, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.onBecomeLeader: the high watermark moves only once an entry of this
        epoch is committed, so write one now (LeaderChange); tell the voters; tell the listener."""
        node = self.node
        out.emit(RaftLeaderElected(node.epoch, self.epoch_start_offset))
        self.pending.insert(0, LeaderChange(node.local, node.epoch, node.voters))
        self.append_pending(now_ms, out)
        self.send_begin_quorum_epoch(now_ms, out)
        node.listener.on_become_leader(node.epoch, now_ms, out)

    def send_begin_quorum_epoch(self, now_ms: float, out: Output) -> None:
        """Tell every other voter this node leads the epoch: at election, then every half fetch
        timeout while it leads (Kafka's KafkaRaftClient.maybeSendBeginQuorumEpochRequests,
        LeaderState's beginQuorumEpochTimer of fetchTimeoutMs / 2). The repeats reach a voter that
        missed the first (cut off, or down): a leader of an older epoch that never heard of this
        one steps down when one arrives, Check Quorum on or off."""
        node = self.node
        for voter in node.others():
            node.send(out, voter, BeginQuorumEpoch(node.epoch, node.local), durable=True)
        self.begin_quorum_epoch_at_ms = now_ms + node.config.fetch_timeout_ms / 2

    def poll(self, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.pollLeader: append what lingered, answer the parked fetches whose wait
        is over, repeat BeginQuorumEpoch, and resign when Check Quorum's deadline passed."""
        if due(self.linger_deadline_ms, now_ms):
            self.append_pending(now_ms, out)
        self.expire_parked(now_ms, out)
        if due(self.begin_quorum_epoch_at_ms, now_ms):
            self.send_begin_quorum_epoch(now_ms, out)
        if due(self.check_quorum_deadline_ms, now_ms):
            self.resign(now_ms, out, reason="check_quorum")

    def deadlines(self) -> list[float | None]:
        """The leader's timers (None: not set): Check Quorum, the linger, BeginQuorumEpoch, the
        earliest parked fetch."""
        return [self.check_quorum_deadline_ms, self.linger_deadline_ms, self.begin_quorum_epoch_at_ms, self.next_parked_deadline()]

    def resign(self, now_ms: float, out: Output, reason: str) -> None:
        """KafkaRaftClient.pollLeader -> transitionToResigned(nonLeaderVotersByDescendingFetchOffset),
        on Check Quorum or shutdown alike; the Resigned state then sends EndQuorumEpoch."""
        node = self.node
        rank = {v: i for i, v in enumerate(node.voters)}  # `voters` lists them by id
        successors = self.voters_by_descending_fetch_offset(node.others(), rank)
        out.emit(RaftResign(node.epoch, reason))
        node.become_resigned(successors, now_ms, out)

    def stop(self, out: Output) -> None:
        """Leadership ends: parked fetches are answered NOT_LEADER (queued records are dropped
        with this object)."""
        for src, req in self.take_parked():
            self.node.send(out, src, FetchResponse(self.node.epoch, None, NOT_LEADER, request_id=req.request_id))

    # --- appending --------------------------------------------------------------------------------

    def append(self, records: list[Any], now_ms: float) -> int:
        """Queue records; they are appended after controller.quorum.append.linger.ms. Returns the
        offset the last one will have."""
        self.pending.extend(records)
        if self.linger_deadline_ms is None:
            self.linger_deadline_ms = now_ms + self.node.config.append_linger_ms
        return self.node.log.end_offset + len(self.pending) - 1

    def append_pending(self, now_ms: float, out: Output) -> None:
        node = self.node
        self.linger_deadline_ms = None
        if not self.pending:
            return
        start, epoch = node.log.end_offset, node.epoch
        entries = [LogEntry(start + i, epoch, rec) for i, rec in enumerate(self.pending)]
        self.pending = []
        node.log.append(entries, out)
        if node.config.raft_fsync:
            # The leader counts its own end offset only once flushed.
            out.write(Flush(Flushed(node.log.end_offset)))
        else:
            self.on_flushed(node.log.end_offset, now_ms, out)
            return
        self.complete_parked(out)

    def on_flushed(self, end: int, now_ms: float, out: Output) -> None:
        self.flushed_end = max(self.flushed_end, min(end, self.node.log.end_offset))
        self.maybe_advance_high_watermark(now_ms, out)
        self.complete_parked(out)

    def maybe_advance_high_watermark(self, now_ms: float, out: Output) -> None:
        node = self.node
        majority_end = self.majority_end(node.others(), node.quorum.majority)
        if majority_end > self.epoch_start_offset and (node.high_watermark is None or majority_end > node.high_watermark):
            node.high_watermark = majority_end
            out.emit(RaftHighWatermark(node.epoch, majority_end))
            node.apply_committed(now_ms, out)
            self.complete_parked(out)

    # --- the voters' and observers' fetches -------------------------------------------------------

    def on_fetch_request(self, src: str, req: FetchRequest, now_ms: float, out: Output) -> None:
        node = self.node
        epoch = node.epoch
        if req.epoch < epoch:
            node.send(out, src, FetchResponse(epoch, node.local, FENCED_LEADER_EPOCH, request_id=req.request_id))
            return
        if req.epoch > epoch:
            node.send(out, src, FetchResponse(epoch, node.local, UNKNOWN_LEADER_EPOCH, request_id=req.request_id))
            return
        if req.fetch_offset > 0 or req.last_fetched_epoch > 0:
            end_epoch, end = node.log.end_offset_for_epoch(req.last_fetched_epoch)
            if end_epoch != req.last_fetched_epoch or end < req.fetch_offset:
                node.send(
                    out,
                    src,
                    FetchResponse(epoch, node.local, None, high_watermark=node.high_watermark, diverging_epoch=end_epoch, diverging_end_offset=end, request_id=req.request_id),
                )
                return
        if not req.observer and req.replica in node.voters:
            self.update_replica(req.replica, req.fetch_offset, node.local, node.quorum.majority, now_ms, 1.5 * node.config.fetch_timeout_ms)
            self.maybe_advance_high_watermark(now_ms, out)
        stale_hwm = node.high_watermark is not None and (req.high_watermark is None or req.high_watermark < node.high_watermark)
        if req.fetch_offset < node.log.end_offset or stale_hwm:
            self.answer_fetch(src, req, out)
        else:
            replaced = self.park(req.replica, src, req, now_ms + node.config.fetch_max_wait_ms)
            if replaced is not None:
                self.answer_fetch(*replaced, out)

    def answer_fetch(self, src: str, req: FetchRequest, out: Output) -> None:
        node = self.node
        entries = node.log.entries_from(req.fetch_offset, MAX_FETCH_ENTRIES)
        node.send(out, src, FetchResponse(node.epoch, node.local, None, entries, node.high_watermark, request_id=req.request_id))

    def complete_parked(self, out: Output) -> None:
        for src, req in self.take_parked():
            self.answer_fetch(src, req, out)

    def expire_parked(self, now_ms: float, out: Output) -> None:
        for src, req in self.take_expired(now_ms):
            self.answer_fetch(src, req, out)
