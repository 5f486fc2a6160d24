"""Requests between brokers and the active controller, and the answers (frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass

from actors.contract import pickled_by_fields

from .metadata import PartitionRecord

# errors
NOT_CONTROLLER = "NOT_CONTROLLER"
DUPLICATE_BROKER_REGISTRATION = "DUPLICATE_BROKER_REGISTRATION"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"
INVALID_REQUEST = "INVALID_REQUEST"
# admin answers (Kafka's error names, as `expect_error` names them)
NONE = "NONE"
INVALID_REPLICA_ASSIGNMENT = "INVALID_REPLICA_ASSIGNMENT"
NO_REASSIGNMENT_IN_PROGRESS = "NO_REASSIGNMENT_IN_PROGRESS"
ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"
ELIGIBLE_LEADERS_NOT_AVAILABLE = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
PREFERRED_LEADER_NOT_AVAILABLE = "PREFERRED_LEADER_NOT_AVAILABLE"
TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
INVALID_PARTITIONS = "INVALID_PARTITIONS"
INVALID_REPLICATION_FACTOR = "INVALID_REPLICATION_FACTOR"
INVALID_CONFIG = "INVALID_CONFIG"


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class AdminError:
    """An admin call's answer other than NONE: Kafka's error name and a message for people."""

    error: str
    message: str = ""

    def __str__(self) -> str:
        return f"{self.error}: {self.message}" if self.message else self.error


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    rack: str | None
    # The epoch the broker had when it last shut down cleanly (from its clean-shutdown marker);
    # None after an unclean shutdown or on the first start (KIP-966).
    previous_broker_epoch: int | None
    # Which of the broker's attempts this is: the answer echoes it, so that the broker takes the
    # epoch of its latest attempt only (every accepted registration is a new epoch).
    request_id: int = 0
    # The broker's log directories (Kafka's BrokerRegistrationRequest.logDirs: those it started with).
    log_dirs: tuple[int, ...] = (0,)


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    error: str | None
    broker_epoch: int | None = None
    controller: str | None = None  # with NOT_CONTROLLER: who is
    request_id: int = 0  # the request's


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    metadata_offset: int  # the broker has applied the metadata log below this offset
    want_shutdown: bool = False
    # Every log directory that failed since the broker started (KIP-858: Kafka's
    # BrokerLifecycleManager sends all of them in each heartbeat until it restarts).
    offline_log_dirs: tuple[int, ...] = ()


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    error: str | None
    is_fenced: bool = True
    should_shut_down: bool = False
    controller: str | None = None


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker id, broker epoch) per proposed ISR member
    leader_recovery_state: str
    # The leader's number for this attempt (each send and each retry of a proposal a new one),
    # echoed in the answer: see AlterPartitionResponse.request_attempt.
    attempt: int = 0


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error: str | None
    topic: str
    partition: int
    state: PartitionRecord | None = None  # the committed new state on success
    controller: str | None = None
    # Echoed from the request, so a leader can tell the answer to its latest proposal from a late
    # answer to an earlier one.
    request_leader_epoch: int = -1
    request_partition_epoch: int = -1
    # The attempt answered. A leader takes a refusal only of its latest attempt: Kafka's broker
    # has one AlterPartition request in flight to the controller and gives a request up only by
    # closing its connection (a timeout), so the answer to an attempt it retried never reaches
    # it; a late refusal (of the same proposal, made before the controller accepted its retry)
    # would roll back an ISR the controller has committed. -1: not echoed.
    request_attempt: int = -1


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class GetReplicaLogInfoRequest:
    """The controller asks a broker for its replica's log end (KIP-966 balanced recovery)."""

    request_id: int
    topic: str
    partition: int


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class GetReplicaLogInfoResponse:
    request_id: int
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    error: str | None
    last_epoch: int = -1
    log_end_offset: int = -1


# --- Kafka clients' admin requests, forwarded by a broker (KIP-590) ---------------------------------

# The calls an AdminRequest names (controller_quorum/admin_requests.py carries each out).
ADMIN_CALLS = ("create_topic", "delete_topic", "create_partitions", "elect_leaders", "reassign", "cancel_reassignment",
               "alter_config", "list_reassignments")


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class AdminRequest:
    """One item of a Kafka client's admin request (a topic of CreateTopics, a partition of
    ElectLeaders, a resource of IncrementalAlterConfigs...). A broker's Kafka listener hands it to
    its broker role, which forwards it to the active controller as Kafka's brokers forward admin
    requests since KIP-590; the answer comes back the same way, to `client`."""

    request_id: int
    call: str  # one of ADMIN_CALLS
    topic: str = ""
    partition: int = -1
    count: int = -1  # create_topic: partitions (-1: the default); create_partitions: the new total
    replication_factor: int = -1  # create_topic (-1: the default)
    # create_topic: partition -> replicas; create_partitions: the new partitions' replicas, in order
    assignment: tuple[tuple[int, tuple[int, ...]], ...] | None = None
    replicas: tuple[int, ...] = ()  # reassign: the target
    election: str = "preferred"  # elect_leaders: preferred | unclean
    # create_topic and alter_config: (name, operation, value); operation is Kafka's OpType id
    # (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT), a creation's configs are SETs.
    config: tuple[tuple[str, int, str | None], ...] = ()
    resource: str = "topic"  # alter_config: topic, or broker (`topic` is then the broker's id, "" the cluster default)
    validate_only: bool = False
    allow_replication_factor_change: bool = True  # reassign (KIP-860)
    # list_reassignments: (topic, partitions) to look at; None: every partition
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    client: str = ""  # set by the forwarding broker: the connection the answer goes back to


@pickled_by_fields
@dataclass(frozen=True, slots=True)
class AdminResponse:
    request_id: int
    error: str | None  # Kafka's error name; None: carried out
    message: str = ""
    client: str = ""
    controller: str | None = None  # with NOT_CONTROLLER: who is, if known
    # create_topic: the topic as made (validate_only: as it would be)
    topic_id: str | None = None
    partitions: int = -1
    replication_factor: int = -1
    # list_reassignments: (topic, partition, replicas, adding, removing) per partition in reassignment
    reassignments: tuple[tuple[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()
