"""The admin APIs of a Kafka listener (actors/runtime/kafka/admin.py) through its gateway: requests
that kafka-python's client encodes go in, decoded answers come out. Behind the gateway is the real
active controller (controller_quorum/controller.py, its admin path in admin_requests.py) on a
single voter whose appends commit at once, reached as the broker role forwards (KIP-590); the
answers' error codes are Kafka's, and what each call did is checked in the controller's image."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace

import pytest
from kafka.protocol.admin.configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from actors.contract import Envelope, Output
from actors.runtime.kafka import admin
from actors.runtime.kafka.admin import ConfigView
from actors.runtime.kafka.apis import topic_uuid
from actors.runtime.kafka.gateway import ClusterView, Connection, Gateway, PartitionView
from controller_quorum.controller import Controller
from controller_quorum.messages import LogEntry
from controller_quorum.metadata import MetadataImage, PartitionRecord, RegisterBrokerRecord, TopicRecord, new_topic_id
from controller_quorum.requests import NOT_CONTROLLER, AdminRequest, AdminResponse
from observability.events import KafkaRequest, TopicCreated
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec

# Kafka's codes
NONE, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, INVALID_TOPIC = 0, 3, 7, 17
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG = 36, 37, 38, 39, 40
INVALID_REQUEST, POLICY_VIOLATION, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE = 42, 44, 80, 83
ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_ID = 84, 85, 100


class InstantRaft:
    """A single voter whose appends commit at once: the controller answers right after its write."""

    leader = "c1"

    def __init__(self, controller: Controller, end_offset: int) -> None:
        self.controller = controller
        self.log = SimpleNamespace(end_offset=end_offset)
        self.pending: list = []

    def append(self, records: list, now_ms: float, out: Output) -> int:
        first = self.log.end_offset
        self.log.end_offset += len(records)
        self.controller.on_commit([LogEntry(first + i, 1, r) for i, r in enumerate(records)], now_ms, out)
        return self.log.end_offset - 1


def new_controller() -> Controller:
    """Brokers 1-3 (3 fenced), topic t: t-0 led by 2 (its preferred is 1), t-1 led by its preferred
    2, t-2 preferring the fenced 3, t-3 on 3 alone and leaderless."""
    spec = ClusterSpec.model_validate({"brokers": 3, "controllers": 1, "config": {"min.insync.replicas": 2}})
    controller = Controller("c1", cluster_settings(spec))
    image = MetadataImage()
    records = [RegisterBrokerRecord(b, b, None, fenced=b == 3) for b in (1, 2, 3)] + [TopicRecord("t", new_topic_id("t", 4))]
    records += [PartitionRecord("t", 0, (1, 2, 3), (1, 2), (), (), 2, 1, 1), PartitionRecord("t", 1, (2, 3, 1), (1, 2), (), (), 2, 0, 0),
                PartitionRecord("t", 2, (3, 1, 2), (1, 2), (), (), 1, 1, 1), PartitionRecord("t", 3, (3,), (), (), (), None, 1, 1)]
    for offset, rec in enumerate(records):
        image.apply(offset, rec)
    controller.committed = image
    controller.working = image.copy()
    controller.raft = InstantRaft(controller, image.offset)
    return controller


class AdminBroker:
    """The broker role as the gateway reaches it: an admin request forwarded to the controller (or
    answered NOT_CONTROLLER `not_controller` times first; `silent`: never answered); its image is
    the controller's committed one."""

    broker_id = 1
    listeners = {1: ("198.18.0.1", 9092), 2: ("198.18.0.2", 9092)}

    def __init__(self) -> None:
        self.controller = new_controller()
        self.gateway: Gateway | None = None
        self.events: list = []
        self.not_controller = 0
        self.silent = False

    def now_ms(self) -> float:
        return asyncio.get_running_loop().time() * 1000.0

    def deliver(self, src: str, message: object) -> None:
        assert isinstance(message, AdminRequest)
        if self.silent:
            return
        if self.not_controller:
            self.not_controller -= 1
            replies = [AdminResponse(message.request_id, NOT_CONTROLLER, client=src)]
        else:
            out = Output()
            assert self.controller.handle(Envelope("b1", "c1", replace(message, client=src)), 0.0, out)
            self.events += out.events
            replies = [e.payload for e in out.sends if isinstance(e.payload, AdminResponse)]
            assert [r.client for r in replies] == [src]
        for reply in replies:
            asyncio.get_running_loop().call_soon(self.gateway.on_reply, reply)

    @property
    def image(self) -> MetadataImage:
        return self.controller.committed

    def cluster_view(self) -> ClusterView:
        img = self.image
        parts = {k: PartitionView(p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr)) for k, p in img.partitions.items()}
        return ClusterView({n: topic_uuid(i) for n, i in img.topics.items()}, parts, tuple(b for b, r in img.brokers.items() if not r.fenced))

    def configs(self) -> ConfigView:
        return ConfigView({t: dict(c) for t, c in self.image.topic_configs.items()}, dict(self.image.cluster_config),
                          {"min.insync.replicas": 2, "unclean.leader.election.enable": False, "log.segment.bytes": 1 << 30})

    def topic_id(self, topic: str) -> str | None:
        return self.image.topics.get(topic)

    def new_producer_id(self) -> int:
        return 1 << 48

    def record(self, event: object) -> None:
        self.events.append(event)

    def rows(self, api: str) -> list[tuple]:
        return [(r.topic, r.partition, r.error) for r in self.events if isinstance(r, KafkaRequest) and r.api == api]


