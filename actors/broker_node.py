"""The broker role (nodes b1..bN): it observes the metadata log, registers with the active
controller, heartbeats, takes part in controlled shutdown, and hosts partition replicas (the data
plane lives in `actors.replication`).

Lifecycle (the protocol description §6.5.1; the replication deep dive, "Preferred leader
and clean leader failover"):
- start: read the clean-shutdown marker (the broker epoch of the last clean stop, or none after a
  crash) and register, carrying that previous epoch;
- every broker.heartbeat.interval.ms: heartbeat with the epoch and the metadata offset applied;
  the controller answers whether the broker is fenced;
- controlled shutdown: heartbeats ask to shut down until the controller, having moved leadership
  away, answers should_shut_down; then flush, leave the marker and stop;
- a failed log directory (KIP-858, the `fail_log_dir` step; `fail_log_dir` below): the broker stops
  serving the replicas in it and names it in every heartbeat until it restarts; the controller
  moves their leadership away and takes them out of the ISR. Directory 0 holds the metadata log:
  its failure halts the broker. A directory the controller has not acknowledged (a heartbeat
  answered since) within log.dir.failure.timeout.ms shuts the broker down. Modelled: which replicas
  go offline, the heartbeat, the halt and the timeout. Not modelled: the I/O errors themselves
  (the step says which directory fails; its files stay as they were, and come back at restart),
  and the controlled shutdown Kafka tries first when the timeout shuts it down (the controller
  could not be reached for that long, so the broker was fenced: it would go at once).
"""

from __future__ import annotations

from dataclasses import replace

from actors.contract import Envelope, FlushCompleted, Output, ShutdownRequested, StartContext, StopProcess
from actors.controller_node import raft_config
from actors.replication.messages import (
    EpochEndOffsetRequest,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
    ProduceRequests,
    ProduceResponse,
    ProduceResponses,
    coalesce,
)
from actors.replication.replica_manager import ReplicaManager
from actors.settings import ClusterSettings
from controller_quorum.messages import LogEntry
from controller_quorum.metadata import MetadataImage, PartitionRecord, RemoveTopicRecord
from controller_quorum.partition_change import topic_min_isr
from controller_quorum.raft import RaftNode
from controller_quorum.requests import (
    NOT_CONTROLLER,
    AdminRequest,
    AdminResponse,
    STALE_BROKER_EPOCH,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    GetReplicaLogInfoRequest,
)
from observability.events import (
    BrokerEpochStale,
    BrokerRegistered,
    BrokerSession,
    BrokerStarting,
    ControlledShutdownRequested,
    DataPlaneServing,
    LogDirFailed,
    LogDirFailureTimeout,
)

REGISTRATION_RETRY_MS = 500  # after a refusal (DUPLICATE_BROKER_REGISTRATION) or no controller known
# An unanswered registration is sent again after this (Kafka's BrokerLifecycleManager keeps one
# registration in flight; its channel's timeout is controller.quorum.request.timeout.ms, 2 s).
REGISTRATION_TIMEOUT_MS = 2_000
NOT_CONTROLLER_BACKOFF_MS = 100
# The log directory that also holds the metadata log (Kafka's metadata.log.dir defaults to the first
# of log.dirs): losing it halts the broker.
METADATA_LOG_DIR = 0


