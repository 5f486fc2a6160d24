"""Real clients as load, the history's side: a load producer's records appended by a listener under
the identity their headers give, with no produce rows of the listener's own (gateway.py), and the
client's per-record rows joined with the listener's batches (load_join.py), only when the
listener's row came first and names that very record."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from actors.runtime.kafka.load_identity import client_id, header, load_client, load_identity
from actors.runtime.kafka.load_join import LoadJoin
from observability.events import Consume, EventRecord, KafkaRequest, LoadBatchAppended, LoadBatchServed, ProduceAck
from tests.unit.test_kafka_gateway import Broker, ProduceRequest, ProduceResponse, asyncio, decode, Connection, Gateway


def named_batch(producer: str, sequences: list[int]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, DefaultRecordBatch.CODEC_NONE, False, -1, -1, -1, 1 << 20)
    for i, sequence in enumerate(sequences):
        builder.append(i, 1_700_000_000_000, None, b"v", [header(producer, sequence)])
    return bytes(builder.build())


def test_a_load_client_and_its_records_are_told_apart_from_any_other():
    assert load_client(client_id("load-producer-2")) == "load-producer-2"
    assert load_client("rdkafka") is None and load_client(None) is None
    assert load_identity(named_batch("load-producer-1", [4, 7])) == ("load-producer-1", [4, 7])
    unnamed = DefaultRecordBatchBuilder(2, DefaultRecordBatch.CODEC_NONE, False, -1, -1, -1, 1 << 20)
    unnamed.append(0, 0, None, b"v", [])
    assert load_identity(bytes(unnamed.build())) is None


def produce_as(broker: Broker, client: str, records: bytes):
    broker.gateway = Gateway(broker, Connection("198.18.0.9:5000", "kafka:b1.0.1", "kafka:b1.0.1@198.18.0.9:5000"))
    request = ProduceRequest(version=7, transactional_id=None, acks=-1, timeout_ms=5_000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    request.with_header(correlation_id=7, client_id=client)
    answer = asyncio.run(broker.gateway.handle(bytes(request.encode(version=7, header=True))))
    return decode(ProduceResponse, 7, answer).responses[0].partition_responses[0]


def test_the_listener_appends_a_load_client_s_records_under_their_own_identity_and_leaves_their_rows_to_it():
    broker = Broker()
    answer = produce_as(broker, client_id("load-producer-1"), named_batch("load-producer-1", [10, 11, 12]))
    assert answer.error_code == 0 and answer.base_offset == 0
    [appended] = [e for e in broker.events if isinstance(e, LoadBatchAppended)]
    assert (appended.producer, appended.offset, appended.count, appended.sequences) == ("load-producer-1", 0, 3, (10, 11, 12))
    assert appended.batch_crc == broker.log[0].crc
    assert not [e for e in broker.events if e.kind in ("produce_send", "produce_ack")]
    [request] = [e for e in broker.events if isinstance(e, KafkaRequest)]
    assert request.producer == "load-producer-1"
    # Any other client, even with the header: the listener names its records and writes its rows.
    broker = Broker()
    produce_as(broker, "rdkafka", named_batch("load-producer-1", [10]))
    assert [e.kind for e in broker.events if e.kind.startswith(("produce", "load_"))] == ["produce_send", "produce_ack"]


def at(time_ms: float, node: str, event) -> EventRecord:
    return EventRecord(time_ms, node, 0, 0, event)


def test_the_client_s_rows_get_the_batch_the_listener_appended_or_served_there():
    join = LoadJoin()
    ack = ProduceAck("load-producer-1", "t", 0, "all", "ok", (11,), (3.0,), 41)
    assert join(at(1, "load-producer-1", ack)).event.batch_crc is None  # no listener row yet: left unjoined
    join(at(2, "b1", LoadBatchAppended("load-producer-1", "t", 0, 40, 3, 777, (10, 11, 12))))
    joined = join(at(3, "load-producer-1", ack)).event
    assert (joined.batch_offset, joined.batch_count, joined.batch_crc, joined.first_offset) == (40, 3, 777, 41)
    assert joined.batch == (40, 3, 777) and joined.rows()["batch_offset"] == [40] and joined.rows()["offset"] == [41]
    # Another record at that offset (the log was rewritten since): not this batch.
    other = ProduceAck("load-producer-1", "t", 0, "all", "ok", (99,), (3.0,), 42)
    assert join(at(4, "load-producer-1", other)).event.batch_crc is None
    read = Consume("load-consumer-1", 0, "t", 0, 41, "load-producer-1", (11,), None, None)
    join(at(5, "b2", LoadBatchServed("load-consumer-1", "t", 0, 40, 3, 777)))
    joined = join(at(6, "load-consumer-1", read)).event
    assert (joined.batch_offset, joined.batch_crc) == (40, 777)
    assert join(at(7, "load-consumer-2", read._replace(consumer="load-consumer-2"))).event.batch_crc is None