def ask(broker: AdminBroker, request, response_class, version: int):
    broker.gateway = broker.gateway or Gateway(broker, Connection("198.18.0.9:5000", "kafka:b1.0.1", "kafka:b1.0.1@198.18.0.9:5000"))
    request.with_header(correlation_id=7, client_id="test")
    answer = asyncio.run(broker.gateway.handle(bytes(request.encode(version=version, header=True))))
    response = response_class[version].decode(answer, header=True)
    assert response.header.correlation_id == 7
    return response


def create_topics(broker: AdminBroker, *topics, version: int = 7, validate_only: bool = False, timeout_ms: int = 5_000):
    request = CreateTopicsRequest(version=version, topics=list(topics), timeout_ms=timeout_ms, validate_only=validate_only)
    return {t.name: t for t in ask(broker, request, CreateTopicsResponse, version).topics}


def topic(name: str, partitions: int = 2, rf: int = 2, assignments=(), configs=()):
    return CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CreateTopicsRequest.CreatableTopic.CreatableReplicaAssignment(partition_index=i, broker_ids=list(b)) for i, b in assignments],
        configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs])


def test_api_versions_lists_the_admin_apis_at_kafka_4_s_versions():
    response = ask(AdminBroker(), ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"), ApiVersionsResponse, 3)
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: served[key] for key in (19, 20, 32, 37, 43, 44, 45, 46)} == {
        19: (2, 7), 20: (1, 6), 32: (1, 4), 37: (0, 3), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0)}


def test_an_admin_version_kafka_4_no_longer_serves_closes_the_connection():
    import struct

    from actors.runtime.kafka.gateway import UnknownApi

    broker = AdminBroker()
    broker.gateway = Gateway(broker, Connection("198.18.0.9:5000", "kafka:b1.0.1", "p"))
    for api_key, version in ((19, 1), (20, 0), (32, 0), (46, 1)):  # CreateTopics v1, DeleteTopics v0, DescribeConfigs v0, ListPartitionReassignments v1
        with pytest.raises(UnknownApi):
            asyncio.run(broker.gateway.handle(struct.pack(">hhih", api_key, version, 1, 0)))
    assert broker.image.topics.keys() == {"t"} and broker.rows("CreateTopics") == []


