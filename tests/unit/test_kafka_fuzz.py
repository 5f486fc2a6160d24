"""Bad input to a Kafka listener (actors/runtime/kafka/), fuzzed with hypothesis: every frame gets
Kafka's answer (a response with the request's correlation id, or the connection closed), nothing
a client was not told was written reaches the log, and the listener serves its other
connections on."""

from __future__ import annotations

import asyncio
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from actors.runtime.kafka.apis import ADMIN_APIS, APIS
from actors.runtime.kafka.gateway import Connection, Gateway, UnknownApi
from actors.runtime.kafka.listener import MAX_FRAME_BYTES, KafkaListener

from tests.unit.test_kafka_admin import AdminBroker
from tests.unit.test_kafka_gateway import Broker, batch

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def answer(broker: Broker, frame: bytes) -> bytes | None:
    broker.gateway = Gateway(broker, Connection("198.18.0.9:5000", "kafka:b1.0.1", "p"))
    return asyncio.run(broker.gateway.handle(frame))


@FUZZ
@given(api_key=st.sampled_from([*APIS, 11, 19, 32, 1000]), version=st.integers(-1, 20), body=st.binary(max_size=200))
def test_any_frame_is_answered_with_its_correlation_id_or_closes_the_connection(api_key, version, body):
    # The admin APIs reach a real controller (tests/unit/test_kafka_admin.py): whatever a mangled
    # request asks of it is answered.
    broker = AdminBroker() if api_key in ADMIN_APIS else Broker()
    frame = struct.pack(">hhih", api_key, version, 42, 1) + b"c" + body
    try:
        response = answer(broker, frame)
    except UnknownApi:
        return  # Kafka closes the connection
    assert response is None or struct.unpack_from(">i", response, 0)[0] == 42


@FUZZ
@given(cut=st.integers(0, 300), flips=st.lists(st.integers(0, 10_000), max_size=4))
def test_a_mangled_record_set_is_appended_only_when_the_answer_says_so(cut, flips):
    raw = bytearray(batch([b"x" * 40, b"y" * 40]))
    for i in flips:
        raw[i % len(raw)] ^= 0x5A
    records = bytes(raw[: len(raw) - cut % len(raw)])
    request = ProduceRequest(version=7, transactional_id=None, acks=-1, timeout_ms=1_000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    request.with_header(correlation_id=5, client_id="fuzz")
    broker = Broker()
    try:
        response = answer(broker, bytes(request.encode(header=True)))
    except UnknownApi:
        assert broker.log == []
        return
    [part] = ProduceResponse[7].decode(response, header=True).responses[0].partition_responses
    # Written exactly when the client is told so; a refused set is refused whole.
    assert (part.error_code == 0) == (broker.log != [])
    if part.error_code != 0:
        assert part.error_code in (2, 35, 76, 87)  # CORRUPT_MESSAGE, UNSUPPORTED_VERSION, UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD


def test_the_listener_closes_a_bad_connection_and_serves_the_others():
    async def scenario() -> tuple[bytes, bytes, int]:
        broker = Broker()
        listener = KafkaListener(broker, "b1", 0)
        host, port = await listener.start("127.0.0.1")
        broker.gateway = None

        async def talk(data: bytes) -> bytes:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(data)
            await writer.drain()
            try:
                return await asyncio.wait_for(reader.read(1 << 16), 5)
            finally:
                writer.close()

        over = await talk(struct.pack(">i", MAX_FRAME_BYTES + 1) + b"x" * 16)  # longer than socket.request.max.bytes
        unknown = await talk(struct.pack(">ihhih", 10, 11, 5, 1, 0))  # JoinGroup: closed without an answer
        request = ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1")
        request.with_header(correlation_id=9, client_id="ok")
        body = bytes(request.encode(header=True))
        good = await talk(struct.pack(">i", len(body)) + body)
        listener.close()
        return over, unknown, ApiVersionsResponse[3].decode(good[4:], header=True).header.correlation_id

    over, unknown, correlation_id = asyncio.run(scenario())
    assert over == b"" and unknown == b"" and correlation_id == 9


ADMIN_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@ADMIN_FUZZ
@given(name=st.sampled_from(["t", "u", "", "a/b", "x" * 250]), partitions=st.integers(-3, 12_000), rf=st.integers(-3, 5),
       assignment=st.none() | st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 4), max_size=4)), max_size=4),
       config=st.lists(st.tuples(st.sampled_from(["min.insync.replicas", "segment.bytes", "retention.ms"]), st.sampled_from(["1", "2", "0", "x", None])),
                       max_size=2), validate_only=st.booleans(), grow_to=st.integers(-1, 12_000))
def test_an_admin_request_changes_the_cluster_exactly_when_its_answer_says_so(name, partitions, rf, assignment, config, validate_only, grow_to):
    """CreateTopics then CreatePartitions of anything: a topic exists after with the partitions it
    was told it has, and nothing else was made; every error is one Kafka answers these with."""
    from kafka.protocol.admin.topics import CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse

    from tests.unit.test_kafka_admin import ask, topic

    broker = AdminBroker()
    before = dict(broker.image.partitions)
    request = CreateTopicsRequest(version=7, timeout_ms=5_000, validate_only=validate_only,
                                  topics=[topic(name, partitions, rf, assignments=assignment or (), configs=config)])
    [created] = ask(broker, request, CreateTopicsResponse, 7).topics
    assert created.error_code in (0, 17, 36, 37, 38, 39, 40, 42, 44)
    made = created.error_code == 0 and not validate_only
    assert (name in broker.image.topics) == (made or name == "t")
    if made:
        assert sum(t == name for t, _ in broker.image.partitions) == created.num_partitions
    else:
        assert broker.image.partitions == before
    grow = CreatePartitionsRequest(version=3, timeout_ms=5_000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=grow_to, assignments=None)])
    [grown] = ask(broker, grow, CreatePartitionsResponse, 3).results
    assert grown.error_code in (0, 3, 37, 38, 39, 44)
    if grown.error_code == 0:
        assert sum(t == name for t, _ in broker.image.partitions) == grow_to
