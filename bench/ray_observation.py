"""What observing a Ray cluster costs the driver: its CPU while it collects the history and keeps
the cluster view and every invariant check up to date, as a share of one core.

A fresh cluster per partition count (3 brokers, 3 voters, RF 3, MinISR 2, page cache) on the
embedded Ray, with 2 producers at 2,000 records/s in all (acks=all, 100-byte records). For
`--seconds` the driver does what a run's `wait_for` does: collect every actor's events since its
cursor every 50 ms, hand them in time order to the view and the checks, and write the history
to Parquet. Then, for the same time, the driver collects nothing (`stop_observing`): the
difference is the cost of observing. The driver's CPU is its process's (every thread: Ray's own
included), from `time.process_time`.

Printed per partition count: history rows collected per second, the driver's CPU share while
observing and while not, and what observing costs (the target: below 10% of one core for 1,000
partitions).

    python bench/ray_observation.py [--partitions 10 100 1000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.runtime.gc_tuning import tune_for_event_streams
from actors.runtime.ray.cluster import RayCluster
from observability.history import HistoryWriter
from workloads.drivers import ray_cluster
from workloads.scenario.schema import Scenario
from workloads.scenario.step_spec import LoadArgs
from workloads.steps import protocol_command

WARMUP_S = 5.0


def scenario(partitions: int) -> Scenario:
    return Scenario.model_validate(
        {
            "name": f"observe-{partitions}p",
            "runtime": "ray",
            "cluster": {"brokers": 3, "controllers": 3, "storage": "page_cache", "config": {"min.insync.replicas": 2}},
            "topics": [{"name": "t", "partitions": partitions, "replication_factor": 3}],
            "steps": [{"wait": 1}],
        }
    )


def driver_share(cluster: RayCluster, seconds: float) -> tuple[float, int]:
    """The driver's CPU share of one core over `seconds` of waiting as `wait_for` does, and the
    history rows collected meanwhile."""
    rows0 = cluster.sim.trace.event_count
    cpu0, wall0 = time.process_time(), time.perf_counter()
    cluster.run_until(lambda: False, seconds * 1000.0)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu / wall, cluster.sim.trace.event_count - rows0


def run_one(partitions: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="ray-observe-") as tmp:
        history = HistoryWriter(Path(tmp) / "events")
        cluster = ray_cluster(scenario(partitions), event_sinks=[history], data_root=Path(tmp) / "data")
        try:
            cluster.clients.load(protocol_command("load", LoadArgs(producers=2, consumers=0, rate_per_s=2000, message_bytes=100, acks="all")), {"t": partitions})
            cluster.run_until(lambda: False, WARMUP_S * 1000.0)
            observing, rows = driver_share(cluster, seconds)
            acked = cluster.view().acked()
            violations = sorted(cluster.sim.violations)
            cluster.stop_observing()
            unobserved, _ = driver_share(cluster, seconds)
        finally:
            cluster.close()
            history.close()
    return {"partitions": partitions, "observing": observing, "unobserved": unobserved, "rows_per_s": rows / seconds, "acked": acked, "violations": violations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    tune_for_event_streams()  # as `kraftlab run` does (the node actors do it themselves)
    print("3 brokers, 3 voters, RF 3, page cache; 2 producers, 2,000 records/s acks=all; the driver's CPU as a share of one core")
    print(f"{'partitions':>10} {'rows/s':>8} {'observing':>10} {'not observing':>14} {'cost':>7} {'acked':>8}  violations")
    for p in args.partitions:
        r = run_one(p, args.seconds)
        print(f"{p:>10,} {r['rows_per_s']:>8,.0f} {r['observing']:>10.1%} {r['unobserved']:>14.1%} {r['observing'] - r['unobserved']:>7.1%} "
              f"{r['acked']:>8,}  {', '.join(r['violations']) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
