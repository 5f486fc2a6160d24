"""A Kafka client's admin request on the active controller (Kafka's ControllerApis, reached
through a broker that forwards it, KIP-590): the call it names, carried out by the control
managers exactly as a scenario's admin step is, after the checks Kafka's controller makes of what
arrives on the wire (defaults, manual assignments, configs as strings).

Configs: kraftlab models a few of Kafka's configs; they are parsed and validated as Kafka's
ConfigDef does (ControllerConfigurationValidator, ConfigurationControlManager). Any other name is
answered INVALID_CONFIG, as Kafka answers a name it does not know ("Unknown topic config name"),
also for a name Kafka knows and kraftlab does not model (rather than accepting what it would
ignore).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.settings import ClusterSettings

from . import configuration_control
from .metadata import MetadataImage
from .proposal import Proposal
from .replication_control import ReplicationControl
from .requests import (
    INVALID_CONFIG,
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    TOPIC_ALREADY_EXISTS,
    AdminError,
    AdminRequest,
    AdminResponse,
)

INVALID_TOPIC_EXCEPTION = "INVALID_TOPIC_EXCEPTION"
POLICY_VIOLATION = "POLICY_VIOLATION"
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP and ReplicationControlManager.MAX_PARTITIONS_PER_BATCH.
MAX_RECORDS_PER_USER_OP = 10_000
# Kafka's broker defaults for a CreateTopics that leaves them to the cluster (-1): num.partitions
# and default.replication.factor.
DEFAULT_NUM_PARTITIONS = 1
DEFAULT_REPLICATION_FACTOR = 1

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# The configs kraftlab models: name -> (Kafka's type, the least value ConfigDef accepts).
# segment.bytes: at least LegacyRecord.RECORD_OVERHEAD_V0 (14), as Kafka's LogConfig.
TOPIC_CONFIGS: dict[str, tuple[str, int | None]] = {
    "min.insync.replicas": ("INT", 1),
    "unclean.leader.election.enable": ("BOOLEAN", None),
    "segment.bytes": ("INT", 14),
}
# The cluster-wide dynamic defaults (a BROKER resource named ""), as the controller reads them.
CLUSTER_CONFIGS: dict[str, tuple[str, int | None]] = {
    "min.insync.replicas": ("INT", 1),
    "unclean.leader.election.enable": ("BOOLEAN", None),
    "log.segment.bytes": ("INT", 14),
}


def parse_config(name: str, kind: str, least: int | None, raw: str | None) -> Any:
    """A config's value from its string, or the AdminError Kafka's ConfigDef.parse answers."""
    if raw is None:
        return AdminError(INVALID_CONFIG, f"Null value not supported for topic configs: {name}")
    text = raw.strip()
    if kind == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            return AdminError(INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: Expected value to be either true or false")
        return text.lower() == "true"
    try:
        value = int(text)
    except ValueError:
        return AdminError(INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: Not a number of type INT")
    if least is not None and value < least:
        return AdminError(INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Value must be at least {least}")
    return value


def config_changes(req: AdminRequest, known: dict[str, tuple[str, int | None]], elr: bool) -> dict[str, Any] | AdminError:
    """The changes an IncrementalAlterConfigs (or a creation's configs) asks for: name -> value
    (None: back to the default), or Kafka's error for the whole resource."""
    what = "topic" if req.resource == "topic" else "broker"
    changes: dict[str, Any] = {}
    for name, op, raw in req.config:
        if op not in OP_NAMES:
            return AdminError(INVALID_REQUEST, f"Unknown operation type {op}")
        if name not in known:
            return AdminError(INVALID_CONFIG, f"Unknown {what} config name: {name} (kraftlab models {', '.join(sorted(known))})")
        if op in (APPEND, SUBTRACT):
            # Kafka's ConfigurationControlManager: only a LIST config can be appended to or subtracted from.
            return AdminError(INVALID_CONFIG, f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST.")
        if op == DELETE:
            if elr and req.resource == "broker" and name == "min.insync.replicas":
                return AdminError(INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
            changes[name] = None
            continue
        value = parse_config(name, *known[name], raw)
        if isinstance(value, AdminError):
            return value
        changes[name] = value
    return changes


def invalid_topic_name(name: str) -> AdminError | None:
    """Kafka's Topic.validate (INVALID_TOPIC_EXCEPTION): not empty, not "." or "..", at most 249
    characters of ASCII letters and digits, '.', '_' and '-'."""
    if not name:
        return AdminError(INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        return AdminError(INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > 249:
        return AdminError(INVALID_TOPIC_EXCEPTION, f"Topic name is illegal, it can't be longer than 249 characters, topic name: {name}")
    if any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name):
        return AdminError(INVALID_TOPIC_EXCEPTION, f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
                                                   "alphanumerics, '.', '_' and '-'")
    return None


def _create_topic(replication: ReplicationControl, req: AdminRequest) -> Callable[[Proposal], AdminError | None]:
    """Kafka's ReplicationControlManager.createTopics/createTopic, in its order of checks."""

    def run(p: Proposal) -> AdminError | None:
        invalid = invalid_topic_name(req.topic)
        if invalid is not None:
            return invalid
        if req.topic in p.image.topics:
            return AdminError(TOPIC_ALREADY_EXISTS, f"Topic '{req.topic}' already exists.")
        config = config_changes(req, TOPIC_CONFIGS, False)
        if isinstance(config, AdminError):
            return config
        if req.assignment:
            if req.replication_factor != -1:
                return AdminError(INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not set to -1.")
            if req.count != -1:
                return AdminError(INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1.")
            assignment: dict[int, list[int]] = {}
            for index, replicas in req.assignment:
                if index in assignment:
                    return AdminError(INVALID_REPLICA_ASSIGNMENT, f"Found multiple manual partition assignments for partition {index}")
                assignment[index] = list(replicas)
            if set(assignment) != set(range(len(assignment))):
                return AdminError(INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
            first = len(assignment[0])
            return replication.create_topic(p, req.topic, len(assignment), first, assignment, config)
        if req.replication_factor < -1 or req.replication_factor == 0:
            return AdminError(INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value.")
        if req.count < -1 or req.count == 0:
            return AdminError(INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        count = DEFAULT_NUM_PARTITIONS if req.count == -1 else req.count
        rf = DEFAULT_REPLICATION_FACTOR if req.replication_factor == -1 else req.replication_factor
        return replication.create_topic(p, req.topic, count, rf, None, config)

    return run


def _create_partitions(replication: ReplicationControl, req: AdminRequest) -> Callable[[Proposal], AdminError | None]:
    def run(p: Proposal) -> AdminError | None:
        existing = sum(1 for (t, _) in p.image.partitions if t == req.topic)
        if req.topic in p.image.topics and req.count - existing > MAX_RECORDS_PER_USER_OP:
            # Kafka's controller makes its records in a list bounded by MAX_RECORDS_PER_USER_OP;
            # overflowing it is answered so (EventHandlerExceptionInfo: BoundedListTooLongException).
            return AdminError(POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
        assignment = None
        if req.assignment is not None:
            if req.topic in p.image.topics and req.count > existing and len(req.assignment) != req.count - existing:
                return AdminError(INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {req.count - existing} additional partition(s), but only "
                                                              f"{len(req.assignment)} assignment(s) were specified.")
            assignment = {existing + i: list(replicas) for i, (_, replicas) in enumerate(req.assignment)}
        return replication.create_partitions(p, req.topic, req.count, assignment)

    return run


def _reassign(replication: ReplicationControl, req: AdminRequest) -> Callable[[Proposal], AdminError | None]:
    def run(p: Proposal) -> AdminError | None:
        part = p.image.partitions.get((req.topic, req.partition))
        if part is not None and not req.allow_replication_factor_change:
            # KIP-860 (Kafka's validatePartitionReplicationFactorUnchanged): against the target of
            # a reassignment in progress, else the replica set.
            current = (set(part.replicas) | set(part.adding_replicas)) - set(part.removing_replicas)
            if len(current) != len(req.replicas):
                return AdminError(INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {len(current)} to {len(req.replicas)}")
        return replication.reassign(p, req.topic, req.partition, list(req.replicas))

    return run


def _alter_config(settings: ClusterSettings, req: AdminRequest) -> Callable[[Proposal], AdminError | None]:
    def run(p: Proposal) -> AdminError | None:
        if req.resource == "broker" and req.topic != "":
            # Kafka keeps per-broker dynamic configs; kraftlab models only the cluster-wide ones.
            if not req.topic.isdigit():
                return AdminError(INVALID_REQUEST, "Unable to parse broker name as a base 10 number.")
            if settings.protocol.elr and any(name == "min.insync.replicas" for name, _, _ in req.config):
                return AdminError(INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
            return AdminError(INVALID_CONFIG, "kraftlab models no per-broker dynamic config: alter the cluster default (broker resource \"\")")
        changes = config_changes(req, TOPIC_CONFIGS if req.resource == "topic" else CLUSTER_CONFIGS, settings.protocol.elr)
        if isinstance(changes, AdminError):
            return changes
        return configuration_control.alter_config(p, req.topic if req.resource == "topic" else None, changes)

    return run


def operation(replication: ReplicationControl, settings: ClusterSettings, req: AdminRequest) -> Callable[[Proposal], AdminError | None]:
    """The write operation an admin request names (all but list_reassignments, a read)."""
    match req.call:
        case "create_topic":
            return _create_topic(replication, req)
        case "delete_topic":
            return lambda p: replication.delete_topic(p, req.topic)
        case "create_partitions":
            return _create_partitions(replication, req)
        case "elect_leaders":
            return lambda p: replication.elect_leaders(p, req.topic, req.partition, req.election)
        case "reassign":
            return _reassign(replication, req)
        case "cancel_reassignment":
            return lambda p: replication.cancel_reassignment(p, req.topic, req.partition)
        case "alter_config":
            return _alter_config(settings, req)
    return lambda p: AdminError(INVALID_REQUEST, f"unknown admin call {req.call!r}")


def created(image: MetadataImage, req: AdminRequest, answer: AdminResponse) -> AdminResponse:
    """A create_topic's answer with the topic as made: its id, partitions and replication factor."""
    parts = [p for (t, _), p in image.partitions.items() if t == req.topic]
    if answer.error is not None or not parts:
        return answer
    return AdminResponse(answer.request_id, None, client=answer.client, topic_id=image.topics.get(req.topic), partitions=len(parts),
                         replication_factor=len(parts[0].replicas))


def list_reassignments(image: MetadataImage, req: AdminRequest) -> AdminResponse:
    """ListPartitionReassignments (Kafka's ReplicationControlManager.listPartitionReassignments,
    read at the committed offset): the partitions asked for, or all, that have a reassignment in
    progress; an unknown topic or partition is left out."""
    wanted = None if req.partitions is None else {(t, i) for t, indexes in req.partitions for i in indexes}
    found = tuple((p.topic, p.partition, tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                  for key, p in sorted(image.partitions.items())
                  if (wanted is None or key in wanted) and (p.adding_replicas or p.removing_replicas))
    return AdminResponse(req.request_id, None, client=req.client, reassignments=found)
