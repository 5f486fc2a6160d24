"""How the simulator scales with partitions, every invariant checked and the whole history written.

For each partition count: 6 brokers, 3 controller voters, one topic with RF 3 and MinISR 2 on
page-cache storage, 2 load producers at 2,000 records/s in all (acks=all, 100-byte records). After
the warm-up, broker 1's host crashes (an OS crash); the run measures how long, in simulated time,
until every partition broker 1 led has another leader (the failover), restarts broker 1 and runs a
while longer. The history goes to Parquet files, as in every run; every invariant is checked
after every event.

Printed per partition count: simulated seconds per wall-clock second (the target: 100 partitions
>= 10x real time, 1,000 >= 1x), history rows per wall-clock second, the failover time against
2 x broker.session.timeout.ms (the target for 10,000 partitions), the simulated time spent in
each phase, and the violations found (none expected).

    python bench/sim_scale.py [--partitions 10 100 1000 10000] [--warmup-ms 5000] [--after-ms 5000]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from actors.runtime.gc_tuning import tune_for_event_streams
from observability.history import HistoryWriter
from observability.metrics.openmetrics import SIM_EPOCH_S, recorder_for
from workloads.drivers import sim_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import LoadArgs
from workloads.steps import protocol_command

SESSION_TIMEOUT_MS = 9_000  # broker.session.timeout.ms (Kafka's default; the scenario keeps it)
FAILOVER_LIMIT_MS = 60_000


def scenario(partitions: int):
    return validate(
        {
            "name": f"sim-scale-{partitions}",
            "cluster": {"brokers": 6, "controllers": 3, "storage": "page_cache", "config": {"min.insync.replicas": 2}},
            "topics": [{"name": "t", "partitions": partitions, "replication_factor": 3}],
        },
        "bench/sim_scale.py",
    )


def run(partitions: int, warmup_ms: float, after_ms: float, out: Path) -> dict:
    history = HistoryWriter(out)
    # As `kraftlab run` observes a run: the history and metrics.om (one sample of every series
    # per simulated second; records lost read from the view).
    metrics = recorder_for(out / "metrics.om", ("c1", "c2", "c3"), 6, SIM_EPOCH_S)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    cluster = sim_cluster(scenario(partitions), event_sinks=[history, metrics])
    sim, view = cluster.sim, cluster.view()
    metrics.model.lost.view = view
    ready_ms, ready_wall = sim.now_ms, time.perf_counter()
    cluster.clients.load(protocol_command("load", LoadArgs(producers=2, consumers=0, rate_per_s=2000, message_bytes=100, acks="all")), {"t": partitions})
    cluster.run_for(warmup_ms)
    led_by_1 = [k for k, state in view.partitions().items() if state.leader == 1]
    crash_ms = sim.now_ms
    cluster.crash("b1", "os")

    def failed_over() -> bool:
        return all(view.partition(k).leader not in (None, 1) for k in led_by_1)

    done = cluster.run_until(failed_over, FAILOVER_LIMIT_MS)
    failover_ms = sim.now_ms - crash_ms
    cluster.restart("b1")
    cluster.run_for(after_ms)
    history.close()
    metrics.close(sim.now_ms)
    wall = time.perf_counter() - wall0
    steps_wall = time.perf_counter() - ready_wall
    steps_sim_s = (sim.now_ms - ready_ms) / 1000.0
    return {
        "partitions": partitions,
        "bring_up_sim_s": ready_ms / 1000.0,
        "steps_sim_s": steps_sim_s,
        "sim_s": sim.now_ms / 1000.0,
        "wall_s": wall,
        "cpu_s": time.process_time() - cpu0,
        "speed": steps_sim_s / steps_wall,
        "rows": sim.trace.event_count,
        "rows_per_s": sim.trace.event_count / wall,
        "failover_ms": failover_ms if done else None,
        "acked": view.acked(),
        "violations": sorted(sim.violations),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--warmup-ms", type=float, default=5_000)
    parser.add_argument("--after-ms", type=float, default=5_000)
    parser.add_argument("--default-gc", action="store_true", help="Keep CPython's default GC thresholds (kraftlab's commands raise them).")
    args = parser.parse_args()
    if not args.default_gc:
        tune_for_event_streams()  # as `kraftlab run` does
    print("6 brokers, 3 voters, RF 3, MinISR 2, page cache; 2 producers, 2,000 records/s acks=all; "
          "an OS crash of broker 1, failover, restart; every invariant checked, history written")
    print(f"{'partitions':>10} {'sim s':>7} {'wall s':>8} {'x real time':>11} {'rows':>10} {'rows/s':>8} "
          f"{'failover ms':>11} {'(2x session)':>12} {'acked':>8}  violations")
    for p in args.partitions:
        with tempfile.TemporaryDirectory(prefix="sim-scale-") as tmp:
            r = run(p, args.warmup_ms, args.after_ms, Path(tmp))
        failover = "not done" if r["failover_ms"] is None else f"{r['failover_ms']:,.0f}"
        print(f"{p:>10,} {r['sim_s']:>7.1f} {r['wall_s']:>8.1f} {r['speed']:>11.2f} {r['rows']:>10,} {r['rows_per_s']:>8,.0f} "
              f"{failover:>11} {2 * SESSION_TIMEOUT_MS:>12,} {r['acked']:>8,}  {', '.join(r['violations']) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