def test_create_topics_makes_the_topic_through_the_controller_and_answers_kafka_s_errors():
    broker = AdminBroker()
    answers = create_topics(
        broker, topic("new", 3, 2, configs=[("min.insync.replicas", "2")]), topic("t"), topic("zero", 0), topic("rf5", 1, 5),
        topic("gap", -1, -1, assignments=[(0, (1, 2)), (2, (2, 1))]), topic("both", 2, -1, assignments=[(0, (1, 2))]),
        topic("cfg", configs=[("retention.ms", "1000")]), topic("bad", configs=[("min.insync.replicas", "x")]), topic("no/slash"),
        topic("manual", -1, -1, assignments=[(0, (2, 1)), (1, (1, 2))]))
    codes = {name: a.error_code for name, a in answers.items()}
    assert codes == {"new": NONE, "t": TOPIC_ALREADY_EXISTS, "zero": INVALID_PARTITIONS, "rf5": INVALID_REPLICATION_FACTOR,
                     "gap": INVALID_REPLICA_ASSIGNMENT, "both": INVALID_REQUEST, "cfg": INVALID_CONFIG, "bad": INVALID_CONFIG,
                     "no/slash": INVALID_TOPIC, "manual": NONE}
    assert answers["t"].error_message == "Topic 't' already exists."
    image = broker.image
    new = answers["new"]
    assert new.topic_id == topic_uuid(image.topics["new"]) and (new.num_partitions, new.replication_factor) == (3, 2)
    assert {c.name: (c.value, c.config_source) for c in new.configs}["min.insync.replicas"] == ("2", 1)  # TOPIC_CONFIG
    assert sorted(i for (t, i) in image.partitions if t == "new") == [0, 1, 2] and image.topic_configs["new"] == {"min.insync.replicas": 2}
    assert image.partitions[("manual", 0)].replicas == (2, 1)
    assert set(image.topics) == {"t", "new", "manual"}
    assert [e.topic for e in broker.events if isinstance(e, TopicCreated)] == ["new", "manual"]
    # Every topic is a history row with its error.
    assert sorted(broker.rows("CreateTopics")) == sorted((name, None, None if code == NONE else err) for name, code, err in [
        ("new", NONE, None), ("t", 1, "TOPIC_ALREADY_EXISTS"), ("zero", 1, "INVALID_PARTITIONS"), ("rf5", 1, "INVALID_REPLICATION_FACTOR"),
        ("gap", 1, "INVALID_REPLICA_ASSIGNMENT"), ("both", 1, "INVALID_REQUEST"), ("cfg", 1, "INVALID_CONFIG"), ("bad", 1, "INVALID_CONFIG"),
        ("no/slash", 1, "INVALID_TOPIC_EXCEPTION"), ("manual", NONE, None)])


def test_create_topics_validate_only_writes_nothing_and_a_huge_request_is_a_policy_violation():
    broker = AdminBroker()
    answers = create_topics(broker, topic("dry", 4, 2), topic("t"), validate_only=True)
    assert (answers["dry"].error_code, answers["dry"].num_partitions, answers["t"].error_code) == (NONE, 4, TOPIC_ALREADY_EXISTS)
    assert "dry" not in broker.image.topics and "dry" not in broker.controller.working.topics
    # Kafka's validateTotalNumberOfPartitions: more than 10,000 partitions in one request.
    answers = create_topics(broker, topic("a", 6_000), topic("b", 6_000), version=4)
    assert {a.error_code for a in answers.values()} == {POLICY_VIOLATION} and set(broker.image.topics) == {"t"}


