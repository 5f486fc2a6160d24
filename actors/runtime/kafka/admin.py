"""Kafka's admin APIs on a listener: what a client asks, as the broker serves it.

A write (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments,
IncrementalAlterConfigs) and ListPartitionReassignments are forwarded, as Kafka's brokers forward
them since KIP-590: each item of the request (a topic, a partition, a config resource) becomes an
`AdminRequest` to the broker role, which sends it to the active controller it knows; the
controller checks and carries it out as a scenario's admin step (controller_quorum/
admin_requests.py) and answers once its records commit. An answer NOT_CONTROLLER (no controller
known, or one that no longer leads) is asked again after a pause, as Kafka's forwarding channel
retries; no answer within the request's timeout is REQUEST_TIMED_OUT (Kafka's ForwardingManager
on a timeout). DescribeConfigs is answered by the broker from its metadata image, as Kafka's is.

Each item answered is a `kafka_request` row with its error. No I/O here: the gateway's `_ask`
reaches the role through its BrokerPort.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from kafka.protocol.admin.configs import DescribeConfigsResponse, IncrementalAlterConfigsResponse
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
)

from controller_quorum.admin_requests import CLUSTER_CONFIGS, MAX_RECORDS_PER_USER_OP, TOPIC_CONFIGS
from controller_quorum.requests import NOT_CONTROLLER, AdminRequest, AdminResponse

from .apis import (
    ALTER_PARTITION_REASSIGNMENTS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_PARTITION_REASSIGNMENTS,
    error_code,
    topic_uuid,
)

if TYPE_CHECKING:
    from .gateway import Gateway

# How long to wait before asking again after NOT_CONTROLLER (Kafka's retry.backoff.ms).
ADMIN_RETRY_MS = 100.0
# The wait for a request without a timeout of its own (IncrementalAlterConfigs), or one of 0 or
# less: Kafka's broker-to-controller channel's (request.timeout.ms).
DEFAULT_TIMEOUT_MS = 30_000.0
# Kafka's ConfigResource.Type and DescribeConfigsResponse.ConfigSource / ConfigType ids.
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG = 1, 3, 4
CONFIG_TYPES = {"BOOLEAN": 1, "INT": 3}
ELECTION_TYPES = {0: "preferred", 1: "unclean"}
# A topic's config and the cluster-wide one it falls back to (Kafka's synonyms).
CLUSTER_NAME = {"segment.bytes": "log.segment.bytes"}
NULL_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


class ConfigView(NamedTuple):
    """The configs a broker's metadata image holds, as DescribeConfigs answers them."""

    topics: dict[str, dict[str, Any]]  # topic -> its dynamic configs
    cluster: dict[str, Any]  # the cluster-wide dynamic configs
    static: dict[str, Any]  # the broker's static configs (the scenario's cluster.config)


async def answer(gw: Gateway, api_key: int, request: Any, version: int) -> Any:
    handler = {CREATE_TOPICS: _create_topics, DELETE_TOPICS: _delete_topics, CREATE_PARTITIONS: _create_partitions,
               ELECT_LEADERS: _elect_leaders, ALTER_PARTITION_REASSIGNMENTS: _alter_reassignments,
               LIST_PARTITION_REASSIGNMENTS: _list_reassignments, DESCRIBE_CONFIGS: _describe_configs,
               INCREMENTAL_ALTER_CONFIGS: _incremental_alter_configs}[api_key]
    return await handler(gw, request, version)


