"""A Raft follower's and observer's fetching: sending fetches to the leader, following its answers
(appending, truncating on divergence, learning the high watermark) (KafkaRaftClient.
maybeSendFetchOrFetchSnapshot, handleFetchResponse, pollFollowerAsVoter, pollFollowerAsObserver;
Kafka's FollowerState). A `Fetcher` is the FetchState (raft_states.py) together with the
handlers; unlike the other states' objects the node keeps one for its whole life, so that request
ids never repeat (a voter's fetch in flight is forgotten whenever it stops following).

Rules: a voter's fetch is sent only after its appended entries are flushed (`raft_fsync`: a fetch
at offset x vouches that everything below x is on its disk, KIP-595); a diverging answer truncates
the log to the end of the named epoch; the high watermark learned is capped at the local log end;
an observer with nobody to fetch from tries the voters in turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.contract import Output
from observability.events import RaftHighWatermark, RaftTruncate

from .messages import NOT_LEADER, FetchRequest, FetchResponse
from .quorum_state import RaftState
from .raft_states import FetchState, due

if TYPE_CHECKING:
    from .raft import RaftNode


class Fetcher(FetchState):
    """A voter's fetching while it follows, and an observer's always: FetchState's data and the
    handlers."""

    def __init__(self, node: RaftNode, now_ms: float) -> None:
        super().__init__(next_observer_fetch_ms=now_ms)
        self.node = node

    def send_fetch(self, now_ms: float, out: Output, target: str | None = None) -> None:
        node = self.node
        dst = target or node.quorum.leader
        if dst is None:
            return
        request_id = self.next_request_id(now_ms)
        req = FetchRequest(node.epoch, node.local, node.log.end_offset, node.log.last_epoch, not node.is_voter, node.high_watermark, request_id)
        node.send(out, dst, req, durable=True)

    def deadlines(self) -> list[float | None]:
        """A voter's fetch in flight times out only while it follows; an observer, idle, asks again."""
        node = self.node
        deadlines: list[float | None] = []
        if (node.quorum.state is RaftState.FOLLOWER or not node.is_voter) and self.in_flight_since is not None:
            deadlines.append(self.in_flight_since + node.config.request_timeout_ms)
        if not node.is_voter and self.in_flight_since is None:
            deadlines.append(self.next_observer_fetch_ms)
        return deadlines

    def poll_follower(self, now_ms: float, out: Output) -> None:
        """KafkaRaftClient.pollFollower: a voter that heard nothing from its leader for the fetch
        timeout starts an election; a fetch whose answer is overdue is sent again."""
        node = self.node
        if due(node.quorum.fetch_deadline_ms, now_ms) and node.is_voter:
            node.start_election(now_ms, out)
        elif self.timed_out(now_ms, node.config.request_timeout_ms):
            self.send_fetch(now_ms, out)  # the request or its answer was lost: ask again

    def poll_observer(self, now_ms: float, out: Output) -> None:
        """An observer with nobody to fetch from tries the voters in turn."""
        node = self.node
        if self.timed_out(now_ms, node.config.request_timeout_ms):
            self.in_flight_since = None
            node.quorum.leader = None  # unreachable: look for the leader among the voters again
        if self.in_flight_since is None and self.next_observer_fetch_ms is not None and now_ms >= self.next_observer_fetch_ms:
            target = node.quorum.leader
            if target is None:
                target = node.voters[self.observer_rotation % len(node.voters)]
                self.observer_rotation += 1
            self.send_fetch(now_ms, out, target)
            self.next_observer_fetch_ms = now_ms + node.config.observer_retry_ms

    def on_fetch_response(self, src: str, resp: FetchResponse, now_ms: float, out: Output) -> None:
        node, q = self.node, self.node.quorum
        if resp.request_id != self.request_id:
            return  # the answer to a fetch this node already replaced by a newer one
        self.in_flight_since = None
        if not node.is_voter:
            return self._on_observer_fetch_response(src, resp, now_ms, out)
        if node.maybe_transition(resp.leader, resp.epoch, now_ms, out):
            if q.state is RaftState.FOLLOWER:
                self.send_fetch(now_ms, out)
            return
        if q.state is not RaftState.FOLLOWER or src != q.leader or resp.epoch != q.epoch or resp.error:
            return
        q.has_fetched_from_leader = True
        q.fetch_deadline_ms = now_ms + node.config.fetch_timeout_ms
        self._follow(resp, now_ms, out)
        self.send_fetch(now_ms, out)

    def _on_observer_fetch_response(self, src: str, resp: FetchResponse, now_ms: float, out: Output) -> None:
        node, q = self.node, self.node.quorum
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
            self.next_observer_fetch_ms = now_ms + (0 if resp.leader and resp.leader != src else node.config.observer_retry_ms)
            return
        self._follow(resp, now_ms, out)
        self.next_observer_fetch_ms = now_ms
        self.send_fetch(now_ms, out, q.leader)

    def _follow(self, resp: FetchResponse, now_ms: float, out: Output) -> None:
        """Apply a successful fetch response: truncate on divergence, else append and learn the HWM."""
        node = self.node
        log = node.log
        if resp.diverging_epoch is not None:
            _, own_end = log.end_offset_for_epoch(resp.diverging_epoch)
            target = min(resp.diverging_end_offset, own_end)
            below_hwm = node.high_watermark is not None and target < node.high_watermark
            out.emit(RaftTruncate(target, log.end_offset, node.high_watermark if below_hwm else None))
            if below_hwm:
                node.high_watermark = target
                node.applied = min(node.applied, target)
            log.truncate_to(target, out)
            return
        entries = [e for e in resp.entries if e.offset >= log.end_offset]
        if entries and entries[0].offset == log.end_offset:
            log.append(entries, out)
        if resp.high_watermark is not None:
            hwm = min(resp.high_watermark, log.end_offset)
            if node.high_watermark is None or hwm > node.high_watermark:
                node.high_watermark = hwm
                out.emit(RaftHighWatermark(node.epoch, hwm))
                node.apply_committed(now_ms, out)