def test_delete_topics_by_name_and_by_id():
    broker = AdminBroker()
    create_topics(broker, topic("x"), topic("y"))
    ids = {n: topic_uuid(i) for n, i in broker.image.topics.items()}
    request = DeleteTopicsRequest(version=6, topics=[DeleteTopicsRequest.DeleteTopicState(name="x", topic_id=None),
                                                     DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=ids["y"]),
                                                     DeleteTopicsRequest.DeleteTopicState(name="nope", topic_id=None),
                                                     DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=ids["t"].__class__(int=1))],
                                  timeout_ms=5_000)
    results = ask(broker, request, DeleteTopicsResponse, 6).responses
    assert [(r.name, r.error_code) for r in results] == [("x", NONE), ("y", NONE), ("nope", UNKNOWN_TOPIC_OR_PARTITION), (None, UNKNOWN_TOPIC_ID)]
    assert results[1].topic_id == ids["y"]
    assert set(broker.image.topics) == {"t"} and not any(k[0] in ("x", "y") for k in broker.image.partitions)
    old = ask(broker, DeleteTopicsRequest(version=1, topic_names=["t", "t2"], timeout_ms=5_000), DeleteTopicsResponse, 1).responses
    assert [(r.name, r.error_code) for r in old] == [("t", NONE), ("t2", UNKNOWN_TOPIC_OR_PARTITION)] and broker.image.topics == {}
    assert ("t2", None, "UNKNOWN_TOPIC_OR_PARTITION") in broker.rows("DeleteTopics")


def test_create_partitions_grows_a_topic_and_refuses_what_kafka_refuses():
    broker = AdminBroker()
    create_topics(broker, topic("g", 1, 2), topic("h", 1, 2))
    assignment = CreatePartitionsRequest.CreatePartitionsTopic.CreatePartitionsAssignment

    def grow(name, count, assignments=None, validate_only=False):
        request = CreatePartitionsRequest(version=3, topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name=name, count=count, assignments=None if assignments is None else [assignment(broker_ids=list(b)) for b in assignments])],
            timeout_ms=5_000, validate_only=validate_only)
        [result] = ask(broker, request, CreatePartitionsResponse, 3).results
        return result.error_code

    assert grow("g", 3, validate_only=True) == NONE and sum(t == "g" for t, _ in broker.image.partitions) == 1
    assert grow("g", 3) == NONE and sum(t == "g" for t, _ in broker.image.partitions) == 3
    assert grow("g", 3) == INVALID_PARTITIONS and grow("g", 2) == INVALID_PARTITIONS
    assert grow("h", 3, [(1, 2)]) == INVALID_REPLICA_ASSIGNMENT  # two new partitions, one assignment
    assert grow("h", 2, [(1, 1)]) == INVALID_REPLICA_ASSIGNMENT  # a broker twice
    assert grow("h", 2, [(2, 1)]) == NONE and broker.image.partitions[("h", 1)].replicas == (2, 1)
    assert grow("nope", 2) == UNKNOWN_TOPIC_OR_PARTITION
    assert ("g", None, "INVALID_PARTITIONS") in broker.rows("CreatePartitions")


def elect(broker: AdminBroker, election_type: int, partitions: list[int] | None, version: int = 2, name: str = "t"):
    request = ElectLeadersRequest(version=version, election_type=election_type, timeout_ms=5_000, topic_partitions=None if partitions is None else [
        ElectLeadersRequest.TopicPartitions(topic=name, partitions=partitions)])
    response = ask(broker, request, ElectLeadersResponse, version)
    return {(r.topic, p.partition_id): p.error_code for r in response.replica_election_results for p in r.partition_result}