async def forward(gw: Gateway, make: Callable[[int], AdminRequest], timeout_ms: float) -> AdminResponse:
    """One AdminRequest to the active controller through the broker role; its answer, asked again
    after NOT_CONTROLLER until `timeout_ms` has passed (then REQUEST_TIMED_OUT)."""
    wait_ms = timeout_ms if timeout_ms > 0 else DEFAULT_TIMEOUT_MS
    deadline = gw.port.now_ms() + wait_ms
    while True:
        future = gw._ask(make)
        request_id = gw.conn.next_request_id - 1
        remaining = deadline - gw.port.now_ms()
        try:
            reply = await asyncio.wait_for(future, max(remaining, 0.0) / 1000.0)
        except TimeoutError:
            gw.conn.waiting.pop(request_id, None)
            return AdminResponse(request_id, "REQUEST_TIMED_OUT", f"no answer from the controller within {wait_ms:g} ms")
        if reply.error != NOT_CONTROLLER:
            return reply
        if gw.port.now_ms() + ADMIN_RETRY_MS >= deadline:
            return AdminResponse(request_id, "REQUEST_TIMED_OUT", f"no active controller took the request within {wait_ms:g} ms")
        await asyncio.sleep(ADMIN_RETRY_MS / 1000.0)


def _duplicates(names: list[Any]) -> set[Any]:
    return {n for n, c in Counter(names).items() if c > 1}


def _message(reply: AdminResponse) -> str | None:
    return None if reply.error is None else reply.message or None


# --- topics -----------------------------------------------------------------------------------------


async def _create_topics(gw: Gateway, request: Any, version: int) -> Any:
    topics = list(request.topics)
    duplicates = _duplicates([t.name for t in topics])
    # Kafka's ReplicationControlManager.validateTotalNumberOfPartitions: the whole request is refused.
    total = sum(len(t.assignments) if t.assignments else (1 if t.num_partitions == -1 else max(t.num_partitions, 0)) for t in topics)
    too_many = total > MAX_RECORDS_PER_USER_OP

    async def one(t: Any) -> AdminResponse:
        if t.name in duplicates:
            return AdminResponse(-1, "INVALID_REQUEST", "Duplicate topic name.")
        if too_many:
            return AdminResponse(-1, "POLICY_VIOLATION", "Excessively large number of partitions per request.")
        assignment = tuple((a.partition_index, tuple(a.broker_ids)) for a in t.assignments) or None
        config = tuple((c.name, 0, c.value) for c in t.configs)
        return await forward(gw, lambda rid: AdminRequest(rid, "create_topic", t.name, count=t.num_partitions,
                                                          replication_factor=t.replication_factor, assignment=assignment, config=config,
                                                          validate_only=bool(request.validate_only)), request.timeout_ms)

    replies = await asyncio.gather(*(one(t) for t in topics))
    view = gw.port.configs()
    results = []
    for t, reply in zip(topics, replies, strict=True):
        gw._row("CreateTopics", version, t.name, error=reply.error, count=reply.partitions if reply.error is None else None)
        result = CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=error_code(reply.error), error_message=_message(reply))
        if version >= 7:
            result.topic_id = topic_uuid(reply.topic_id or NULL_UUID)
        if version >= 5:
            result.topic_config_error_code = 0
            result.num_partitions, result.replication_factor = reply.partitions, reply.replication_factor
            asked = {c.name: c.value for c in t.configs}
            result.configs = [] if reply.error is not None else [
                CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs(name=name, value=value, read_only=False, config_source=source,
                                                                                 is_sensitive=False)
                for name, (value, source, _) in sorted(_topic_configs(view, t.name, asked).items())]
        results.append(result)
    return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)


