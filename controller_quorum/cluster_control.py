"""The brokers' side of the active controller: registration, heartbeats and sessions, fencing and
unfencing, controlled shutdown (Kafka's ClusterControlManager with its BrokerHeartbeatManager).
Each operation makes its records and events in a Proposal (proposal.py) and returns its answer;
what an operation does to the partitions is the ReplicationControl's (replication_control.py).

Rules (§6.5.1): registration grants a new broker epoch (the offset of its RegisterBrokerRecord)
only after the previous one was fenced; a registration without the previous epoch marks an unclean
shutdown, which removes the broker from every ELR (KIP-966); heartbeats keep the session alive; a
broker silent for broker.session.timeout.ms is fenced; a fenced broker that has caught up with the
metadata log is unfenced; a controlled shutdown moves leadership away and takes the broker out of
ISRs before it is told to stop.
"""

from __future__ import annotations

from actors.settings import ClusterSettings
from observability.events import BrokerFenced, BrokerUnfenced, RegistrationAccepted

from .metadata import BrokerRegistration, BrokerRegistrationChangeRecord, MetadataImage, RegisterBrokerRecord
from .proposal import Proposal
from .replication_control import ReplicationControl
from .requests import (
    DUPLICATE_BROKER_REGISTRATION,
    STALE_BROKER_EPOCH,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)


