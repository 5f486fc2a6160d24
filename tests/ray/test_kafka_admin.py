"""Kafka's admin clients against an emulated cluster on Ray (`cluster.listeners: [kafka]`): every
admin call goes through a broker's listener, which forwards it to the active controller (KIP-590).
Each outcome is checked on the cluster itself (the committed partition states, Metadata, the
run's history rows), not only in the client's answer.

confluent-kafka (librdkafka 2.16) has no partition-reassignment calls: kafka-python's
KafkaAdminClient makes and lists those."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from workloads.drivers import ray_cluster
from workloads.scenario.loading import validate

pytestmark = pytest.mark.ray

TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def cluster(local_ray):
    scenario = validate({
        "name": "kafka-admin", "runtime": "ray",
        "cluster": {"brokers": 3, "controllers": 3, "listeners": ["kafka"], "config": {"broker.session.timeout.ms": 4_000}},
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}],
    }, "test_kafka_admin.py")
    rows: list = []
    c = ray_cluster(scenario, event_sinks=[rows.append])
    c.rows = rows
    yield c
    c.close()


# A run_until condition is judged while the cluster hands events to its readers: it reads the
# view and the rows collected so far, and asks no client (what a client sees: `eventually`).
def events(cluster, kind: str) -> list:
    return [r.event for r in cluster.rows if r.kind == kind]


def requests(cluster, api: str) -> list[tuple]:
    cluster.refresh()
    return [(e.topic, e.partition, e.error) for e in events(cluster, "kafka_request") if e.api == api]


def eventually(cluster, condition) -> bool:
    """`condition` (a client's call) holds within TIMEOUT_MS, the cluster running meanwhile."""
    for _ in range(TIMEOUT_MS // 250):
        if condition():
            return True
        cluster.run_for(250)
    return False


def error_of(future) -> int:
    """The Kafka error code a confluent-kafka admin future ends with (0: none)."""
    try:
        future.result(timeout=TIMEOUT_MS / 1000)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def partitions_of(admin: AdminClient, topic: str) -> int | None:
    metadata = admin.list_topics(topic=topic, timeout=30)
    t = metadata.topics.get(topic)
    return None if t is None or t.error is not None else len(t.partitions)


def state(cluster, name: str):
    return cluster.view().partition(name)


def test_confluent_kafka_admin_client_creates_configures_grows_elects_and_deletes(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    # CreateTopics with a manual assignment: adm-0 prefers b3, adm-1 b1.
    new = NewTopic("adm", 2, replica_assignment=[[3, 1], [1, 2]], config={"min.insync.replicas": "1"})
    assert error_of(admin.create_topics([new], operation_timeout=30)["adm"]) == 0
    assert error_of(admin.create_topics([NewTopic("adm", 1, 1)], operation_timeout=30)["adm"]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert cluster.run_until(lambda: state(cluster, "adm-1") is not None, TIMEOUT_MS)
    assert (state(cluster, "adm-0").replicas, state(cluster, "adm-1").replicas) == ([3, 1], [1, 2])
    assert eventually(cluster, lambda: partitions_of(admin, "adm") == 2)  # the brokers' Metadata, in time
    cluster.refresh()
    assert [e.topic for e in events(cluster, "topic_created")].count("adm") == 1

    # DescribeConfigs, then IncrementalAlterConfigs of min.insync.replicas.
    topic = ConfigResource(ResourceType.TOPIC, "adm")
    described = admin.describe_configs([topic])[topic].result(timeout=60)
    assert described["min.insync.replicas"].value == "1"
    change = ConfigResource(ResourceType.TOPIC, "adm", incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([change])[change]) == 0
    unknown = ConfigResource(ResourceType.TOPIC, "adm", incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([unknown])[unknown]) == KafkaError.INVALID_CONFIG
    # The controller reports the topic's partitions again with their new MinISR.
    assert cluster.run_until(lambda: any(e.topic == "adm" and e.min_isr == 2 for e in events(cluster, "partition_change")), TIMEOUT_MS)
    assert eventually(cluster, lambda: admin.describe_configs([topic])[topic].result(timeout=60)["min.insync.replicas"].value == "2")

    # CreatePartitions.
    assert error_of(admin.create_partitions([NewPartitions("adm", 3)], operation_timeout=30)["adm"]) == 0
    assert cluster.run_until(lambda: state(cluster, "adm-2") is not None, TIMEOUT_MS)
    assert eventually(cluster, lambda: partitions_of(admin, "adm") == 3)
    assert error_of(admin.create_partitions([NewPartitions("adm", 3)], operation_timeout=30)["adm"]) == KafkaError.INVALID_PARTITIONS

    # ElectLeaders (preferred): b3, adm-0's preferred replica, crashes and its leadership moves to
    # b1; back, and in the ISR again, it is elected.
    cluster.crash("b3", "process")
    assert cluster.run_until(lambda: state(cluster, "adm-0").leader == 1, TIMEOUT_MS)
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("adm", 0), TopicPartition("adm", 1)]).result(timeout=60)
    codes = {tp.partition: (err.code() if err is not None else 0) for tp, err in outcome.items()}
    assert codes == {0: KafkaError.PREFERRED_LEADER_NOT_AVAILABLE, 1: KafkaError.ELECTION_NOT_NEEDED}
    cluster.restart("b3")
    assert cluster.run_until(lambda: 3 in state(cluster, "adm-0").isr, TIMEOUT_MS)
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("adm", 0)]).result(timeout=60)
    assert [err for err in outcome.values() if err is not None and err.code() != 0] == []
    assert cluster.run_until(lambda: state(cluster, "adm-0").leader == 3, TIMEOUT_MS)
    assert cluster.run_until(lambda: any(e.topic == "adm" and e.partition == 0 and e.leader == 3 and e.election_kind == "preferred"
                                         for e in events(cluster, "election")), TIMEOUT_MS)

    # The history has each request with the client's answer.
    assert ("adm", None, None) in requests(cluster, "CreateTopics") and ("adm", None, "TOPIC_ALREADY_EXISTS") in requests(cluster, "CreateTopics")
    assert ("adm", None, "INVALID_CONFIG") in requests(cluster, "IncrementalAlterConfigs")
    assert ("adm", None, "INVALID_PARTITIONS") in requests(cluster, "CreatePartitions")
    elections = requests(cluster, "ElectLeaders")
    assert ("adm", 0, "PREFERRED_LEADER_NOT_AVAILABLE") in elections and ("adm", 0, None) in elections