async def _delete_topics(gw: Gateway, request: Any, version: int) -> Any:
    """By name (v1-5) or by name or id (v6: a topic id the broker's image does not know is
    UNKNOWN_TOPIC_ID; both given is INVALID_REQUEST, as Kafka's ControllerApis.deleteTopics)."""
    view = gw.port.cluster_view()
    by_id = {u: name for name, u in view.topics.items()}
    wanted = [(t.name, t.topic_id) for t in request.topics] if version >= 6 else [(name, None) for name in request.topic_names]
    duplicates = _duplicates([name for name, _ in wanted if name])

    async def one(name: str | None, topic_id: Any) -> tuple[str | None, AdminResponse]:
        has_id = topic_id is not None and topic_id.int != 0
        if name and has_id:
            return name, AdminResponse(-1, "INVALID_REQUEST", "You may not specify both topic name and topic id.")
        if has_id:
            name = by_id.get(topic_id)
            if name is None:
                return None, AdminResponse(-1, "UNKNOWN_TOPIC_ID", "This server does not host this topic ID.")
        if name in duplicates:
            return name, AdminResponse(-1, "INVALID_REQUEST", "Duplicate topic name.")
        return name, await forward(gw, lambda rid: AdminRequest(rid, "delete_topic", name or ""), request.timeout_ms)

    answers = await asyncio.gather(*(one(name, topic_id) for name, topic_id in wanted))
    results = []
    for (_, asked_id), (name, reply) in zip(wanted, answers, strict=True):
        gw._row("DeleteTopics", version, name, error=reply.error)
        result = DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=error_code(reply.error))
        if version >= 5:
            result.error_message = _message(reply)
        if version >= 6:
            result.topic_id = view.topics.get(name) if name in view.topics else asked_id
        results.append(result)
    return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=results)


async def _create_partitions(gw: Gateway, request: Any, version: int) -> Any:
    topics = list(request.topics)
    duplicates = _duplicates([t.name for t in topics])

    async def one(t: Any) -> AdminResponse:
        if t.name in duplicates:
            return AdminResponse(-1, "INVALID_REQUEST", "Duplicate topic name.")
        assignment = None if t.assignments is None else tuple((i, tuple(a.broker_ids)) for i, a in enumerate(t.assignments))
        return await forward(gw, lambda rid: AdminRequest(rid, "create_partitions", t.name, count=t.count, assignment=assignment,
                                                          validate_only=bool(request.validate_only)), request.timeout_ms)

    replies = await asyncio.gather(*(one(t) for t in topics))
    results = []
    for t, reply in zip(topics, replies, strict=True):
        gw._row("CreatePartitions", version, t.name, error=reply.error, count=t.count)
        results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name, error_code=error_code(reply.error),
                                                                            error_message=_message(reply)))
    return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)


# --- partitions -------------------------------------------------------------------------------------


async def _elect_leaders(gw: Gateway, request: Any, version: int) -> Any:
    """Preferred or unclean elections of the partitions named, or of every partition (null: then,
    as Kafka's controller, those whose election is not needed are left out of the answer)."""
    election = ELECTION_TYPES.get(request.election_type if version >= 1 else 0)
    every = request.topic_partitions is None
    if every:
        view = gw.port.cluster_view()
        wanted = [(name, sorted(i for (t, i) in view.partitions if t == name)) for name in sorted(view.topics)]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in request.topic_partitions]

    async def one(topic: str, partition: int) -> AdminResponse:
        if election is None:  # Kafka's electionType(): "Unknown election type"
            return AdminResponse(-1, "INVALID_REQUEST", f"Unknown election type {request.election_type}")
        return await forward(gw, lambda rid: AdminRequest(rid, "elect_leaders", topic, partition, election=election), request.timeout_ms)

    replies = await asyncio.gather(*(one(topic, i) for topic, parts in wanted for i in parts))
    results, k = [], 0
    for topic, parts in wanted:
        found = []
        for i in parts:
            reply = replies[k]
            k += 1
            if every and reply.error == "ELECTION_NOT_NEEDED":
                continue
            gw._row("ElectLeaders", version, topic, i, reply.error)
            found.append(ElectLeadersResponse.ReplicaElectionResult.PartitionResult(partition_id=i, error_code=error_code(reply.error),
                                                                                    error_message=_message(reply)))
        results.append(ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=found))
    return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=0, replica_election_results=results)