def test_elect_leaders_preferred_and_unclean():
    broker = AdminBroker()
    assert elect(broker, 0, [0, 1, 2, 9]) == {("t", 0): NONE, ("t", 1): ELECTION_NOT_NEEDED, ("t", 2): PREFERRED_LEADER_NOT_AVAILABLE,
                                             ("t", 9): UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.image.partitions[("t", 0)].leader == 1  # the preferred replica leads now
    assert elect(broker, 1, [3, 0]) == {("t", 3): ELIGIBLE_LEADERS_NOT_AVAILABLE, ("t", 0): ELECTION_NOT_NEEDED}
    assert elect(broker, 0, [0], version=0) == {("t", 0): ELECTION_NOT_NEEDED}
    # Every partition (null): those whose election is not needed are left out, as Kafka's controller does.
    assert elect(broker, 0, None) == {("t", 2): PREFERRED_LEADER_NOT_AVAILABLE, ("t", 3): PREFERRED_LEADER_NOT_AVAILABLE}
    assert ("t", 2, "PREFERRED_LEADER_NOT_AVAILABLE") in broker.rows("ElectLeaders")


def test_partition_reassignments_start_list_and_cancel():
    broker = AdminBroker()
    create_topics(broker, topic("r", 2, 2, assignments=()), version=7)
    part = AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition

    def alter(items, version=1, allow=True):
        request = AlterPartitionReassignmentsRequest(version=version, timeout_ms=5_000, allow_replication_factor_change=allow, topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(name=name, partitions=[part(partition_index=i, replicas=r)]) for name, i, r in items])
        response = ask(broker, request, AlterPartitionReassignmentsResponse, version)
        assert response.error_code == NONE
        return [p.error_code for t in response.responses for p in t.partitions]

    def listed(topics=None):
        request = ListPartitionReassignmentsRequest(version=0, timeout_ms=5_000, topics=topics)
        return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
                for t in ask(broker, request, ListPartitionReassignmentsResponse, 0).topics for p in t.partitions}

    before = broker.image.partitions[("r", 0)].replicas
    target = [b for b in (1, 2, 3) if b not in before][:1] + [before[0]]  # a fenced broker joins: the ISR cannot complete it
    assert alter([("r", 0, target), ("r", 1, None), ("r", 1, [1, 1]), ("nope", 0, [1, 2])]) == [
        NONE, NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION]
    assert alter([("r", 1, [1, 2, 3])], allow=False) == [INVALID_REPLICATION_FACTOR]  # KIP-860
    now = broker.image.partitions[("r", 0)]
    assert now.adding_replicas == (3,) and listed() == {("r", 0): (list(now.replicas), [3], list(now.removing_replicas))}
    assert listed([ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name="r", partition_indexes=[1])]) == {}
    assert alter([("r", 0, None)], version=0) == [NONE]
    assert listed() == {} and broker.image.partitions[("r", 0)].replicas == before
    assert ("r", 1, "NO_REASSIGNMENT_IN_PROGRESS") in broker.rows("AlterPartitionReassignments")


def alter_configs(broker: AdminBroker, resources, validate_only=False, version=1):
    entry = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
    request = IncrementalAlterConfigsRequest(version=version, validate_only=validate_only, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=kind, resource_name=name, configs=[
            entry(name=k, config_operation=op, value=v) for k, op, v in configs]) for kind, name, configs in resources])
    return [(r.resource_name, r.error_code) for r in ask(broker, request, IncrementalAlterConfigsResponse, version).responses]


def describe(broker: AdminBroker, kind: int, name: str, keys=None, version: int = 4):
    request = DescribeConfigsRequest(version=version, include_synonyms=True, include_documentation=False, resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=keys)])
    [result] = ask(broker, request, DescribeConfigsResponse, version).results
    return result.error_code, {c.name: (c.value, c.config_source) for c in result.configs}


def test_incremental_alter_configs_sets_min_insync_replicas_and_refuses_unknown_configs():
    broker = AdminBroker()
    assert alter_configs(broker, [(2, "t", [("min.insync.replicas", 0, "3")])], validate_only=True) == [("t", NONE)]
    assert broker.image.topic_configs.get("t", {}) == {}
    assert alter_configs(broker, [(2, "t", [("min.insync.replicas", 0, "3")]), (2, "nope", [("min.insync.replicas", 0, "1")])]) == [
        ("t", NONE), ("nope", UNKNOWN_TOPIC_OR_PARTITION)]
    assert broker.image.topic_configs["t"] == {"min.insync.replicas": 3}
    assert alter_configs(broker, [(2, "t", [("retention.ms", 0, "1")])]) == [("t", INVALID_CONFIG)]  # Unknown topic config name
    assert alter_configs(broker, [(2, "t", [("min.insync.replicas", 2, "1")])]) == [("t", INVALID_CONFIG)]  # APPEND to a non-list
    assert alter_configs(broker, [(2, "t", [("min.insync.replicas", 0, "0")])]) == [("t", INVALID_CONFIG)]  # at least 1
    assert alter_configs(broker, [(2, "t", [("unclean.leader.election.enable", 0, "yes")])]) == [("t", INVALID_CONFIG)]
    assert alter_configs(broker, [(2, "t", []), (2, "t", [])]) == [("t", INVALID_REQUEST), ("t", INVALID_REQUEST)]
    assert alter_configs(broker, [(4, "2", [("min.insync.replicas", 0, "1")])]) == [("2", INVALID_CONFIG)]  # per broker, ELR on
    assert broker.image.topic_configs["t"] == {"min.insync.replicas": 3}
    # The cluster-wide default (the broker resource ""), then the topic's own value deleted.
    assert alter_configs(broker, [(4, "", [("unclean.leader.election.enable", 0, "true")]), (2, "t", [("min.insync.replicas", 1, None)])]) == [
        ("", NONE), ("t", NONE)]
    assert broker.image.cluster_config == {"unclean.leader.election.enable": True} and broker.image.topic_configs["t"] == {}
    assert ("t", None, "INVALID_CONFIG") in broker.rows("IncrementalAlterConfigs")