def test_kafka_python_reassigns_lists_and_cancels(cluster):
    from kafka import TopicPartition as PyTopicPartition
    from kafka.admin import KafkaAdminClient

    # adm-1 on b1, b2 gets b3 too while b3 is down: the reassignment stays in progress. The client
    # bootstraps from b1 (kafka-python sends admin requests to the broker Metadata names as the
    # controller: the one that answered, as a KRaft broker does).
    cluster.crash("b3", "process")
    assert cluster.run_until(lambda: cluster.view().brokers()[3].fenced is True, TIMEOUT_MS)
    host, port = cluster.kafka_listeners[1]
    admin = KafkaAdminClient(bootstrap_servers=[f"{host}:{port}"], request_timeout_ms=60_000)
    try:
        admin.alter_partition_reassignments({PyTopicPartition("adm", 1): [1, 2, 3]})
        assert cluster.run_until(lambda: state(cluster, "adm-1").adding_replicas == [3], TIMEOUT_MS)
        listed = admin.list_partition_reassignments()
        assert {(tp.topic, tp.partition) for tp in listed} == {("adm", 1)}
        # adm-2 moves at once (a replica set already in its ISR, reordered).
        target = list(reversed(state(cluster, "adm-2").replicas))
        admin.alter_partition_reassignments({PyTopicPartition("adm", 2): target})
        assert cluster.run_until(lambda: state(cluster, "adm-2").replicas == target, TIMEOUT_MS)
        # Cancelled, adm-1 is back on b1, b2; a second cancellation has nothing to cancel.
        admin.alter_partition_reassignments({PyTopicPartition("adm", 1): None})
        assert cluster.run_until(lambda: state(cluster, "adm-1").replicas == [1, 2] and state(cluster, "adm-1").adding_replicas == [],
                                 TIMEOUT_MS)
        assert admin.list_partition_reassignments() in ({}, [])
        admin.alter_partition_reassignments({PyTopicPartition("adm", 1): None})
        reassignments = requests(cluster, "AlterPartitionReassignments")
        assert [r for r in reassignments if r[1] == 1] == [("adm", 1, None), ("adm", 1, None), ("adm", 1, "NO_REASSIGNMENT_IN_PROGRESS")]
        assert len(requests(cluster, "ListPartitionReassignments")) == 2
    finally:
        cluster.restart("b3")
        admin.close()


def test_kafka_python_creates_describes_and_deletes_a_topic(cluster):
    from kafka.admin import ConfigResource as PyConfigResource, ConfigResourceType, KafkaAdminClient
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","), request_timeout_ms=60_000)
    try:
        admin.create_topics({"py": {"num_partitions": 2, "replication_factor": 2, "configs": {"min.insync.replicas": "2"}}})
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics({"py": {"num_partitions": 1, "replication_factor": 1}})
        assert cluster.run_until(lambda: state(cluster, "py-1") is not None, TIMEOUT_MS)
        assert len(state(cluster, "py-0").replicas) == 2
        described = admin.describe_configs([PyConfigResource(ConfigResourceType.TOPIC, "py")], config_filter="all")
        assert described["topic"]["py"]["min.insync.replicas"]["value"] == "2"
        admin.delete_topics(["py"])
    finally:
        admin.close()
    assert cluster.run_until(lambda: "py" in {e.topic for e in events(cluster, "topic_deleted")}, TIMEOUT_MS)
    assert ("py", None, None) in requests(cluster, "DeleteTopics")


def test_confluent_kafka_deletes_a_topic_and_the_run_ends_clean(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert error_of(admin.delete_topics(["adm"], operation_timeout=30)["adm"]) == 0
    assert error_of(admin.delete_topics(["adm"], operation_timeout=30)["adm"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert cluster.run_until(lambda: "adm" in {e.topic for e in events(cluster, "topic_deleted")}, TIMEOUT_MS)
    assert eventually(cluster, lambda: partitions_of(admin, "adm") is None)
    assert ("adm", None, "UNKNOWN_TOPIC_OR_PARTITION") in requests(cluster, "DeleteTopics")
    assert cluster.violations() == []
