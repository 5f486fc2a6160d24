"""Metadata records and the image they build (the KRaft metadata log's state machine).

Every change the controller makes is one of these records (the protocol description §6.3): the
image is a pure function of the committed log, so every controller and broker that applied the same
prefix sees the same cluster. A partition change record carries the partition's whole new state
(Kafka's PartitionChangeRecord carries a delta; the full state is simpler to check and replays the
same).

Broker epochs are the offsets of their RegisterBrokerRecord in the log, so they only grow (§6.5.1).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from storage.codec import record_type

RECOVERED = "RECOVERED"
# A broker's log directories are numbers 0..N-1 (Kafka names them by Uuid: DirectoryId). A broker
# with one directory has only this one, and a partition record whose replicas are all in it keeps
# no directories (`PartitionRecord.directories` empty), as records did before KIP-858.
DEFAULT_DIR = 0
RECOVERING = "RECOVERING"  # after an unclean election, until the new leader recovers (KIP-704)


# The namespace of kraftlab's topic ids (uuid5): an id is a pure function of the topic's name and the
# metadata offset of its TopicRecord, so a replay makes the same ids and a topic created again under
# the same name (at a later offset) gets a new one.
_TOPIC_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "kraftlab:topic")


def new_topic_id(name: str, metadata_offset: int) -> str:
    """A topic id in Kafka's printed form (Uuid.toString: 22 characters of URL-safe base64)."""
    raw = uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{name}@{metadata_offset}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@record_type
@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    broker_id: int
    broker_epoch: int
    rack: str | None
    fenced: bool = True
    log_dirs: tuple[int, ...] = (DEFAULT_DIR,)  # the broker's online log directories (Kafka's logDirs)


@record_type
@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None  # None: unchanged
    in_controlled_shutdown: bool | None = None
    # The broker's online log directories from now on (None: unchanged): those left after it
    # reported others offline (KIP-858, ReplicationControlManager.handleDirectoriesOffline).
    log_dirs: tuple[int, ...] | None = None


@record_type
@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str  # the topic's identity: a topic created again under the same name gets a new one


@record_type
@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    """DeleteTopics (Kafka's RemoveTopicRecord): the topic, its partitions and its configs go."""

    name: str
    topic_id: str


@record_type
@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A partition's whole state: written at creation and at every change (`reason` says why)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    leader: int | None
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: str = RECOVERED
    reason: str = "create"
    # The kind of the election this record makes, None when the leader stays: "clean" (from the
    # ISR), "elr" (clean, from the ELR), "preferred" (clean, ElectLeaders), "unclean", or
    # "last_known_leader" (unclean recovery of that strategy).
    election: str | None = None
    # A reassignment in progress (§6.7): replicas joining, and replicas leaving once it completes.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    # Each replica's log directory, in the order of `replicas` (Kafka's PartitionRecord
    # .directories); empty when every replica is in DEFAULT_DIR.
    directories: tuple[int, ...] = ()

    def dir_of(self, broker: int) -> int:
        """The log directory of `broker`'s replica (DEFAULT_DIR for a broker that holds none)."""
        if not self.directories or broker not in self.replicas:
            return DEFAULT_DIR
        return self.directories[self.replicas.index(broker)]

    def state_fields(self) -> dict[str, Any]:
        """The state conditions and reports name (leader, epochs, replica sets), as plain values:
        as the cluster view holds them (observability/states.PartitionState)."""
        return {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "elr": list(self.elr),
            "last_known_elr": list(self.last_known_elr),
        }


@record_type
@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource: str  # "topic" or "cluster"
    name: str  # the topic's name, or "" for the cluster
    key: str
    value: Any


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    log_dirs: tuple[int, ...] = (DEFAULT_DIR,)  # online: the registered ones not reported offline

    @property
    def active(self) -> bool:
        """Can lead and be added to an ISR: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown

    def has_online_dir(self, log_dir: int) -> bool:
        """Kafka's BrokerRegistration.hasOnlineDir: the directory is one the broker registered and
        has not reported offline since."""
        return log_dir in self.log_dirs

    def can_lead(self, part: PartitionRecord) -> bool:
        """Kafka's ReplicationControlManager.LeaderAcceptor: an active broker whose replica of
        `part` is in an online log directory (KIP-858: a replica on a failed disk cannot lead)."""
        return self.active and self.has_online_dir(part.dir_of(self.broker_id))


@dataclass
class MetadataImage:
    """Invariant: only `apply` changes it, one committed (or, on the active controller, appended)
    record at a time."""

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)  # name -> topic id
    partitions: dict[tuple[str, int], PartitionRecord] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    cluster_config: dict[str, Any] = field(default_factory=dict)
    offset: int = 0  # records applied so far (the next offset)
    # The partitions without a leader (an index of `partitions`, kept by `apply`): what unclean
    # recovery looks at, without reading every partition at every change.
    leaderless: dict[tuple[str, int], None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.leaderless = {k: None for k, p in self.partitions.items() if p.leader is None}

    def copy(self) -> MetadataImage:
        return MetadataImage(
            dict(self.brokers),
            dict(self.topics),
            dict(self.partitions),
            {k: dict(v) for k, v in self.topic_configs.items()},
            dict(self.cluster_config),
            self.offset,
        )

    def apply(self, offset: int, rec: Any) -> None:
        if isinstance(rec, RegisterBrokerRecord):
            self.brokers[rec.broker_id] = BrokerRegistration(rec.broker_id, rec.broker_epoch, rec.rack, rec.fenced, log_dirs=rec.log_dirs)
        elif isinstance(rec, BrokerRegistrationChangeRecord):
            b = self.brokers.get(rec.broker_id)
            if b is not None and b.epoch == rec.broker_epoch:
                if rec.fenced is not None:
                    b = replace(b, fenced=rec.fenced)
                    if not rec.fenced:
                        b = replace(b, in_controlled_shutdown=False)
                if rec.in_controlled_shutdown is not None:
                    b = replace(b, in_controlled_shutdown=rec.in_controlled_shutdown)
                if rec.log_dirs is not None:
                    b = replace(b, log_dirs=rec.log_dirs)
                self.brokers[rec.broker_id] = b
        elif isinstance(rec, TopicRecord):
            self.topics[rec.name] = rec.topic_id
        elif isinstance(rec, RemoveTopicRecord):
            if self.topics.get(rec.name) == rec.topic_id:
                del self.topics[rec.name]
                self.topic_configs.pop(rec.name, None)
                for key in [k for k in self.partitions if k[0] == rec.name]:
                    del self.partitions[key]
                    self.leaderless.pop(key, None)
        elif isinstance(rec, PartitionRecord):
            key = (rec.topic, rec.partition)
            self.partitions[key] = rec
            if rec.leader is None:
                self.leaderless[key] = None
            else:
                self.leaderless.pop(key, None)
        elif isinstance(rec, ConfigRecord):
            target = self.cluster_config if rec.resource == "cluster" else self.topic_configs.setdefault(rec.name, {})
            if rec.value is None:
                target.pop(rec.key, None)
            else:
                target[rec.key] = rec.value
        self.offset = offset + 1

    def is_active(self, broker: int) -> bool:
        b = self.brokers.get(broker)
        return b is not None and b.active

    def partitions_of(self, broker: int) -> list[PartitionRecord]:
        return [p for p in self.partitions.values() if broker in p.replicas]
