"""What a Kafka listener serves: each API and the versions it answers (the ApiVersions answer),
and Kafka's error codes for kraftlab's outcomes.

Versions: high enough for what librdkafka 2.0 (kcat 1.7 in Debian 12), librdkafka 2.16
(confluent-kafka 2.16) and kafka-python negotiate, and no higher than kraftlab answers faithfully:
Fetch stops at 12 (from 13 on, requests name topics by id only), Metadata at 12. Produce is advertised from
version 0, as Kafka 4 does (KAFKA-18659: librdkafka before 2.11.1 turns gzip off when a broker's
Produce starts above 0), but versions 0 to 2 (message sets before RecordBatch v2) are refused with
UNSUPPORTED_VERSION. InitProducerId serves the idempotent producer (a transactional id is refused).
Consumer groups and transactions are out of scope: not listed, and a request for them gets
Kafka's answer to an unknown API (the connection is closed).

The admin APIs are served at the versions Kafka 4 serves (its message schemas' validVersions):
CreateTopics from 2, DeleteTopics from 1 and DescribeConfigs from 1, as Kafka 4 dropped the older
ones; librdkafka 2.16 and kafka-python 3 negotiate within them.
"""

from __future__ import annotations

import base64
import inspect
import uuid
from typing import NamedTuple

import kafka.errors
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest


class Api(NamedTuple):
    name: str
    request: type
    min_version: int
    max_version: int


PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CLUSTER = 0, 1, 2, 3, 18, 22, 23, 60
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, CREATE_PARTITIONS, ELECT_LEADERS = 19, 20, 32, 37, 43
INCREMENTAL_ALTER_CONFIGS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 44, 45, 46

APIS: dict[int, Api] = {
    PRODUCE: Api("Produce", ProduceRequest, 0, 9),
    FETCH: Api("Fetch", FetchRequest, 4, 12),
    LIST_OFFSETS: Api("ListOffsets", ListOffsetsRequest, 1, 6),
    METADATA: Api("Metadata", MetadataRequest, 0, 12),
    API_VERSIONS: Api("ApiVersions", ApiVersionsRequest, 0, 3),
    INIT_PRODUCER_ID: Api("InitProducerId", InitProducerIdRequest, 0, 4),
    OFFSET_FOR_LEADER_EPOCH: Api("OffsetForLeaderEpoch", OffsetForLeaderEpochRequest, 2, 4),
    DESCRIBE_CLUSTER: Api("DescribeCluster", DescribeClusterRequest, 0, 1),
    CREATE_TOPICS: Api("CreateTopics", CreateTopicsRequest, 2, 7),
    DELETE_TOPICS: Api("DeleteTopics", DeleteTopicsRequest, 1, 6),
    DESCRIBE_CONFIGS: Api("DescribeConfigs", DescribeConfigsRequest, 1, 4),
    CREATE_PARTITIONS: Api("CreatePartitions", CreatePartitionsRequest, 0, 3),
    ELECT_LEADERS: Api("ElectLeaders", ElectLeadersRequest, 0, 2),
    INCREMENTAL_ALTER_CONFIGS: Api("IncrementalAlterConfigs", IncrementalAlterConfigsRequest, 0, 1),
    ALTER_PARTITION_REASSIGNMENTS: Api("AlterPartitionReassignments", AlterPartitionReassignmentsRequest, 0, 1),
    LIST_PARTITION_REASSIGNMENTS: Api("ListPartitionReassignments", ListPartitionReassignmentsRequest, 0, 0),
}
ADMIN_APIS = frozenset({CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, CREATE_PARTITIONS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS,
                        ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS})

# Produce versions listed but refused: before RecordBatch v2.
PRODUCE_REFUSED_BELOW = 3


def _error_codes() -> dict[str, int]:
    codes = {cls.message: cls.errno for cls in vars(kafka.errors).values()
             if inspect.isclass(cls) and issubclass(cls, kafka.errors.BrokerResponseError) and cls.errno is not None}
    # kraftlab names errors as Kafka's protocol does today; kafka-python keeps some older names.
    codes["NOT_LEADER_OR_FOLLOWER"] = codes["NOT_LEADER_FOR_PARTITION"]
    codes["INVALID_REPLICA_ASSIGNMENT"] = codes["INVALID_REPLICATION_ASSIGNMENT"]
    codes["INVALID_TOPIC_EXCEPTION"] = codes["INVALID_TOPIC"]
    codes["UNKNOWN_SERVER_ERROR"] = -1
    return codes


ERROR_CODES = _error_codes()


def error_code(error: str | None) -> int:
    """Kafka's code for a kraftlab outcome (None: success). kraftlab's errors carry Kafka's names
    (actors/replication/messages.py); one Kafka has no code for is UNKNOWN_SERVER_ERROR."""
    if error is None:
        return 0
    return ERROR_CODES.get(error, -1)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A kraftlab topic id (Kafka's printed form: URL-safe base64 of the 16 bytes) as the wire's uuid."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))