async def _alter_reassignments(gw: Gateway, request: Any, version: int) -> Any:
    """A target replica list starts (or replaces) a reassignment; null cancels the one in progress."""
    allow = bool(request.allow_replication_factor_change) if version >= 1 else True

    def make(topic: str, p: Any) -> Callable[[int], AdminRequest]:
        if p.replicas is None:
            return lambda rid: AdminRequest(rid, "cancel_reassignment", topic, p.partition_index)
        return lambda rid: AdminRequest(rid, "reassign", topic, p.partition_index, replicas=tuple(p.replicas),
                                        allow_replication_factor_change=allow)

    items = [(t.name, p) for t in request.topics for p in t.partitions]
    replies = await asyncio.gather(*(forward(gw, make(topic, p), request.timeout_ms) for topic, p in items))
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), reply in zip(items, replies, strict=True):
        gw._row("AlterPartitionReassignments", version, topic, p.partition_index, reply.error)
        by_topic.setdefault(topic, []).append(AlterPartitionReassignmentsResponse.ReassignableTopicResponse.ReassignablePartitionResponse(
            partition_index=p.partition_index, error_code=error_code(reply.error), error_message=_message(reply)))
    response = AlterPartitionReassignmentsResponse(
        version=version, throttle_time_ms=0, error_code=0, error_message=None,
        responses=[AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])
    if version >= 1:
        response.allow_replication_factor_change = allow
    return response


async def _list_reassignments(gw: Gateway, request: Any, version: int) -> Any:
    partitions = None if request.topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in request.topics)
    reply = await forward(gw, lambda rid: AdminRequest(rid, "list_reassignments", partitions=partitions), request.timeout_ms)
    by_topic: dict[str, list[Any]] = {}
    for topic, index, replicas, adding, removing in reply.reassignments:
        by_topic.setdefault(topic, []).append(ListPartitionReassignmentsResponse.OngoingTopicReassignment.OngoingPartitionReassignment(
            partition_index=index, replicas=list(replicas), adding_replicas=list(adding), removing_replicas=list(removing)))
    gw._row("ListPartitionReassignments", version, error=reply.error, count=len(reply.reassignments))
    return ListPartitionReassignmentsResponse(
        version=version, throttle_time_ms=0, error_code=error_code(reply.error), error_message=_message(reply),
        topics=[ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])


# --- configs ----------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _topic_configs(view: ConfigView, topic: str, own: dict[str, Any]) -> dict[str, tuple[str, int, list[tuple[str, str, int]]]]:
    """Each modelled topic config: its value, source and synonyms (the topic's own value, the
    cluster's dynamic default, the static config), as Kafka's broker describes a topic."""
    found = {}
    for name in TOPIC_CONFIGS:
        cluster_name = CLUSTER_NAME.get(name, name)
        synonyms = []
        if name in own:
            synonyms.append((name, _text(own[name]), TOPIC_CONFIG))
        if cluster_name in view.cluster:
            synonyms.append((cluster_name, _text(view.cluster[cluster_name]), DYNAMIC_DEFAULT_BROKER_CONFIG))
        synonyms.append((cluster_name, _text(view.static[cluster_name]), STATIC_BROKER_CONFIG))
        found[name] = (synonyms[0][1], synonyms[0][2], synonyms)
    return found


def _broker_configs(view: ConfigView, defaults_only: bool) -> dict[str, tuple[str, int, list[tuple[str, str, int]]]]:
    found = {}
    for name in CLUSTER_CONFIGS:
        synonyms = [(name, _text(view.cluster[name]), DYNAMIC_DEFAULT_BROKER_CONFIG)] if name in view.cluster else []
        if not defaults_only:
            synonyms.append((name, _text(view.static[name]), STATIC_BROKER_CONFIG))
        if synonyms:
            found[name] = (synonyms[0][1], synonyms[0][2], synonyms)
    return found


