"""The load producers' batching under Kafka's names (`load.config`: `linger.ms`, `batch.size`;
actors/clients/producer.py, `_batch_ready` and `_new_batch`), as Kafka's RecordAccumulator does it:
a partition's records wait until they fill `batch.size` bytes or the oldest has waited
`linger.ms`; a batch never holds more than `batch.size` bytes.

Each case runs one load producer against 3 brokers (RF 3, one partition) in the simulator and reads
the batches from the history: one `produce_attempt` row per batch sent."""

from statistics import median

from observability.events import ProduceAck, ProduceAttempt
from workloads.scenario.step_spec import LoadArgs

from .load_world import one_partition_load

RECORD = 100 + 70  # a 100-byte record's share of batch.size (its value and 70 bytes of overhead)


def batches_and_latencies(rate_per_s: float, config: dict, settle_ms: float = 0) -> tuple[list[int], list[float]]:
    """The record count of every batch sent (first attempts) and every acknowledged record's
    latency, for 2 s of load at `rate_per_s` with this `load.config` (started `settle_ms` after
    the cluster is ready)."""
    counts: list[int] = []
    latencies: list[float] = []

    def watch(rec) -> None:
        if isinstance(rec.event, ProduceAttempt) and rec.event.attempt == 1:
            counts.append(rec.event.count)
        elif isinstance(rec.event, ProduceAck) and rec.event.outcome == "ok":
            latencies.extend(rec.event.latencies_ms)

    load = LoadArgs.model_validate({"producers": 1, "rate_per_s": rate_per_s, "message_bytes": 100, "acks": "all",
                                    "duration_ms": 2_000, "config": config})
    c = one_partition_load("load-batching", load, watch, settle_ms=settle_ms)
    c.run_for(3_000)
    c.clients.finish()
    assert c.view().acked_lost() == 0 and c.violations() == []
    return counts, latencies


def test_without_linger_a_round_leaves_at_once():
    # 200 records/s: 2 records in each 10 ms round, sent as soon as the round queues them.
    counts, _ = batches_and_latencies(200, {})
    assert median(counts) == 2


def test_linger_gathers_rounds_into_one_batch_and_costs_its_wait():
    # linger.ms 50: the first record of a batch waits 50 ms, the rounds behind it join it.
    counts, latencies = batches_and_latencies(200, {"linger.ms": 50})
    assert 8 <= median(counts) <= 12
    _, without = batches_and_latencies(200, {})
    # a record waits out what is left of its batch's linger (50, 40, ..., 0 ms: 25 on average;
    # both medians also hold the records that waited for the first metadata)
    assert median(latencies) >= median(without) + 10


def test_a_full_batch_does_not_wait_for_its_linger():
    # 2,000 records/s (20 a round), batch.size of 10 records, linger.ms of a second: every batch is
    # full (10 records) and leaves at once; the linger never runs out. The load starts once the
    # partition's followers fetch (settle_ms): else a follower that asked its leader before the
    # leader knew it leads backs off 1 s (replica.fetch.backoff.ms), the first acks=all answer
    # waits for it, and with one batch in flight every record behind it waits as long, which
    # says nothing about the linger.
    counts, latencies = batches_and_latencies(2_000, {"linger.ms": 1_000, "batch.size": 10 * RECORD}, settle_ms=1_500)
    assert max(counts) == 10 and median(counts) == 10
    assert max(latencies) < 1_000


def test_batch_size_bounds_a_batch_in_bytes():
    # 20,000 records/s (200 a round) into batches of at most 25 records' bytes.
    counts, _ = batches_and_latencies(20_000, {"batch.size": 25 * RECORD})
    # the load's values are up to 100 bytes (91 for its first records: "<id>-<n>-" then padding)
    assert 25 <= max(counts) <= 25 * RECORD // (91 + 70)
    assert 25 <= median(counts) <= 26
    # without it, a round's 200 records leave in one batch (kraftlab's default: up to 1,000 records)
    default_counts, _ = batches_and_latencies(20_000, {})
    assert median(default_counts) >= 100
