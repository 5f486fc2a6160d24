"""A Raft voter while it leads: becoming leader, appending, the high watermark, and answering the
voters' and observers' fetches (KafkaRaftClient.onBecomeLeader, appendAsLeader,
handleFetchRequest, maybeUpdateHighWatermark, pollLeader and the fetch purgatory). The data it
keeps is the LeaderState (leader_state.py), which exists only while it leads.

Rules (module docstring of raft.py): followers pull; a fetch at offset x confirms everything below
x is on the follower's disk; the high watermark is what a majority reached, counting the leader's
own *flushed* end, moves only past the epoch start offset (once an entry of this epoch, the
LeaderChange record, commits), and never goes back; a fetch whose (offset, last fetched epoch) does
not match the leader's log is answered with the end of that epoch (divergence).
"""

from __future__ import annotations

from typing import Any

from actors.contract import Flush, Output
from observability.events import RaftHighWatermark, RaftLeaderElected

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
from .quorum_state import RaftState
from .raft_config import MAX_FETCH_ENTRIES
from .raft_states import due


class _Flushed:
    """Token of the leader's log flushes: `end` is the log end offset the flush covers."""

    __slots__ = ("end",)

    def __init__(self, end: int) -> None:
        self.end = end


class Leadership:
    """RaftNode's handlers while it leads (a mixin of RaftNode: it uses the node's quorum, log,
    config, listener and sending)."""

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

    def _poll_leader(self, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.pollLeader: append what lingered, answer the parked fetches whose wait
        is over, repeat BeginQuorumEpoch, and resign when Check Quorum's deadline passed."""
        ls = self._leading()
        if due(ls.linger_deadline_ms, now_ms):
            self._append_pending(now_ms, out)
        self._expire_parked(now_ms, out)
        if due(ls.begin_quorum_epoch_at_ms, now_ms):
            self._send_begin_quorum_epoch(now_ms, out)
        if due(ls.check_quorum_deadline_ms, now_ms):
            self._resign(now_ms, out, reason="check_quorum")

    def _leave_leadership(self, now_ms: float, out: Output) -> None:
        if self.quorum.state is RaftState.LEADER:
            self._stop_leading(now_ms, out)

    def _stop_leading(self, now_ms: float, out: Output) -> None:
        """Leadership ends: parked fetches are answered NOT_LEADER, queued records dropped, and
        the leader's state goes with it."""
        for src, req in self._leading().take_parked():
            self._send(out, src, FetchResponse(self.quorum.epoch, None, NOT_LEADER, request_id=req.request_id))
        self.leader_state = None
        self.listener.on_lose_leadership(now_ms, out)

    def _leading(self) -> LeaderState:
        """The leader's state; only called where the quorum state is Leader."""
        ls = self.leader_state
        assert ls is not None, "leader state used while not leading"
        return ls

    # --- appending --------------------------------------------------------------------------------

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
        majority_end = ls.majority_end(self._others(), self.quorum.majority)
        if majority_end > ls.epoch_start_offset and (self.high_watermark is None or majority_end > self.high_watermark):
            self.high_watermark = majority_end
            out.emit(RaftHighWatermark(self.quorum.epoch, majority_end))
            self._apply_committed(now_ms, out)
            self._complete_parked(now_ms, out)

    # --- the voters' and observers' fetches -------------------------------------------------------

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
            ls.update_replica(req.replica, req.fetch_offset, self.local, q.majority, now_ms, 1.5 * self.config.fetch_timeout_ms)
            self._maybe_advance_high_watermark(now_ms, out)
        stale_hwm = self.high_watermark is not None and (req.high_watermark is None or req.high_watermark < self.high_watermark)
        if req.fetch_offset < self.log.end_offset or stale_hwm:
            self._answer_fetch(src, req, out)
        else:
            replaced = ls.park(req.replica, src, req, now_ms + self.config.fetch_max_wait_ms)
            if replaced is not None:
                self._answer_fetch(*replaced, out)

    def _answer_fetch(self, src: str, req: FetchRequest, out: Output) -> None:
        entries = self.log.entries_from(req.fetch_offset, MAX_FETCH_ENTRIES)
        self._send(out, src, FetchResponse(self.quorum.epoch, self.local, None, entries, self.high_watermark, request_id=req.request_id))

    def _complete_parked(self, now_ms: float, out: Output) -> None:
        for src, req in self._leading().take_parked():
            self._answer_fetch(src, req, out)

    def _expire_parked(self, now_ms: float, out: Output) -> None:
        for src, req in self._leading().take_expired(now_ms):
            self._answer_fetch(src, req, out)