class ClusterControl:
    """Invariant: its maps are those of the current active term (`activate` resets them)."""

    def __init__(self, settings: ClusterSettings, replication: ReplicationControl) -> None:
        self.settings = settings
        self.replication = replication
        # When each broker was last heard from (registration or heartbeat).
        self.last_contact_ms: dict[int, float] = {}
        # What each broker's latest heartbeat said it has applied of the metadata log (exclusive),
        # and the offset of the last record that started a broker's controlled shutdown.
        self.metadata_offsets: dict[int, int] = {}
        self.controlled_shutdown_offsets: dict[int, int] = {}

    def activate(self, working: MetadataImage, now_ms: float) -> None:
        """A new active controller gives every broker a full session before fencing it, and (as
        Kafka's, whose heartbeat manager starts empty) takes a broker already in controlled
        shutdown as having entered it at the log's end."""
        self.last_contact_ms = {b: now_ms for b in working.brokers}
        self.metadata_offsets = {}
        self.controlled_shutdown_offsets = {b.broker_id: working.offset - 1 for b in working.brokers.values() if b.in_controlled_shutdown}

    # --- registration and heartbeats --------------------------------------------------------------

    def register(self, p: Proposal, req: BrokerRegistrationRequest, now_ms: float) -> BrokerRegistrationResponse:
        """ClusterControlManager.registerBroker: a new epoch, the offset of the registration record;
        an unclean shutdown (no previous epoch, or another) takes the broker out of every ELR."""
        old = p.image.brokers.get(req.broker_id)
        if old is not None and not old.fenced:
            # §6.5.1: no new epoch until the previous one has been fenced.
            return BrokerRegistrationResponse(DUPLICATE_BROKER_REGISTRATION, request_id=req.request_id)
        epoch = p.next_offset
        p.add(RegisterBrokerRecord(req.broker_id, epoch, req.rack, fenced=True, log_dirs=tuple(req.log_dirs)))
        clean = old is not None and req.previous_broker_epoch == old.epoch
        p.emit(RegistrationAccepted(req.broker_id, epoch, clean))
        if old is not None and not clean:
            self.replication.handle_broker_unclean_shutdown(p, req.broker_id)
        self.last_contact_ms[req.broker_id] = now_ms
        return BrokerRegistrationResponse(None, epoch, request_id=req.request_id)

    def heartbeat(self, p: Proposal, req: BrokerHeartbeatRequest, now_ms: float) -> BrokerHeartbeatResponse:
        """ClusterControlManager/BrokerHeartbeatManager's processBrokerHeartbeat: the session goes
        on; the broker is unfenced once it caught up, or moves through its controlled shutdown;
        then the log directories it reports failed (ReplicationControl)."""
        b = p.image.brokers.get(req.broker_id)
        if b is None or b.epoch != req.broker_epoch:
            return BrokerHeartbeatResponse(STALE_BROKER_EPOCH)
        self.last_contact_ms[req.broker_id] = now_ms
        self.metadata_offsets[req.broker_id] = req.metadata_offset
        should_shut_down = False
        if req.want_shutdown:
            should_shut_down = self._controlled_shutdown(p, b)
        elif b.fenced and req.metadata_offset >= b.epoch:
            p.add(BrokerRegistrationChangeRecord(b.broker_id, b.epoch, fenced=False))
            p.emit(BrokerUnfenced(b.broker_id, b.epoch))
            self.replication.handle_broker_unfenced(p, b.broker_id)
        self.replication.handle_directories_offline(p, b.broker_id, req.offline_log_dirs)
        fenced = p.image.brokers[b.broker_id].fenced
        return BrokerHeartbeatResponse(None, is_fenced=fenced, should_shut_down=should_shut_down)

    def _controlled_shutdown(self, p: Proposal, b: BrokerRegistration) -> bool:
        """Whether a broker asking to shut down may go now (Kafka's BrokerHeartbeatManager
        .calculateNextBrokerState). A fenced broker goes at once; one that leads nothing is fenced
        and goes at once. One that leads enters controlled shutdown: its leaderships move and it
        leaves every ISR; it may go on a later heartbeat, once it leads nothing and every active
        broker has applied the metadata up to the records that moved them (`lowestActiveOffset`),
        so that no partition is left with a leader nobody knows yet. The registration keeps
        `in_controlled_shutdown` until the broker registers again."""
        if b.fenced:
            return True

        def leads() -> bool:
            return any(part.leader == b.broker_id for part in p.image.partitions.values())

        if not b.in_controlled_shutdown:
            if not leads():
                # UNFENCED -> SHUTDOWN_NOW: fenced at once (handleBrokerFenced), never flagged.
                p.emit(BrokerFenced(b.broker_id, b.epoch, "controlled_shutdown"))
                self.replication.handle_broker_fenced(p, b)
                return True
            p.add(BrokerRegistrationChangeRecord(b.broker_id, b.epoch, in_controlled_shutdown=True))
            self.replication.remove_broker_everywhere(p, b.broker_id, "controlled_shutdown")
            self.controlled_shutdown_offsets[b.broker_id] = p.next_offset - 1
            return False
        if leads() or self.controlled_shutdown_offsets.get(b.broker_id, -1) >= self._lowest_active_offset(p.image):
            return False
        self.controlled_shutdown_offsets.pop(b.broker_id, None)
        p.add(BrokerRegistrationChangeRecord(b.broker_id, b.epoch, fenced=True))
        return True

    def _lowest_active_offset(self, image: MetadataImage) -> int:
        """The least metadata offset (exclusive) that the active brokers (unfenced, not shutting
        down) said in their heartbeats they have applied."""
        active = [self.metadata_offsets.get(b.broker_id, 0) for b in image.brokers.values() if b.active]
        return min(active, default=1 << 62)

    # --- sessions ---------------------------------------------------------------------------------

    def next_session_deadline(self, image: MetadataImage) -> float | None:
        """When the first unfenced broker's session ends unless it is heard from."""
        timeout = self.settings.config.broker_session_timeout_ms
        return min((self.last_contact_ms.get(b.broker_id, 0.0) + timeout for b in image.brokers.values() if not b.fenced), default=None)

    def fence_expired_sessions(self, p: Proposal, now_ms: float) -> None:
        """Fence every unfenced broker silent for broker.session.timeout.ms, in broker id order."""
        timeout = self.settings.config.broker_session_timeout_ms
        for b in sorted(p.image.brokers.values(), key=lambda r: r.broker_id):
            if not b.fenced and now_ms >= self.last_contact_ms.get(b.broker_id, 0.0) + timeout:
                p.emit(BrokerFenced(b.broker_id, b.epoch, "session_timeout"))
                self.replication.handle_broker_fenced(p, b)
