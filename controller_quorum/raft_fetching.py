"""A Raft follower's and observer's fetching: sending fetches to the leader, following its answers
(appending, truncating on divergence, learning the high watermark) and applying what is committed
(KafkaRaftClient.maybeSendFetchOrFetchSnapshot, handleFetchResponse, pollFollowerAsVoter,
pollFollowerAsObserver). The data is a FetchState (raft_states.py).

Rules: a voter's fetch is sent only after its appended entries are flushed (`raft_fsync`: a fetch
at offset x vouches that everything below x is on its disk, KIP-595); a diverging answer truncates
the log to the end of the named epoch; the high watermark learned is capped at the local log end;
an observer with nobody to fetch from tries the voters in turn.
"""

from __future__ import annotations

from actors.contract import Output
from observability.events import RaftHighWatermark, RaftTruncate

from .messages import NOT_LEADER, FetchRequest, FetchResponse
from .quorum_state import RaftState
from .raft_states import due


class Fetching:
    """RaftNode's handlers for fetching from the leader (a mixin of RaftNode: it uses the node's
    quorum, log, config, listener and sending)."""

    def _send_fetch(self, now_ms: float, out: Output, target: str | None = None) -> None:
        q = self.quorum
        dst = target or q.leader
        if dst is None:
            return
        request_id = self.fetching.next_request_id(now_ms)
        req = FetchRequest(q.epoch, self.local, self.log.end_offset, self.log.last_epoch, not self.is_voter, self.high_watermark, request_id)
        self._send(out, dst, req, durable=True)

    def _poll_follower(self, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.pollFollower: a voter that heard nothing from its leader for the fetch
        timeout starts an election; a fetch whose answer is overdue is sent again."""
        q = self.quorum
        if due(q.fetch_deadline_ms, now_ms) and self.is_voter:
            self._start_election(now_ms, out)
        elif self.fetching.timed_out(now_ms, self.config.request_timeout_ms):
            self._send_fetch(now_ms, out)  # the request or its answer was lost: ask again

    def _observer_poll(self, now_ms: float, out: Output) -> None:
        """An observer with nobody to fetch from tries the voters in turn."""
        f = self.fetching
        if f.timed_out(now_ms, self.config.request_timeout_ms):
            f.in_flight_since = None
            self.quorum.leader = None  # unreachable: look for the leader among the voters again
        if f.in_flight_since is None and f.next_observer_fetch_ms is not None and now_ms >= f.next_observer_fetch_ms:
            target = self.quorum.leader
            if target is None:
                target = self.voters[f.observer_rotation % len(self.voters)]
                f.observer_rotation += 1
            self._send_fetch(now_ms, out, target)
            f.next_observer_fetch_ms = now_ms + self.config.observer_retry_ms

    def _on_fetch_response(self, src: str, resp: FetchResponse, now_ms: float, out: Output) -> None:
        q = self.quorum
        if resp.request_id != self.fetching.request_id:
            return  # the answer to a fetch this node already replaced by a newer one
        self.fetching.in_flight_since = None
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
            self.fetching.next_observer_fetch_ms = now_ms + (0 if resp.leader and resp.leader != src else self.config.observer_retry_ms)
            return
        self._follow(resp, now_ms, out)
        self.fetching.next_observer_fetch_ms = now_ms
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
