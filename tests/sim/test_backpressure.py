"""Backpressure of the load producers (Kafka's buffer.memory and max.block.ms): a producer holds
at most buffer.memory bytes of records waiting or in flight; when it is full, the load generator's
send() blocks (at most max.block.ms, then that record fails, never written) and the records that
come due meanwhile are throttled (never offered, counted apart). Load above what the cluster can
take then saturates instead of piling up without bound.

The outage below: the load producer cut off from every broker for 5 s under 1,000 records/s. With
a buffer of 100 records it blocks; with Kafka's default 32 MiB nothing is throttled and every record
waits in the buffer until the producer reaches the brokers again."""

from collections import Counter

import pytest

from actors.clients.producer import REQUEST_TIMEOUT_MS
from observability.events import LoadThrottled, ProduceAck, ProduceSend
from workloads.scenario.step_spec import LoadArgs

from .load_world import one_partition_load

RATE = 1_000  # records/s
RECORD = 100 + 70  # message_bytes + RECORD_OVERHEAD_BYTES
PRODUCER = "load-producer-1"


def outage_run(**config):
    """Load for 16 s: 3 s healthy, the load producer cut off from every broker for 5 s, then
    healed. Returns the load stats, the history's counts per phase and the cluster."""
    history = Counter()
    errors = Counter()
    clock = {"outage": None, "heal": None}

    def phase(at_ms: float) -> str:
        if clock["outage"] is None or at_ms < clock["outage"]:
            return "before"
        if clock["heal"] is None or at_ms < clock["heal"]:
            return "during"
        return "after"

    def count(rec) -> None:
        ev = rec.event
        if isinstance(ev, ProduceSend):
            history["sent"] += len(ev.sequences)
        elif isinstance(ev, ProduceAck):
            history[ev.outcome] += len(ev.sequences)
            if ev.outcome != "ok":
                errors[ev.error] += len(ev.sequences)
        elif isinstance(ev, LoadThrottled):
            history["throttled"] += ev.count
            history["throttled " + phase(rec.time_ms)] += ev.count
            if clock["heal"] is not None and rec.time_ms >= clock["heal"] + REQUEST_TIMEOUT_MS + 1_000:
                history["throttled once the lost request timed out"] += ev.count

    load = LoadArgs(producers=1, rate_per_s=RATE, message_bytes=100, acks="all", duration_ms=16_000, config=config)
    c = one_partition_load("backpressure", load, count)
    c.run_for(3_000)
    clock["outage"] = c.now_ms
    c.isolate(PRODUCER)
    c.run_for(5_000)
    clock["heal"] = c.now_ms
    c.heal(None)
    c.run_for(10_000)
    c.clients.finish()
    return c.view().load_stats(), history, errors, c


def test_a_full_buffer_blocks_the_generator_and_throttles_what_comes_due():
    stats, history, errors, c = outage_run(**{"buffer.memory": 100 * RECORD, "max.block.ms": 1_000})
    # Offered is the load's schedule (16 s at 1,000/s); what was not offered is counted apart.
    assert stats["offered"] == pytest.approx(16 * RATE, abs=20)
    assert stats["offered"] == stats["sent"] + stats["throttled"]
    # The buffer (0.1 s of load) fills at once: the generator is blocked for nearly all of the
    # outage. Each blocked send() gives up after max.block.ms (one failed record a second), and
    # the next record due blocks again.
    assert 4_500 <= history["throttled during"] <= 5_000, history
    assert 4 <= errors["MAX_BLOCK_TIMEOUT"] <= 5, errors
    # The request in flight at the outage was lost with the link: after the heal the producer
    # waits for its timeout, then the buffer drains and nothing more is throttled.
    assert history["throttled once the lost request timed out"] == 0, history
    assert history["throttled after"] > 0
    # The history says the same as the summary, and every record sent has its outcome.
    assert history["sent"] == stats["sent"] and history["throttled"] == stats["throttled"]
    assert history["ok"] == stats["acked"] and history["fail"] + history["info"] == stats["failed"]
    assert stats["acked"] + stats["failed"] == stats["sent"]
    assert stats["failed"] == errors["MAX_BLOCK_TIMEOUT"]  # the buffered records were delivered
    assert c.role(PRODUCER).buffered_bytes == 0  # every record settled gave its bytes back
    assert c.view().acked_lost() == 0 and c.violations() == []


def test_kafkas_default_buffer_holds_the_outage_without_throttling():
    stats, history, errors, c = outage_run()
    assert stats["throttled"] == 0 and history["throttled"] == 0
    assert stats["sent"] == stats["offered"] == pytest.approx(16 * RATE, abs=20)
    assert stats["acked"] == stats["sent"]  # every record waited in the buffer and was delivered
    assert c.view().acked_lost() == 0 and c.violations() == []


def test_producer_config_is_validated():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="buffer.memory"):
        LoadArgs(config={"buffer.memory": 0})
    with pytest.raises(ValidationError, match="linger"):
        LoadArgs(config={"linger.ms": -1})
    with pytest.raises(ValidationError, match="batch.size"):
        LoadArgs(config={"batch.size": 0})
    with pytest.raises(ValidationError, match="compression.type"):
        LoadArgs(config={"compression.type": "lz4"})  # a producer setting kraftlab does not model