def test_describe_configs_answers_each_config_s_value_and_source():
    broker = AdminBroker()
    error, configs = describe(broker, 2, "t")
    assert error == NONE and configs["min.insync.replicas"] == ("2", 4)  # STATIC_BROKER_CONFIG
    alter_configs(broker, [(2, "t", [("min.insync.replicas", 0, "1")]), (4, "", [("unclean.leader.election.enable", 0, "true")])])
    error, configs = describe(broker, 2, "t", version=1)
    assert configs == {"min.insync.replicas": ("1", 1), "unclean.leader.election.enable": ("true", 3), "segment.bytes": (str(1 << 30), 4)}
    assert describe(broker, 2, "t", keys=["segment.bytes"])[1] == {"segment.bytes": (str(1 << 30), 4)}
    assert describe(broker, 2, "nope")[0] == UNKNOWN_TOPIC_OR_PARTITION
    assert describe(broker, 4, "1")[1]["min.insync.replicas"] == ("2", 4)
    assert describe(broker, 4, "")[1] == {"unclean.leader.election.enable": ("true", 3)}  # only the dynamic defaults
    assert describe(broker, 4, "2")[0] == INVALID_REQUEST  # another broker's: ask that broker
    assert ("nope", None, "UNKNOWN_TOPIC_OR_PARTITION") in broker.rows("DescribeConfigs")


def test_not_controller_is_asked_again_and_no_answer_is_request_timed_out(monkeypatch):
    monkeypatch.setattr(admin, "ADMIN_RETRY_MS", 1.0)
    broker = AdminBroker()
    broker.not_controller = 3  # no active controller known for a while: the listener asks again
    assert create_topics(broker, topic("later"))["later"].error_code == NONE and "later" in broker.image.topics
    broker.silent = True  # a controller that lost its leadership before the records committed
    assert create_topics(broker, topic("lost"), timeout_ms=50)["lost"].error_code == REQUEST_TIMED_OUT
    assert broker.gateway.conn.waiting == {}
    assert ("lost", None, "REQUEST_TIMED_OUT") in broker.rows("CreateTopics")


@pytest.mark.parametrize("controller_known", [True, False])
def test_the_broker_role_forwards_an_admin_request_to_the_active_controller_and_its_answer_back(controller_known):
    from actors.broker_node import BrokerNode

    broker = BrokerNode.__new__(BrokerNode)  # only what forwarding reads: its name and the controller it knows
    broker.node_id, broker.controller, broker.halted = "b1", "c2" if controller_known else None, False
    broker.raft = SimpleNamespace(leader=None, handle=lambda *a: False)
    out = Output()
    broker._forward_admin("kafka:b1.0.1", AdminRequest(4, "delete_topic", "t"), out)
    [sent] = out.sends
    if controller_known:
        assert (sent.dst, sent.payload) == ("c2", AdminRequest(4, "delete_topic", "t", client="kafka:b1.0.1"))
    else:
        assert (sent.dst, sent.payload.error) == ("kafka:b1.0.1", NOT_CONTROLLER)
