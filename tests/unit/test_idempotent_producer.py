"""The idempotent producer (actors/clients/producer.py) on its own: what its batches carry across
retries, and how it numbers again when the leader's sequences and its own part (KIP-98, KIP-360)."""

import math
import random

from actors.clients.produce_state import ProduceCommand
from actors.clients.idempotence import PRODUCER_ID_STRIDE
from actors.clients.producer import RETRY_BACKOFF_JITTER, RETRY_BACKOFF_MS, ProducerNode
from actors.contract import Envelope, StartContext
from actors.replication.messages import (
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProduceRequest,
    ProduceResponse,
)

PID = 1_000
# The first retry is due within retry.backoff.ms and its jitter (KIP-580).
FIRST_RETRY_MS = RETRY_BACKOFF_MS * (1 + RETRY_BACKOFF_JITTER)


def producer():
    p = ProducerNode(StartContext("producer", {}, None, random.Random(0)), ["b1", "b2", "b3"], PID)
    (env,) = p.start(0.0).sends
    assert isinstance(env.payload, MetadataRequest)
    p.handle(Envelope("b1", "producer", MetadataResponse(env.payload.request_id, (PartitionMetadata("t", 0, 1, 0),), (1, 2, 3))), 0.0)
    return p


def requests(out) -> list[ProduceRequest]:
    return [e.payload for e in out.sends if isinstance(e.payload, ProduceRequest)]


def submit(p, cid, n, now, idempotent=True, timeout_ms=30_000):
    cmd = ProduceCommand(cid, "t", 0, tuple(f"v{cid}-{i}" for i in range(n)), -1, idempotent, timeout_ms)
    return requests(p.submit(cmd, now))


def answer(p, req, now, error=None, base_offset=0):
    return requests(p.handle(Envelope("b1", "producer", ProduceResponse(req.request_id, "t", 0, error, base_offset)), now))


def test_a_retry_keeps_the_producer_id_and_base_sequence():
    p = producer()
    (first,) = submit(p, 1, 3, 0.0)
    assert (first.batch.producer_id, first.batch.base_sequence) == (PID, 0)
    answer(p, first, 1.0)
    (second,) = submit(p, 2, 2, 2.0)
    assert second.batch.base_sequence == 3
    assert answer(p, second, 3.0, NOT_ENOUGH_REPLICAS) == []
    (retry,) = requests(p.tick(3.0 + FIRST_RETRY_MS))
    assert (retry.batch.producer_id, retry.batch.base_sequence, retry.batch.crc) == (PID, 3, second.batch.crc)


def test_out_of_order_sequence_numbers_again_under_a_new_producer_id_and_retries():
    p = producer()
    (first,) = submit(p, 1, 3, 0.0)
    assert answer(p, first, 1.0, OUT_OF_ORDER_SEQUENCE_NUMBER) == []
    (retry,) = requests(p.tick(1.0 + FIRST_RETRY_MS))
    assert (retry.batch.producer_id, retry.batch.base_sequence, retry.batch.crc) == (PID + PRODUCER_ID_STRIDE, 0, first.batch.crc)
    answer(p, retry, 200.0)
    assert p.acked == 3 and p.failed == 0


def test_a_failed_batch_makes_the_next_start_from_0_under_a_new_producer_id():
    """The failed batch's sequences may or may not be in the leader's log: the next batch could
    never follow on them, so the producer numbers from 0 again (Kafka bumps its epoch)."""
    p = producer()
    (first,) = submit(p, 1, 3, 0.0, timeout_ms=50)
    p.tick(60.0)  # the delivery timeout: the batch fails, unanswered
    assert p.failed == 3
    (second,) = submit(p, 2, 2, 70.0)
    assert (second.batch.producer_id, second.batch.base_sequence) == (PID + PRODUCER_ID_STRIDE, 0)


def test_non_idempotent_batches_carry_no_producer_id():
    p = producer()
    (req,) = submit(p, 1, 3, 0.0, idempotent=False)
    assert req.batch.producer_id == -1 and req.batch.base_sequence == -1


def test_retries_back_off_exponentially_up_to_the_maximum_with_jitter():
    """KIP-580 (Kafka >= 3.7): retry.backoff.ms (100) doubled at each failed attempt up to
    retry.backoff.max.ms (1000), times a factor in [0.8, 1.2) (ExponentialBackoff)."""
    p = producer()
    (req,) = submit(p, 1, 1, 0.0)
    now, waits = 0.0, []
    for _ in range(6):
        assert answer(p, req, now, NOT_ENOUGH_REPLICAS) == []
        due = p.in_flight[("t", 0)].retry_at_ms
        waits.append(due - now)
        (req,) = requests(p.tick(due))
        now = due
    for attempt, wait in enumerate(waits):
        term = RETRY_BACKOFF_MS * 2 ** min(attempt, math.log2(10))  # 100, 200, 400, 800, 1000, 1000
        assert (1 - RETRY_BACKOFF_JITTER) * term - 1 <= wait <= min((1 + RETRY_BACKOFF_JITTER) * term, 1000), (attempt, waits)
    assert len(set(waits)) == len(waits)  # jittered


def test_a_new_leader_ends_the_back_off_at_once():
    """RecordAccumulator.shouldBackoff: no back-off once the metadata names a new leader."""
    p = producer()
    (req,) = submit(p, 1, 1, 0.0)
    for now in (1.0, 200.0, 600.0):  # three refusals: the back-off is now ~400 ms
        assert answer(p, req, now, NOT_ENOUGH_REPLICAS) == []
        (req,) = requests(p.tick(p.in_flight[("t", 0)].retry_at_ms))
    out = p.handle(Envelope("b1", "producer", ProduceResponse(req.request_id, "t", 0, NOT_LEADER_OR_FOLLOWER, 0)), 1500.0)
    (meta,) = [e.payload for e in out.sends if isinstance(e.payload, MetadataRequest)]  # asked at once
    assert p.in_flight[("t", 0)].retry_at_ms > 1600.0
    sent = requests(p.handle(Envelope("b2", "producer", MetadataResponse(meta.request_id, (PartitionMetadata("t", 0, 2, 1),), (1, 2, 3))), 1510.0))
    assert [(r.batch.base_sequence, r.batch.producer_id) for r in sent] == [(0, PID)]
