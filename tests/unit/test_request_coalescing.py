"""Produce requests and answers travel per broker, not per partition (issue 12, item 5)."""

from actors.contract import Envelope
from actors.replication.messages import ProduceRequest, ProduceRequests, ProduceResponse, ProduceResponses, coalesce
from storage.partition_log import RecordBatch


def request(rid: int, partition: int) -> ProduceRequest:
    return ProduceRequest(rid, "t", partition, -1, 30_000, RecordBatch.of(b"x", 1))


def test_requests_to_one_broker_become_one_message_where_the_first_was():
    sends = [
        Envelope("p", "b1", request(1, 0)),
        Envelope("p", "b2", "metadata"),
        Envelope("p", "b1", request(2, 1)),
        Envelope("p", "b3", request(3, 2)),
        Envelope("p", "b1", request(4, 3)),
    ]
    out = coalesce(sends, ProduceRequest, ProduceRequests)
    assert [e.dst for e in out] == ["b1", "b2", "b3"]
    assert out[0].payload == ProduceRequests((request(1, 0), request(2, 1), request(4, 3)))
    assert out[1].payload == "metadata"
    assert out[2].payload == request(3, 2)  # a lone part goes as it is


def test_nothing_to_merge_keeps_the_list():
    sends = [Envelope("p", "b1", request(1, 0)), Envelope("p", "b2", request(2, 1))]
    assert coalesce(sends, ProduceRequest, ProduceRequests) is sends


def test_merged_answers_wait_for_a_flush_if_any_part_did():
    a = ProduceResponse(1, "t", 0, None, 0)
    b = ProduceResponse(2, "t", 1, None, 5)
    out = coalesce([Envelope("b1", "p", a, False), Envelope("b1", "p", b, True)], ProduceResponse, ProduceResponses)
    assert out == [Envelope("b1", "p", ProduceResponses((a, b)), True)]