async def _describe_configs(gw: Gateway, request: Any, version: int) -> Any:
    """Topics and this broker (or the cluster's defaults, the broker resource ""): the configs
    kraftlab models, from the broker's metadata image, as Kafka's broker answers (ConfigHelper)."""
    view = gw.port.configs()
    known = gw.port.cluster_view().topics
    results = []
    for r in request.resources:
        error, message, configs = None, None, {}
        if r.resource_type == TOPIC_RESOURCE:
            if r.resource_name in known:
                configs = _topic_configs(view, r.resource_name, view.topics.get(r.resource_name, {}))
            else:
                error, message = "UNKNOWN_TOPIC_OR_PARTITION", f"Topic {r.resource_name} does not exist"
        elif r.resource_type == BROKER_RESOURCE:
            if r.resource_name == "":
                configs = _broker_configs(view, defaults_only=True)
            elif r.resource_name == str(gw.port.broker_id):
                configs = _broker_configs(view, defaults_only=False)
            else:
                error, message = "INVALID_REQUEST", f"Unexpected broker id, expected {gw.port.broker_id} or empty string, but received {r.resource_name}"
        else:
            error, message = "INVALID_REQUEST", f"Unsupported resource type {r.resource_type}"
        keys = r.configuration_keys
        entries = []
        for name, (value, source, synonyms) in sorted(configs.items()):
            if keys is not None and name not in keys:
                continue
            kind = (TOPIC_CONFIGS if r.resource_type == TOPIC_RESOURCE else CLUSTER_CONFIGS)[name][0]
            entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult(
                name=name, value=value, read_only=False, config_source=source, is_sensitive=False,
                synonyms=[DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym(
                    name=n, value=v, source=s) for n, v, s in synonyms] if request.include_synonyms else [])
            if version >= 3:
                entry.config_type, entry.documentation = CONFIG_TYPES[kind], None
            entries.append(entry)
        gw._row("DescribeConfigs", version, r.resource_name if r.resource_type == TOPIC_RESOURCE else None, error=error, count=len(entries))
        results.append(DescribeConfigsResponse.DescribeConfigsResult(error_code=error_code(error), error_message=message,
                                                                     resource_type=r.resource_type, resource_name=r.resource_name,
                                                                     configs=entries))
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


async def _incremental_alter_configs(gw: Gateway, request: Any, version: int) -> Any:
    """A topic's configs, or the cluster's defaults (the broker resource ""), through the
    controller; validate_only checks without writing."""
    resources = list(request.resources)
    duplicates = _duplicates([(r.resource_type, r.resource_name) for r in resources])

    async def one(r: Any) -> AdminResponse:
        if (r.resource_type, r.resource_name) in duplicates:
            return AdminResponse(-1, "INVALID_REQUEST", "Duplicate resource.")
        if r.resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE):
            return AdminResponse(-1, "INVALID_REQUEST", f"Unexpected resource type {r.resource_type}")
        if _duplicates([c.name for c in r.configs]):
            return AdminResponse(-1, "INVALID_REQUEST", "Error due to duplicate config keys")
        config = tuple((c.name, c.config_operation, c.value) for c in r.configs)
        resource = "topic" if r.resource_type == TOPIC_RESOURCE else "broker"
        return await forward(gw, lambda rid: AdminRequest(rid, "alter_config", r.resource_name, config=config, resource=resource,
                                                          validate_only=bool(request.validate_only)), DEFAULT_TIMEOUT_MS)

    replies = await asyncio.gather(*(one(r) for r in resources))
    results = []
    for r, reply in zip(resources, replies, strict=True):
        gw._row("IncrementalAlterConfigs", version, r.resource_name if r.resource_type == TOPIC_RESOURCE else None, error=reply.error,
                count=len(r.configs))
        results.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=error_code(reply.error), error_message=_message(reply), resource_type=r.resource_type, resource_name=r.resource_name))
    return IncrementalAlterConfigsResponse(version=version, throttle_time_ms=0, responses=results)
