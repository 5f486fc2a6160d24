"""A Kafka listener's gateway (actors/runtime/kafka/gateway.py) fed requests that kafka-python's
client encodes, answered by a stand-in for the broker role: the API table, Metadata, Produce with
its record checks (CRC-32C, codecs, record batch versions) and the history rows it writes."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from actors.replication.messages import EpochEndOffsetRequest, EpochEndOffsetResponse, FetchedPartition
from actors.replication.messages import FetchResponse as RoleFetchResponse
from actors.replication.messages import ProduceRequest as RoleProduce
from actors.replication.messages import ProduceResponse as RoleProduceResponse
from actors.runtime.kafka.apis import APIS
from actors.runtime.kafka.gateway import ClusterView, Connection, Gateway, PartitionView, UnknownApi
from observability.events import KafkaRequest, ProduceAck, ProduceSend

TOPIC_ID = uuid.uuid4()


class Broker:
    """The broker role, as far as the gateway sees it: it appends each produce at the log end."""

    broker_id = 1
    listeners = {1: ("198.18.0.1", 9092), 2: ("198.18.0.2", 9092)}

    def __init__(self) -> None:
        self.gateway: Gateway | None = None
        self.log: list = []
        self.events: list = []
        self.refuse: str | None = None
        self.duplicate_at: int | None = None  # answer a produce as a duplicate of the batch at this offset

    def now_ms(self) -> float:
        return 0.0

    def new_producer_id(self) -> int:
        return 1 << 48

    def deliver(self, src: str, message: object) -> None:
        if isinstance(message, EpochEndOffsetRequest):
            reply = EpochEndOffsetResponse(message.request_id, message.topic, message.partition, None, 3, sum(b.count for b in self.log))
        elif isinstance(message, RoleProduce) and self.duplicate_at is not None:
            reply = RoleProduceResponse(message.request_id, message.topic, message.partition, None, self.duplicate_at)
        elif isinstance(message, RoleProduce):
            base = sum(b.count for b in self.log)
            if self.refuse is None:
                self.log.append(message.batch.stamped(base, 3))
            reply = RoleProduceResponse(message.request_id, message.topic, message.partition, self.refuse, base if self.refuse is None else -1)
        else:
            end = sum(b.count for b in self.log)  # every record committed, in whole batches as a log reads them
            parts = tuple(FetchedPartition(p.topic, p.partition, None, end, end, batches=tuple(b for b in self.log if b.next_offset > p.fetch_offset))
                          for p in message.partitions)
            reply = RoleFetchResponse(message.request_id, parts)
        asyncio.get_running_loop().call_soon(self.gateway.on_reply, reply)

    def cluster_view(self) -> ClusterView:
        return ClusterView({"t": TOPIC_ID}, {("t", 0): PartitionView(1, 3, (1, 2), (1, 2)), ("t", 1): PartitionView(None, 4, (2, 1), (2,))}, (1, 2))

    def topic_id(self, topic: str) -> str | None:
        return {"t": "topic-t"}.get(topic)

    def record(self, event: object) -> None:
        self.events.append(event)


def ask(broker: Broker, request, version: int):
    """Send `request` (a kafka-python request) at `version`; the decoded response, or None."""
    broker.gateway = broker.gateway or Gateway(broker, Connection("198.18.0.9:5000", "kafka:b1.0.1", "kafka:b1.0.1@198.18.0.9:5000"))
    request.with_header(correlation_id=7, client_id="test")
    frame = bytes(request.encode(version=version, header=True))
    return asyncio.run(broker.gateway.handle(frame))


def decode(response_class, version: int, answer: bytes):
    response = response_class[version].decode(answer, header=True)
    assert response.header.correlation_id == 7
    return response


def batch(values: list[bytes], codec: int = DefaultRecordBatch.CODEC_NONE, producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    """A v2 batch of `values`; `producer`: an idempotent client's (producer id, epoch, base sequence)."""
    builder = DefaultRecordBatchBuilder(2, codec, False, *producer, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def produce(broker: Broker, records: bytes, version: int = 7, acks: int = -1):
    request = ProduceRequest(version=version, transactional_id=None, acks=acks, timeout_ms=5_000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    answer = ask(broker, request, version)
    return None if answer is None else decode(ProduceResponse, version, answer).responses[0].partition_responses[0]


def test_api_versions_lists_the_served_apis_and_answers_an_unknown_version_in_v0():
    response = decode(ApiVersionsResponse, 3, ask(Broker(), ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"), 3))
    assert response.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in response.api_keys} == {(key, a.min_version, a.max_version) for key, a in APIS.items()}
    # A version newer than the listener's: Kafka answers in v0 with UNSUPPORTED_VERSION (35).
    frame = struct.pack(">hhih", 18, 99, 7, 4) + b"test"
    answer = asyncio.run(Gateway(Broker(), Connection("p", "n", "q")).handle(frame))
    assert ApiVersionsResponse[0].decode(answer, header=True).error_code == 35


def test_an_idempotent_retry_is_the_same_records_on_any_connection_so_its_ack_names_the_batch_the_log_holds():
    """A client that retries a batch (its first answer lost on the way, or its leader moved) sends
    the same bytes again; the leader answers a duplicate with the original's offset (KIP-98). The
    records keep one identity, from the producer id, epoch, partition and sequences the batch
    carries: the retry's ack names the batch the log holds (its CRC), not one of its own."""
    broker = Broker()
    records = batch([b"a", b"b"], producer=(1 << 48, 0, 0))
    first = produce(broker, records)
    broker.duplicate_at = first.base_offset
    again = produce(broker, records)  # the same connection
    broker.gateway = Gateway(broker, Connection("198.18.0.9:5001", "kafka:b1.0.2", "kafka:b1.0.2@198.18.0.9:5001"))
    elsewhere = produce(broker, records)  # another connection (after a reconnect, or to the new leader)
    assert (first.base_offset, again.base_offset, elsewhere.base_offset) == (0, 0, 0)
    assert len(broker.log) == 1
    acks = [e for e in broker.events if isinstance(e, ProduceAck)]
    sends = [e for e in broker.events if isinstance(e, ProduceSend)]
    identity = (f"kafka:pid{1 << 48}.0@t-0", (0, 1))
    assert {(a.producer, a.sequences) for a in acks} == {identity}
    assert {(a.first_offset, a.batch_crc) for a in acks} == {(0, broker.log[0].crc)}
    # One send row per connection that sent it: a retry on the same connection is the same send.
    assert [(s.producer, s.sequences) for s in sends] == [identity, identity]


def test_a_batch_without_a_producer_id_retried_is_a_new_write_with_records_of_its_own():
    broker = Broker()
    records = batch([b"a"])
    produce(broker, records)
    produce(broker, records)
    acks = [e for e in broker.events if isinstance(e, ProduceAck)]
    assert [(a.producer, a.sequences, a.first_offset) for a in acks] == [
        ("kafka:b1.0.1@198.18.0.9:5000", (0,), 0), ("kafka:b1.0.1@198.18.0.9:5000", (1,), 1)]


def test_metadata_advertises_every_broker_s_listener_and_names_leaderless_and_unknown_topics():
    request = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name="t"), MetadataRequest.MetadataRequestTopic(name="nope")],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    response = decode(MetadataResponse, 9, ask(Broker(), request, 9))
    assert {(b.node_id, b.host, b.port) for b in response.brokers} == {(1, "198.18.0.1", 9092), (2, "198.18.0.2", 9092)}
    t, nope = response.topics
    assert nope.error_code == 3 and t.error_code == 0
    p0, p1 = sorted(t.partitions, key=lambda p: p.partition_index)
    assert (p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes, p0.error_code) == (1, 3, [1, 2], [1, 2], 0)
    assert (p1.leader_id, p1.error_code) == (-1, 5)  # LEADER_NOT_AVAILABLE


def test_an_acknowledged_produce_is_appended_and_its_records_are_a_producer_s_in_the_history():
    broker = Broker()
    first = produce(broker, batch([b"a", b"b", b"c"]))
    second = produce(broker, batch([b"d"]))
    assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 3)
    sends = [e for e in broker.events if isinstance(e, ProduceSend)]
    acks = [e for e in broker.events if isinstance(e, ProduceAck)]
    assert [s.sequences for s in sends] == [(0, 1, 2), (3,)]
    assert [(a.outcome, a.acks, a.first_offset, a.sequences) for a in acks] == [("ok", "all", 0, (0, 1, 2)), ("ok", "all", 3, (3,))]
    assert {e.producer for e in sends + acks} == {"kafka:b1.0.1@198.18.0.9:5000"}
    assert {e.topic_id for e in sends} == {"topic-t"}  # the readers key records by topic id
    rows = [e for e in broker.events if isinstance(e, KafkaRequest)]
    assert [(r.api, r.api_version, r.topic, r.partition, r.error, r.offset, r.count) for r in rows] == [
        ("Produce", 7, "t", 0, None, 0, 3), ("Produce", 7, "t", 0, None, 3, 1)]
    # A fetch reads the client's own batches back, CRC intact, at the offsets the leader gave.
    request = FetchRequest(version=11, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                           session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(
                               partition=0, current_leader_epoch=3, fetch_offset=1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    data = decode(FetchResponse, 11, ask(broker, request, 11)).responses[0].partitions[0]
    assert (data.error_code, data.high_watermark) == (0, 4)
    read, offset = [], 0
    records = bytes(data.records)
    while offset < len(records):
        length = struct.unpack_from(">i", records, offset + 8)[0]
        b = DefaultRecordBatch(records[offset:offset + 12 + length])
        assert b.validate_crc()
        read += [(r.offset, r.value) for r in b]
        offset += 12 + length
    assert read == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_a_refused_produce_is_answered_with_kafka_s_code_and_its_records_are_not_written():
    broker = Broker()
    broker.refuse = "NOT_ENOUGH_REPLICAS"
    answer = produce(broker, batch([b"a"]))
    assert (answer.error_code, answer.base_offset) == (19, -1)
    [ack] = [e for e in broker.events if isinstance(e, ProduceAck)]
    assert (ack.outcome, ack.error, ack.first_offset) == ("fail", "NOT_ENOUGH_REPLICAS", None)


@pytest.mark.parametrize(("mangle", "code"), [
    (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), 2),  # a flipped bit: CORRUPT_MESSAGE
    (lambda raw: raw[:-3], 2),  # cut short
    # attributes with codec 3 (lz4), the CRC made right: UNSUPPORTED_COMPRESSION_TYPE
    (lambda raw: recrc(raw[:21] + struct.pack(">h", 3) + raw[23:]), 76),
])
def test_a_bad_record_set_is_refused_whole_and_nothing_is_appended(mangle, code):
    broker = Broker()
    answer = produce(broker, mangle(batch([b"x" * 50])))
    assert answer.error_code == code and broker.log == []


def recrc(raw: bytes) -> bytes:
    from kafka.record.util import calc_crc32c

    return raw[:17] + struct.pack(">I", calc_crc32c(raw[21:])) + raw[21:]


def test_acks_0_gets_no_answer_and_apis_or_versions_not_served_close_the_connection():
    broker = Broker()
    assert produce(broker, batch([b"a"]), acks=0) is None
    assert len(broker.log) == 1
    with pytest.raises(UnknownApi):  # Produce v2: message sets before RecordBatch v2
        asyncio.run(broker.gateway.handle(struct.pack(">hhih", 0, 2, 1, 0)))
    with pytest.raises(UnknownApi):  # JoinGroup: consumer groups are out of scope
        asyncio.run(broker.gateway.handle(struct.pack(">hhih", 11, 5, 1, 0)))


def test_init_producer_id_gives_an_idempotent_producer_an_id_and_refuses_a_transactional_one():
    request = InitProducerIdRequest(version=4, transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)
    response = decode(InitProducerIdResponse, 4, ask(Broker(), request, 4))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (0, 1 << 48, 0)
    request = InitProducerIdRequest(version=4, transactional_id="tx", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)
    response = decode(InitProducerIdResponse, 4, ask(Broker(), request, 4))
    assert (response.error_code, response.producer_id) == (53, -1)  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_offset_for_leader_epoch_carries_the_leader_s_answer():
    broker = Broker()
    produce(broker, batch([b"a", b"b"]))
    request = OffsetForLeaderEpochRequest(version=3, replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic="t", partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=3, leader_epoch=3)])])
    [answer] = decode(OffsetForLeaderEpochResponse, 3, ask(broker, request, 3)).topics[0].partitions
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, 3, 2)


def test_describe_cluster_names_the_unfenced_brokers_and_their_listeners():
    from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse

    response = decode(DescribeClusterResponse, 1, ask(Broker(), DescribeClusterRequest(version=1, include_cluster_authorized_operations=False,
                                                                                          endpoint_type=1), 1))
    assert response.error_code == 0 and response.cluster_id == "kraftlab"
    assert {(b.broker_id, b.host, b.port) for b in response.brokers} == {(1, "198.18.0.1", 9092), (2, "198.18.0.2", 9092)}