class MetadataFollower:
    """A broker's RaftListener: the image of the committed metadata log, and the partitions whose
    records changed since the broker last looked (`changed`)."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.changed: dict[tuple[str, int], None] = {}

    def on_commit(self, entries: list[LogEntry], now_ms: float, out: Output) -> None:
        for e in entries:
            if isinstance(e.record, RemoveTopicRecord):
                self.changed.update(dict.fromkeys(k for k in self.image.partitions if k[0] == e.record.name))
            self.image.apply(e.offset, e.record)
            if isinstance(e.record, PartitionRecord):
                self.changed[(e.record.topic, e.record.partition)] = None

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
        # The latest registration attempt, and whether it awaits its answer: at most one in
        # flight, since each one the controller accepts makes a new broker epoch and an earlier
        # attempt's epoch would be stale at once (on a loaded Ray, answers slower than a fixed
        # resend interval looped).
        self.registration_id = 0
        self.registration_in_flight = False
        self.data_plane = ReplicaManager(self)
        self.serving = False  # the data plane follows the metadata (see the module docstring)
        # KIP-858. Every directory that failed since the start, and whether a heartbeat answer has
        # acknowledged it (Kafka's BrokerLifecycleManager.offlineDirs); when an unacknowledged one
        # shuts the broker down; the directories the latest heartbeat named.
        self.offline_log_dirs: dict[int, bool] = {}
        self.dir_failure_deadlines: dict[int, float] = {}
        self.heartbeat_offline_dirs: tuple[int, ...] = ()
        # The metadata log's directory failed: the process halts (the driver stops it as a crash);
        # until then it does nothing.
        self.halted = False
        c = settings.config
        self.sync_flush = settings.storage.value == "fsync" or c.log_flush_interval_messages == 1

    # --- ReplicaEnv -------------------------------------------------------------------------------

    @property
    def broker_epoch(self) -> int | None:
        return self.epoch

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    def min_isr(self, topic: str, replication_factor: int) -> int:
        return topic_min_isr(self.metadata.image, self.settings.config, topic, replication_factor)

    def send_to_controller(self, payload: object, out: Output) -> None:
        target = self._controller()
        if target is not None:
            out.send(Envelope(self.node_id, target, payload))

    def start(self, now_ms: float) -> Output:
        out = Output()
        ctx = self._ctx
        self.raft = RaftNode(ctx.node_id, self.settings.voters, raft_config(self.settings), dict(ctx.files), ctx.rng, self.metadata, out, now_ms)
        self.raft.start(now_ms, out)
        self.data_plane.recover(dict(ctx.files), now_ms, out)
        self.next_request_ms = now_ms
        out.emit(BrokerStarting(self.previous_epoch, self.previous_epoch is not None))
        return self._finish(now_ms, out)

    def _finish(self, now_ms: float, out: Output) -> Output:
        self._follow_metadata(now_ms, out)
        deadlines = [d for d in (self.raft.next_deadline(), self.next_request_ms, self.data_plane.next_deadline()) if d is not None]
        deadlines += self.dir_failure_deadlines.values()
        out.next_deadline_ms = min(deadlines) if deadlines else None
        out.sends = coalesce(out.sends, ProduceResponse, ProduceResponses)
        return out

    def _follow_metadata(self, now_ms: float, out: Output) -> None:
        md = self.metadata
        if not self.serving:
            if self.epoch is None or md.image.offset <= self.epoch:
                return
            self.serving = True
            # Every partition, and every replica recovered from disk: one whose topic was deleted
            # while this broker was down is a stray log, deleted (Kafka's LogManager at start-up).
            md.changed = dict.fromkeys(sorted(md.image.partitions.keys() | self.data_plane.replicas.keys()))
            out.emit(DataPlaneServing(self.epoch, md.image.offset))
        if md.changed:
            changed, md.changed = md.changed, {}
            for key in changed:
                rec = md.image.partitions.get(key)
                if rec is None:
                    self.data_plane.remove_partition(key, out)
                else:
                    self.data_plane.apply_partition(rec, now_ms, out)

    def _controller(self) -> str | None:
        """The active controller is the metadata log's leader, as the observer last learned it."""
        return self.raft.leader or self.controller

    def _send_control_request(self, now_ms: float, out: Output) -> None:
        target = self._controller()
        if target is None:
            self.next_request_ms = now_ms + REGISTRATION_RETRY_MS
            return
        if self.epoch is None:
            self.registration_id += 1
            self.registration_in_flight = True
            req = BrokerRegistrationRequest(self.broker_id, self.settings.rack_of(self.broker_id), self.previous_epoch, self.registration_id,
                                            log_dirs=tuple(range(self.settings.log_dirs)))
            self.next_request_ms = now_ms + REGISTRATION_TIMEOUT_MS
        else:
            self.heartbeat_offline_dirs = tuple(sorted(self.offline_log_dirs))
            req = BrokerHeartbeatRequest(self.broker_id, self.epoch, self.raft.applied, self.want_shutdown, self.heartbeat_offline_dirs)
            self.next_request_ms = now_ms + self.settings.config.broker_heartbeat_interval_ms
        out.send(Envelope(self.node_id, target, req))

    def handle(self, envelope: Envelope, now_ms: float) -> Output:
        out = Output()
        if self.halted:
            return out
        p = envelope.payload
        if self.raft.handle(envelope, now_ms, out):
            pass
        elif isinstance(p, BrokerRegistrationResponse):
            self._on_registration_response(envelope.src, p, now_ms, out)
        elif isinstance(p, BrokerHeartbeatResponse):
            if self._on_heartbeat_response(envelope.src, p, now_ms, out):
                return out  # stopped
        elif isinstance(p, FetchRequest):
            self.data_plane.on_fetch_request(envelope.src, p, now_ms, out)
        elif isinstance(p, FetchResponse):
            self.data_plane.on_fetch_response(envelope.src, p, now_ms, out)
        elif isinstance(p, ProduceRequests):
            for part in p.parts:
                self.data_plane.on_produce(envelope.src, part, now_ms, out)
        elif isinstance(p, ProduceRequest):
            self.data_plane.on_produce(envelope.src, p, now_ms, out)
        elif isinstance(p, AlterPartitionResponse):
            self.data_plane.on_alter_partition_response(p, now_ms, out)
        elif isinstance(p, FlushCompleted):
            self.data_plane.on_flush_completed(p, now_ms, out)
        elif isinstance(p, ListOffsetsRequest):
            self.data_plane.on_list_offsets(envelope.src, p, out)
        elif isinstance(p, MetadataRequest):
            self.data_plane.on_metadata_request(envelope.src, p, out)
        elif isinstance(p, EpochEndOffsetRequest):
            self.data_plane.on_epoch_end_offset(envelope.src, p, out)
        elif isinstance(p, GetReplicaLogInfoRequest):
            self.data_plane.on_replica_log_info(envelope.src, p, out)
        elif isinstance(p, AdminRequest):
            self._forward_admin(envelope.src, p, out)
        elif isinstance(p, AdminResponse):
            out.send(Envelope(self.node_id, p.client, p))  # the controller's answer, back to the client's connection
        elif isinstance(p, ShutdownRequested):
            if self.epoch is None:
                self._stop(b"", out)
                return out
            self.want_shutdown = True
            self.data_plane.begin_controlled_shutdown()
            out.emit(ControlledShutdownRequested(self.epoch))
            self._send_control_request(now_ms, out)
        return self._finish(now_ms, out)

    def _forward_admin(self, src: str, req: AdminRequest, out: Output) -> None:
        """A Kafka client's admin request, forwarded to the active controller as the broker knows it
        (Kafka's ForwardingManager, KIP-590), naming the client's connection for the answer. With no
        controller known the client is told NOT_CONTROLLER at once and asks again (Kafka's broker
        holds the request and retries until its timeout: the listener does that)."""
        target = self._controller()
        if target is None:
            out.send(Envelope(self.node_id, src, AdminResponse(req.request_id, NOT_CONTROLLER, client=src)))
        else:
            out.send(Envelope(self.node_id, target, replace(req, client=src)))

    def _on_registration_response(self, src: str, resp: BrokerRegistrationResponse, now_ms: float, out: Output) -> None:
        if self.epoch is not None or not self.registration_in_flight or resp.request_id != self.registration_id:
            return  # the answer to an attempt given up on (its epoch, if any, expires unused)
        self.registration_in_flight = False
        if resp.error == NOT_CONTROLLER:
            self.controller = resp.controller
            # Straight to the controller named, unless it named none or itself (not active yet).
            self.next_request_ms = now_ms if resp.controller not in (None, src) else now_ms + NOT_CONTROLLER_BACKOFF_MS
            return
        if resp.error is not None:
            self.next_request_ms = now_ms + REGISTRATION_RETRY_MS  # DUPLICATE_BROKER_REGISTRATION: the old session is not fenced yet
            return
        self.epoch = resp.broker_epoch
        self.controller = src
        out.emit(BrokerRegistered(self.epoch, self.previous_epoch is not None))
        self.next_request_ms = now_ms  # first heartbeat at once

    def _on_heartbeat_response(self, src: str, resp: BrokerHeartbeatResponse, now_ms: float, out: Output) -> bool:
        if resp.error == NOT_CONTROLLER:
            self.controller = resp.controller
            # Straight to the controller named, unless it named itself (a leader whose controller is
            # not active yet): then back off rather than ask again at once.
            self.next_request_ms = now_ms if resp.controller not in (None, src) else now_ms + NOT_CONTROLLER_BACKOFF_MS
            return False
        if resp.error == STALE_BROKER_EPOCH:
            out.emit(BrokerEpochStale(self.epoch))
            self.epoch = None  # re-register
            self.next_request_ms = now_ms
            return False
        if resp.error is not None:
            return False
        self.controller = src
        self._acknowledge_offline_dirs()
        if resp.is_fenced != self.fenced:
            self.fenced = resp.is_fenced
            out.emit(BrokerSession(self.epoch, resp.is_fenced))
        if self.want_shutdown and resp.should_shut_down:
            self._stop(str(self.epoch).encode(), out)
            return True
        if self.want_shutdown:
            self.next_request_ms = now_ms + min(250, self.settings.config.broker_heartbeat_interval_ms)
        return False

    def _stop(self, marker: bytes, out: Output) -> None:
        """A clean stop: checkpoint the HWMs, then flush everything and leave the marker. After a
        log directory failed the marker holds no epoch: Kafka's
        LogManager.readBrokerEpochFromCleanShutdownFiles finds none unless every directory has a
        clean-shutdown file, and the failed one got none, so the broker registers as after an
        unclean shutdown (KIP-966)."""
        self.data_plane.checkpoint_hwms(out)
        self.data_plane.stop_all(out)
        out.write(StopProcess(b"" if self.offline_log_dirs else marker))

    # --- log directory failures (KIP-858) ----------------------------------------------------------

    def fail_log_dir(self, log_dir: int, now_ms: float) -> tuple[Output, bool]:
        """The log directory `log_dir` failed (the `fail_log_dir` step): Kafka's
        ReplicaManager.handleLogDirFailure. Returns the output and whether the broker halts: its
        driver then stops the process as a process crash."""
        out = Output()
        if self.halted or log_dir in self.offline_log_dirs:
            return out, False  # already offline (handleLogDirFailure returns when !isLogDirOnline)
        if log_dir == METADATA_LOG_DIR:
            # ReplicaManager.handleLogDirFailure: "Shutdown broker because the metadata log dir
            # $dir has failed", Exit.halt(1): no clean shutdown, no heartbeat telling the controller.
            out.emit(LogDirFailed(log_dir, True))
            self.halted = True
            return out, True
        out.emit(LogDirFailed(log_dir, False))
        self.data_plane.fail_dir(log_dir, now_ms, out)
        # BrokerLifecycleManager.propagateDirectoryFailure: named in every heartbeat from now on,
        # the next one at once (if registered), and a deadline for the controller to acknowledge it.
        self.offline_log_dirs[log_dir] = False
        self.dir_failure_deadlines[log_dir] = now_ms + self.settings.config.log_dir_failure_timeout_ms
        if self.epoch is not None and not self.want_shutdown:
            self.next_request_ms = now_ms
        return self._finish(now_ms, out), False

    def _acknowledge_offline_dirs(self) -> None:
        """A heartbeat answered without error: the controller knows the directories it named
        (BrokerHeartbeatResponseEvent marks each of `currentOfflineDirs` acknowledged)."""
        for d in self.heartbeat_offline_dirs:
            self.offline_log_dirs[d] = True
            self.dir_failure_deadlines.pop(d, None)

    def _unacknowledged_dir_expired(self, now_ms: float) -> int | None:
        """A failed directory the controller has not acknowledged in time (OfflineDirBrokerFailureEvent)."""
        return next((d for d, at in sorted(self.dir_failure_deadlines.items()) if now_ms >= at and not self.offline_log_dirs[d]), None)

    def tick(self, now_ms: float) -> Output:
        out = Output()
        if self.halted:
            return out
        expired = self._unacknowledged_dir_expired(now_ms)
        if expired is not None:
            # "Shutting down because couldn't communicate offline log dir with controllers".
            out.emit(LogDirFailureTimeout(expired))
            self._stop(b"", out)
            return out
        self.raft.tick(now_ms, out)
        self.data_plane.tick(now_ms, out)
        if self.next_request_ms is not None and now_ms >= self.next_request_ms:
            self._send_control_request(now_ms, out)
        return self._finish(now_ms, out)
