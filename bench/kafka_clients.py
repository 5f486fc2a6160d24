"""A real Kafka producer through the brokers' Kafka listeners, beside kraftlab's own producer, on
one cluster: 3 brokers and 3 voters on the embedded Ray, RF 3, acks=all, 100-byte records.

1. kraftlab's own load generator (a producer actor), unthrottled: acknowledged records/s, p99
   (handed over to acknowledged), as bench/ray_throughput.py measures it;
2. a librdkafka producer (confluent-kafka, in this process) through the listeners, unthrottled
   with batches of up to 1,000 records (batch.num.messages; linger.ms 5): acknowledged records/s
   (delivery reports without error) and p99 from `produce()` to its delivery report.

    python bench/kafka_clients.py [--seconds 10] [--partitions 1] [--storage page_cache]

Figures only; nothing here is a pass/fail test. The issue's target: the librdkafka producer at
least half the own generator's rate.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer  # noqa: E402
from ray_throughput import measure  # noqa: E402

from observability.latency import LatencyHistogram  # noqa: E402
from workloads.drivers import ray_cluster  # noqa: E402
from workloads.scenario.schema import Scenario  # noqa: E402

RECORD = b"x" * 100
# queue.buffering.max.messages: the client's bound on records not yet acknowledged, as kraftlab's
# producer's buffer in bench/ray_throughput.py (BUFFER_RECORDS), so that both latencies are at
# the same queue depth.
IN_FLIGHT_RECORDS = 4_000


def scenario(storage: str, partitions: int) -> Scenario:
    return Scenario.model_validate({
        "name": f"bench-kafka-clients-{storage}-{partitions}p", "runtime": "ray",
        "cluster": {"brokers": 3, "controllers": 3, "storage": storage, "listeners": ["kafka"], "config": {"min.insync.replicas": 2}},
        "topics": [{"name": "t", "partitions": partitions, "replication_factor": 3}],
        "steps": [{"wait": 1}],
    })


def librdkafka(servers: str, partitions: int, seconds: float, warmup_s: float = 3.0) -> dict:
    """The delivery callback is kept to a list append (it runs once per record, in Python, on the
    benchmark's core): latencies go into the histogram after the measured span."""
    latencies: list[float] = []
    failed = [0]
    measuring = [False]

    def delivered(err, _msg, sent=0.0, now=time.perf_counter) -> None:
        if measuring[0]:
            if err is None:
                latencies.append(now() - sent)
            else:
                failed[0] += 1

    producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5, "batch.num.messages": 1000,
                         "queue.buffering.max.messages": IN_FLIGHT_RECORDS, "enable.idempotence": False})
    started = time.perf_counter()
    begun = None
    i = 0
    while time.perf_counter() - started < warmup_s + seconds:
        if begun is None and time.perf_counter() - started >= warmup_s:
            measuring[0], begun = True, time.perf_counter()
        sent = time.perf_counter()
        try:
            producer.produce("t", RECORD, partition=i % partitions, on_delivery=lambda err, msg, s=sent: delivered(err, msg, s))
            i += 1
        except BufferError:
            producer.poll(0.001)
            continue
        if i % 1000 == 0:
            producer.poll(0)
    span = time.perf_counter() - begun
    measuring[0] = False
    acked = len(latencies)
    producer.flush(30)
    histogram = LatencyHistogram()
    for latency in latencies[:acked]:
        histogram.record_ms(latency * 1000.0, 1)
    return {"acked_per_s": acked / span, "failed": failed[0], "p50": histogram.percentile_ms(50), "p99": histogram.percentile_ms(99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--storage", default="page_cache", choices=["page_cache", "fsync"])
    args = parser.parse_args()
    cluster = ray_cluster(scenario(args.storage, args.partitions), check_invariants=False)
    try:
        cluster.stop_observing()
        own = measure(cluster, cluster.clients.producers[0], [("t", p) for p in range(args.partitions)], None, args.seconds)
        real = librdkafka(cluster.bootstrap_servers, args.partitions, args.seconds)
    finally:
        cluster.close()
    print(f"{args.storage} {args.partitions}p, acks=all, RF 3, 100-byte records, {args.seconds:g} s each")
    print(f"  kraftlab's producer:         {own['acked_per_s']:>9,.0f} acked rec/s  p50 {own['p50']:.1f} ms  p99 {own['p99']:.1f} ms  failed {own['failed']}")
    print(f"  librdkafka (confluent-kafka): {real['acked_per_s']:>9,.0f} acked rec/s  p50 {real['p50']:.1f} ms  p99 {real['p99']:.1f} ms  failed {real['failed']}")
    print(f"  ratio librdkafka / kraftlab: {real['acked_per_s'] / own['acked_per_s']:.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()
