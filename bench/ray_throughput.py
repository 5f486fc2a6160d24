"""Produce throughput and latency on a local Ray: RF 3, acks=all, 100-byte records.

For each storage mode (page_cache, fsync) and partition count (1, 8) a fresh 3-broker, 3-voter
cluster runs on the embedded Ray, and one producer actor writes

1. unthrottled (like producer-perf-test `--throughput -1`, with a bounded buffer): the acknowledged
   records/s is the ceiling of the protocol path, with its latency at saturation;
2. open loop at half that rate: the latency (handed over -> acknowledged) at moderate load.

In the same run it measures two transport ceilings for the same batch sizes (one actor calling
another with a payload of the average batch's size, one call in flight per partition, as the
producer has): over the node actors' wire (actors/runtime/ray/wire.py, what the data path uses)
and over a Ray actor call (what it used before), and the fsync latency of the data directory's
disk; it prints each result as a ratio to the wire's ceiling, with what fsync's cost predicts for
the fsync runs, and the CPU each role spends per 1,000 acknowledged records.

    python bench/ray_throughput.py [--seconds 10] [--partitions 1 8] [--storage page_cache fsync] [--repeat 1]
        [--buffer-records 4000] [--batch-size BYTES] [--linger-ms 0] [--address RAY_ADDRESS]

Figures only; nothing here is a pass/fail test. The driver polls nothing during the measured
phases (RayCluster.stop_observing; `invoke` then polls nothing either): the invariant checks are the scenario tests' business.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.runtime.ray import adapter
from actors.runtime.ray.cluster import RayCluster
from observability.latency import LatencyHistogram
from workloads.drivers import ray_cluster
from workloads.scenario.schema import Scenario

RECORD_BYTES = 100
BUFFER_RECORDS = 4_000  # unthrottled load: records waiting or in flight at most (buffer.memory)
BATCH_SIZE: int | None = None  # the producer's batch.size in bytes (None: its default, 1,000 records)
LINGER_MS = 0.0  # the producer's linger.ms
WARMUP_S = 3.0


def scenario(storage: str, partitions: int) -> Scenario:
    return Scenario.model_validate(
        {
            "name": f"bench-{storage}-{partitions}p",
            "runtime": "ray",
            "cluster": {"brokers": 3, "controllers": 3, "storage": storage, "config": {"min.insync.replicas": 2}},
            "topics": [{"name": "t", "partitions": partitions, "replication_factor": 3}],
            "steps": [{"wait": 1}],
        }
    )


def _start(role, now, partitions, rate, until, buffer_records, batch_size, linger_ms):
    role.latency = LatencyHistogram()
    return role.start_load(partitions, rate, RECORD_BYTES, -1, now, until, buffer_records=buffer_records,
                           batch_size=batch_size, linger_ms=linger_ms)


def _reading(role, now):
    """Acknowledged/failed records, batches sent, and the latency histogram since the last reading."""
    h, role.latency = role.latency, LatencyHistogram()
    progress = role.commands[role.last_load.command_id]
    return {"now": now, "acked": progress.acked, "failed": progress.failed, "batches": role.batches_acked, "latency": h}


def _stop(role, now):
    role.load = None


BROKERS = ("b1", "b2", "b3")


def machine_cpu_busy_s() -> float:
    """CPU seconds the whole machine spent busy (every process and the kernel; /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _usage(cluster: RayCluster, producer: str) -> dict[str, float]:
    """Running totals, one counters call per actor: files synced, ms spent syncing and flushes
    (brokers summed), CPU seconds of the brokers' and the producer's processes, and the machine's."""
    brokers = [cluster.counters(b) for b in BROKERS]
    return {
        "fsyncs": sum(c["fsyncs"] for c in brokers),
        "fsync_ms": sum(c["fsync_ms"] for c in brokers),
        "flushes": sum(c["flushes"] for c in brokers),
        "brokers_cpu": sum(c["cpu_s"] for c in brokers),
        "brokers_sys": sum(c["cpu_sys_s"] for c in brokers),
        **{f"cpu_{b}": c["cpu_s"] for b, c in zip(BROKERS, brokers, strict=True)},
        "producer_cpu": (p := cluster.counters(producer))["cpu_s"],
        # frames (wire.py) the brokers and the producer wrote: transport calls per batch
        "frames": sum(c["frames_sent"] for c in brokers) + p["frames_sent"],
        "machine_cpu": machine_cpu_busy_s(),
    }


def measure(cluster: RayCluster, producer: str, partitions: list, rate: float | None, seconds: float) -> dict:
    cluster.invoke(producer, lambda role, now: _start(role, now, partitions, rate, None, BUFFER_RECORDS, BATCH_SIZE, LINGER_MS))
    time.sleep(WARMUP_S)
    first, before = cluster.invoke(producer, _reading), _usage(cluster, producer)
    time.sleep(seconds)
    last, after = cluster.invoke(producer, _reading), _usage(cluster, producer)
    used = {k: after[k] - before[k] for k in after}
    cluster.invoke(producer, _stop)
    time.sleep(1.0)  # let what is in flight finish before the next phase
    span_s = (last["now"] - first["now"]) / 1000.0
    acked = last["acked"] - first["acked"]
    batches = last["batches"] - first["batches"]
    lat = last["latency"]
    busiest = max(used[f"cpu_{b}"] for b in BROKERS)
    return {
        "acked_per_s": acked / span_s,
        "failed": last["failed"] - first["failed"],
        "records_per_batch": acked / batches if batches else 0.0,
        "frames_per_batch": used["frames"] / batches if batches else 0.0,
        "p50": lat.percentile_ms(50),
        "p99": lat.percentile_ms(99),
        "p999": lat.percentile_ms(99.9),
        # fsyncs the brokers made meanwhile, and their mean duration under this load (in situ)
        "fsyncs_per_batch": used["fsyncs"] / batches if batches else 0.0,
        "fsync_mean_ms": used["fsync_ms"] / used["fsyncs"] if used["fsyncs"] else None,
        # one flush syncs every file dirty when it begins (group commit), one after another
        "flush_mean_ms": used["fsync_ms"] / used["flushes"] if used["flushes"] else None,
        "files_per_flush": used["fsyncs"] / used["flushes"] if used["flushes"] else 0.0,
        # share of the time each broker's fsync thread was busy
        "fsync_busy": used["fsync_ms"] / len(BROKERS) / (span_s * 1000.0) if span_s else 0.0,
        # CPU per 1,000 acknowledged records (ms): the three brokers, the producer, the machine
        "brokers_cpu_ms_per_k": 1e6 * used["brokers_cpu"] / acked if acked else None,
        "producer_cpu_ms_per_k": 1e6 * used["producer_cpu"] / acked if acked else None,
        "machine_cpu_ms_per_k": 1e6 * used["machine_cpu"] / acked if acked else None,
        "machine_busy": used["machine_cpu"] / (span_s * (os.cpu_count() or 1)) if span_s else 0.0,
        # the kernel's part of the brokers' CPU, per 1,000 acknowledged records (ms)
        "brokers_sys_ms_per_k": 1e6 * used["brokers_sys"] / acked if acked else None,
        # the busiest broker (the leader, with one partition): an actor runs on one core at most
        "busiest_busy": busiest / span_s if span_s else 0.0,
        "busiest_cpu_ms_per_k": 1e6 * busiest / acked if acked else None,
    }


def fsync_latency_ms(directory: Path, size: int, rounds: int = 200) -> dict:
    """Append `size` bytes and fsync, `rounds` times, in the folder the brokers write to."""
    samples = []
    path = directory / "fsync-probe"
    with open(path, "ab") as f:
        for _ in range(rounds):
            f.write(os.urandom(size))
            f.flush()
            t = time.perf_counter()
            os.fsync(f.fileno())
            samples.append((time.perf_counter() - t) * 1000.0)
    path.unlink()
    samples.sort()
    return {"p50": statistics.median(samples), "p99": samples[int(len(samples) * 0.99) - 1], "mean": statistics.fmean(samples)}


def transport_ceiling(batch_bytes: int, in_flight: int, seconds: float, wire: bool) -> float:
    """Round trips/s of one actor calling another with a `batch_bytes` payload, `in_flight` calls
    outstanding (one per partition, as the producer keeps): over the node actors' wire or over a
    Ray actor call."""
    return adapter.echo_round_trips_per_s(batch_bytes, in_flight, seconds, wire=wire)


def fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def run_one(storage: str, n: int, seconds: float, directory: Path) -> dict:
    """A fresh cluster for one configuration: the unthrottled phase, the half-rate phase, then the
    transport ceiling for the batch size the unthrottled phase had."""
    cluster = ray_cluster(scenario(storage, n), data_root=directory, check_invariants=False)
    try:
        cluster.stop_observing()
        producer = cluster.clients.producers[0]
        parts = [("t", p) for p in range(n)]
        sat = measure(cluster, producer, parts, None, seconds)
        half = measure(cluster, producer, parts, sat["acked_per_s"] / 2, seconds)
    finally:
        cluster.close()
    batch_bytes = int(sat["records_per_batch"] * (RECORD_BYTES + 2)) or RECORD_BYTES
    round_trips = transport_ceiling(batch_bytes, n, min(seconds, 5.0), wire=True)
    ray_round_trips = transport_ceiling(batch_bytes, n, min(seconds, 5.0), wire=False)
    ceiling = round_trips * sat["records_per_batch"]
    ray_ceiling = ray_round_trips * sat["records_per_batch"]
    print(
        f"{storage:>10} {n}p  unthrottled: {fmt(sat['acked_per_s'], 0)} acked rec/s "
        f"({fmt(sat['records_per_batch'], 0)} rec/batch, p50 {fmt(sat['p50'])} p99 {fmt(sat['p99'])} p99.9 {fmt(sat['p999'])} ms, failed {sat['failed']})  "
        f"| wire ceiling {fmt(ceiling, 0)} rec/s ({fmt(round_trips, 0)} round trips/s of {batch_bytes} B), ratio {sat['acked_per_s'] / ceiling:.2f}; "
        f"Ray call ceiling {fmt(ray_ceiling, 0)} rec/s ({fmt(ray_round_trips, 0)} round trips/s)  "
        f"| at {fmt(sat['acked_per_s'] / 2, 0)} rec/s offered: {fmt(half['acked_per_s'], 0)} acked, p50 {fmt(half['p50'])} p99 {fmt(half['p99'])} p99.9 {fmt(half['p999'])} ms  "
        f"| CPU per 1,000 acked records: brokers {fmt(sat['brokers_cpu_ms_per_k'])} ms (busiest {fmt(sat['busiest_cpu_ms_per_k'])}), "
        f"producer {fmt(sat['producer_cpu_ms_per_k'])} ms, machine {fmt(sat['machine_cpu_ms_per_k'])} ms ({100 * sat['machine_busy']:.0f}% busy); "
        f"{fmt(sat['frames_per_batch'])} frames per batch among the brokers and the producer",
        flush=True,
    )
    return {"storage": storage, "partitions": n, "sat": sat, "half": half, "ceiling": ceiling, "ray_ceiling": ray_ceiling, "round_trips": round_trips, "batch_bytes": batch_bytes}


CPU_BOUND = 0.85  # the machine's busy share above which throughput goes as the inverse of CPU per record


def throughput_model(f: dict, pc: dict, n: int, added_ms: float) -> str:
    """What predicts fsync mode's unthrottled throughput against page_cache's, by what limits it:
    the machine's CPU, one actor's core (an event loop runs on one core at a time), or else the
    pipeline (one batch in flight per partition: throughput = partitions x records per batch /
    round trip, and fsync mode adds `added_ms` to the round trip: a follower's flush on the
    batch's path, and on average half of the flush in flight before it)."""
    if f["machine_busy"] > CPU_BOUND and pc["machine_busy"] > CPU_BOUND:
        return f"CPU-bound, so the machine's CPU per record predicts {pc['machine_cpu_ms_per_k'] / f['machine_cpu_ms_per_k']:.2f}x"
    if f["busiest_busy"] > 0.8 and pc["busiest_busy"] > 0.8:
        return f"bound by the busiest broker's core, whose CPU per record predicts {pc['busiest_cpu_ms_per_k'] / f['busiest_cpu_ms_per_k']:.2f}x"
    rtt_ms = 1000.0 * n * pc["records_per_batch"] / pc["acked_per_s"]
    return (f"pipeline-bound (nothing saturates), so the round trip predicts it: page_cache's {rtt_ms:.2f} ms per batch "
            f"(one in flight per partition) + {added_ms:.2f} ms predicts {rtt_ms / (rtt_ms + added_ms):.2f}x")


def print_fsync_predictions(rows: list[dict], partition_counts: list[int], fs: dict) -> None:
    """fsync mode against page_cache in one round, with what the measured fsync cost and CPU predict."""
    by = {(r["storage"], r["partitions"]): r for r in rows}
    for n in partition_counts:
        pc, fy = by.get(("page_cache", n)), by.get(("fsync", n))
        if pc is None or fy is None:
            continue
        for phase, label in (("sat", "unthrottled"), ("half", "half load")):
            f = fy[phase]
            if f["flush_mean_ms"] is None:
                continue
            # The fsync runs on each broker's worker thread (node_process.py), so it costs
            # latency, not event-loop time: an acks=all batch waits for a follower's flush before
            # its confirming fetch leaves (the leader's own flush runs meanwhile), and a flush
            # waits on average half a flush for the one in flight. Throughput is unchanged until
            # an fsync thread is busy all the time.
            added = 1.5 * f["flush_mean_ms"]
            predicted_ratio = min(1.0, 1.0 / f["fsync_busy"]) if f["fsync_busy"] else 1.0
            # Unthrottled, the throughputs compare; at half load each mode is offered half of its
            # own ceiling, so only the latencies compare.
            versus = (
                f"throughput {f['acked_per_s'] / pc[phase]['acked_per_s']:.2f}x page_cache's (predicted {predicted_ratio:.2f}x: fsync threads busy {100 * f['fsync_busy']:.0f}%); "
                if phase == "sat"
                else ""
            )
            cpu = (
                f"CPU per 1,000 acked records: brokers {f['brokers_cpu_ms_per_k']:.1f} vs {pc[phase]['brokers_cpu_ms_per_k']:.1f} ms, "
                f"producer {f['producer_cpu_ms_per_k']:.1f} vs {pc[phase]['producer_cpu_ms_per_k']:.1f} ms, "
                f"machine {f['machine_cpu_ms_per_k']:.1f} vs {pc[phase]['machine_cpu_ms_per_k']:.1f} ms "
                f"(machine busy {100 * f['machine_busy']:.0f}% vs {100 * pc[phase]['machine_busy']:.0f}%)"
            )
            cpu += (
                f"; of the brokers' CPU, the kernel's {f['brokers_sys_ms_per_k']:.1f} vs {pc[phase]['brokers_sys_ms_per_k']:.1f} ms; "
                f"busiest broker {100 * f['busiest_busy']:.0f}% vs {100 * pc[phase]['busiest_busy']:.0f}% busy, "
                f"{f['busiest_cpu_ms_per_k']:.1f} vs {pc[phase]['busiest_cpu_ms_per_k']:.1f} ms per 1,000 records"
            )
            if phase == "sat":
                cpu += "; " + throughput_model(f, pc[phase], n, added)
            if phase == "sat":
                # Unthrottled, the producer keeps BUFFER_RECORDS outstanding, so the mean latency is
                # that over the throughput (Little's law): a lower throughput means a longer wait.
                little = 1000.0 * BUFFER_RECORDS * (1.0 / f["acked_per_s"] - 1.0 / pc[phase]["acked_per_s"])
                cpu += f"; at saturation Little's law ({BUFFER_RECORDS:,} records outstanding) predicts +{little:.2f} ms of latency from the throughputs"
            print(
                f"{n}p {label}: fsync mode's brokers flushed {f['files_per_flush']:.1f} files per flush, {f['fsync_mean_ms']:.2f} ms per file "
                f"(probe: {fs['mean']:.2f} ms idle), {f['flush_mean_ms']:.2f} ms per flush; "
                f"{versus}p50 {fmt(f['p50'])} vs {fmt(pc[phase]['p50'])} ms: +{(f['p50'] or 0) - (pc[phase]['p50'] or 0):.2f} ms (predicted +{added:.2f} ms)\n    {cpu}"
            )


def _spread(values: list[float], digits: int = 0) -> str:
    """mean ± sample standard deviation (min-max)."""
    if len(values) < 2:
        return fmt(values[0] if values else None, digits)
    return f"{fmt(statistics.fmean(values), digits)} ± {fmt(statistics.stdev(values), digits)} ({fmt(min(values), digits)}-{fmt(max(values), digits)})"


def _known(values) -> list[float]:
    return [v for v in values if v is not None]


def print_spread(rounds: list[list[dict]], partition_counts: list[int]) -> None:
    """Every round's figures together: the run-to-run spread of each, and of fsync's throughput
    ratio to page_cache within a round."""
    print(f"over {len(rounds)} rounds (mean ± sd (min-max)):")
    keys = sorted({(r["storage"], r["partitions"]) for rows in rounds for r in rows}, key=lambda k: (k[1], k[0]))
    for key in keys:
        runs = [r for rows in rounds for r in rows if (r["storage"], r["partitions"]) == key]
        sat = [r["sat"] for r in runs]
        print(
            f"{key[0]:>10} {key[1]}p  unthrottled {_spread([x['acked_per_s'] for x in sat])} rec/s, "
            f"p50 {_spread(_known(x['p50'] for x in sat), 1)} ms, p99 {_spread(_known(x['p99'] for x in sat), 1)} ms, "
            f"brokers' CPU per 1,000 records {_spread(_known(x['brokers_cpu_ms_per_k'] for x in sat), 1)} ms; "
            f"half load p50 {_spread(_known(r['half']['p50'] for r in runs), 1)} ms"
        )
    for n in partition_counts:
        ratios = []
        for rows in rounds:
            by = {(r["storage"], r["partitions"]): r for r in rows}
            if ("fsync", n) in by and ("page_cache", n) in by:
                ratios.append(by[("fsync", n)]["sat"]["acked_per_s"] / by[("page_cache", n)]["sat"]["acked_per_s"])
        if ratios:
            print(f"{n}p fsync / page_cache unthrottled throughput, same round: {_spread(ratios, 2)}")


def main() -> None:
    global BUFFER_RECORDS, BATCH_SIZE, LINGER_MS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per phase (after a 3 s warm-up)")
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--storage", nargs="+", default=["page_cache", "fsync"], choices=["page_cache", "fsync", "process_buffer"])
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every configuration; from 2, each figure's spread is printed")
    ap.add_argument("--buffer-records", type=int, default=BUFFER_RECORDS,
                    help="unthrottled load: records waiting or in flight at most (the producer's buffer)")
    ap.add_argument("--batch-size", type=int, default=None, help="the producer's batch.size in bytes (default: 1,000 records a batch)")
    ap.add_argument("--linger-ms", type=float, default=LINGER_MS, help="the producer's linger.ms")
    ap.add_argument("--address", default=None, help="a Ray cluster to run on (e.g. a testbed's, from its head: auto); default: an embedded local Ray")
    args = ap.parse_args()
    BUFFER_RECORDS, BATCH_SIZE, LINGER_MS = args.buffer_records, args.batch_size, args.linger_ms

    adapter.connect(args.address)
    data_root = Path(tempfile.mkdtemp(prefix="kraftlab-bench-"))
    batching = f"batch.size {BATCH_SIZE:,} B" if BATCH_SIZE else "batches up to 1,000 records"
    print(f"producer: {batching}, linger.ms {LINGER_MS:g}, {BUFFER_RECORDS:,} records outstanding at most unthrottled", flush=True)
    print(f"{'Ray at ' + args.address if args.address else 'local Ray'}, {len(adapter.alive_nodes())} Ray node(s), {os.cpu_count()} CPUs; RF 3, acks=all, min.insync.replicas 2, {RECORD_BYTES}-byte records; "
          f"{args.seconds:.0f} s measured per phase after {WARMUP_S:.0f} s warm-up; {args.repeat} round(s)", flush=True)
    rounds: list[list[dict]] = []
    for round_no in range(1, args.repeat + 1):
        # The modes alternate within a round, so that a drift of the machine touches both.
        rows = [run_one(storage, n, args.seconds, data_root / f"{storage}-{n}-{round_no}") for n in args.partitions for storage in args.storage]
        rounds.append(rows)
        fs = fsync_latency_ms(data_root, int(max(r["batch_bytes"] for r in rows)))
        print(f"fsync of one batch-sized append in {data_root}: p50 {fs['p50']:.2f} ms, p99 {fs['p99']:.2f} ms, mean {fs['mean']:.2f} ms")
        print_fsync_predictions(rows, args.partitions, fs)
    if args.repeat > 1:
        print_spread(rounds, args.partitions)
    adapter.shutdown()


if __name__ == "__main__":
    main()
