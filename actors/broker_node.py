"""The broker role (nodes b1..bN), control plane: it observes the metadata log, registers with the
active controller, heartbeats, and takes part in controlled shutdown. The data plane (partition
replicas) is issue 4.

Lifecycle (replication-correctness.md §6.5.1; kafka-replication-deep-dive.txt, "Preferred leader
and clean leader failover"):
- start: read the clean-shutdown marker (the broker epoch of the last clean stop, or none after a
  crash) and register, carrying that previous epoch;
- every broker.heartbeat.interval.ms: heartbeat with the epoch and the metadata offset applied;
  the controller answers whether the broker is fenced;
- controlled shutdown: heartbeats ask to shut down until the controller, having moved leadership
  away, answers should_shut_down; then flush, leave the marker and stop.
"""

from __future__ import annotations

from actors.contract import Envelope, Output, ShutdownRequested, StartContext, StopProcess
from actors.controller_node import raft_config
from actors.settings import ClusterSettings
from controller_quorum.messages import LogEntry
from controller_quorum.metadata import MetadataImage
from controller_quorum.raft import RaftNode
from controller_quorum.requests import (
    NOT_CONTROLLER,
    STALE_BROKER_EPOCH,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)

REGISTRATION_RETRY_MS = 500


class MetadataFollower:
    """A broker's RaftListener: the image of the committed metadata log."""

    def __init__(self) -> None:
        self.image = MetadataImage()

    def on_commit(self, entries: list[LogEntry], now_ms: float, out: Output) -> None:
        for e in entries:
            self.image.apply(e.offset, e.record)

    def on_become_leader(self, epoch: int, now_ms: float, out: Output) -> None:
        raise AssertionError("a broker observes the metadata log; it never leads it")

    def on_lose_leadership(self, now_ms: float, out: Output) -> None:
        pass


class BrokerNode:
    def __init__(self, ctx: StartContext, settings: ClusterSettings) -> None:
        self.node_id = ctx.node_id
        self.broker_id = int(ctx.node_id[1:])
        self.settings = settings
        self._ctx = ctx
        marker = ctx.clean_shutdown_marker
        self.previous_epoch: int | None = int(marker.decode()) if marker else None
        self.metadata = MetadataFollower()
        self.raft: RaftNode | None = None
        self.epoch: int | None = None  # this session's broker epoch, once registered
        self.fenced = True
        self.want_shutdown = False
        self.controller: str | None = None
        self.next_request_ms: float | None = None
        self.request_in_flight = False

    def start(self, now_ms: float) -> Output:
        out = Output()
        ctx = self._ctx
        self.raft = RaftNode(ctx.node_id, self.settings.voters, raft_config(self.settings), dict(ctx.files), ctx.rng, self.metadata, out, now_ms)
        self.raft.start(now_ms, out)
        self.next_request_ms = now_ms
        out.emit("broker_starting", previous_epoch=self.previous_epoch, clean=self.previous_epoch is not None)
        return self._finish(now_ms, out)

    def _finish(self, now_ms: float, out: Output) -> Output:
        deadlines = [d for d in (self.raft.next_deadline(), self.next_request_ms) if d is not None]
        out.next_deadline_ms = min(deadlines) if deadlines else None
        return out

    def _controller(self) -> str | None:
        """The active controller is the metadata log's leader, as the observer last learned it."""
        return self.raft.leader or self.controller

    def _send_control_request(self, now_ms: float, out: Output) -> None:
        target = self._controller()
        if target is None:
            self.next_request_ms = now_ms + REGISTRATION_RETRY_MS
            return
        if self.epoch is None:
            req = BrokerRegistrationRequest(self.broker_id, self.settings.rack_of(self.broker_id), self.previous_epoch)
            self.next_request_ms = now_ms + REGISTRATION_RETRY_MS
        else:
            req = BrokerHeartbeatRequest(self.broker_id, self.epoch, self.raft.applied, self.want_shutdown)
            self.next_request_ms = now_ms + self.settings.config.broker_heartbeat_interval_ms
        out.send(Envelope(self.node_id, target, req))

    def handle(self, envelope: Envelope, now_ms: float) -> Output:
        out = Output()
        p = envelope.payload
        if self.raft.handle(envelope, now_ms, out):
            pass
        elif isinstance(p, BrokerRegistrationResponse):
            self._on_registration_response(envelope.src, p, now_ms, out)
        elif isinstance(p, BrokerHeartbeatResponse):
            if self._on_heartbeat_response(envelope.src, p, now_ms, out):
                return out  # stopped
        elif isinstance(p, ShutdownRequested):
            if self.epoch is None:
                out.write(StopProcess(b""))
                return out
            self.want_shutdown = True
            out.emit("controlled_shutdown_requested", epoch=self.epoch)
            self._send_control_request(now_ms, out)
        return self._finish(now_ms, out)

    def _on_registration_response(self, src: str, resp: BrokerRegistrationResponse, now_ms: float, out: Output) -> None:
        if resp.error == NOT_CONTROLLER:
            self.controller = resp.controller
            return
        if resp.error is not None or self.epoch is not None:
            return  # DUPLICATE_BROKER_REGISTRATION: the old session is not fenced yet; retry later
        self.epoch = resp.broker_epoch
        self.controller = src
        out.emit("broker_registered", epoch=self.epoch)
        self.next_request_ms = now_ms  # first heartbeat at once

    def _on_heartbeat_response(self, src: str, resp: BrokerHeartbeatResponse, now_ms: float, out: Output) -> bool:
        if resp.error == NOT_CONTROLLER:
            self.controller = resp.controller
            self.next_request_ms = now_ms
            return False
        if resp.error == STALE_BROKER_EPOCH:
            out.emit("broker_epoch_stale", epoch=self.epoch)
            self.epoch = None  # re-register
            self.next_request_ms = now_ms
            return False
        if resp.error is not None:
            return False
        self.controller = src
        if resp.is_fenced != self.fenced:
            self.fenced = resp.is_fenced
            out.emit("broker_fenced" if resp.is_fenced else "broker_unfenced", epoch=self.epoch)
        if self.want_shutdown and resp.should_shut_down:
            out.write(StopProcess(str(self.epoch).encode()))
            return True
        if self.want_shutdown:
            self.next_request_ms = now_ms + min(250, self.settings.config.broker_heartbeat_interval_ms)
        return False

    def tick(self, now_ms: float) -> Output:
        out = Output()
        self.raft.tick(now_ms, out)
        if self.next_request_ms is not None and now_ms >= self.next_request_ms:
            self._send_control_request(now_ms, out)
        return self._finish(now_ms, out)
