"""How `kraftlab analyze` scales with the history's size: events per second end to end, Spark's
start apart, and the peak memory of the driver, per engine.

The histories are made from one real simulated run (the library's
`last-replica-standing-load-no-elr`: a load with acks=all, a consumer, a final read, and acknowledged
records lost without ELR), copied side by side until the wanted size: copy i renames every node,
producer, consumer and topic with a suffix `~i`, so that each copy is an independent run of the
same cluster in one history (its own record identities, its own `node_seq` numbering). The
expected anomaly counts are then the base run's times the number of copies, which the benchmark
checks, so that a fast wrong answer cannot pass for a result.

Printed per size and engine: events, copies, Spark start (s), total (s, from the command's start to
`checks.json`, as issue 13 defines the rate; the time it is renamed into place), events/s over the
total, the whole command (s: the report's plots and Ray's and Spark's shutdown after checks.json), the driver's peak memory (the Python process) and its
JVMs (local engine: the child JVM, which also runs the executor; raydp: Spark's driver JVM and
RayDP's application master), apart from the executors' JVMs (raydp: Ray actors, under the embedded
Ray's raylet, which is the driver's child too), and whether the counts were as expected. Targets (issue 13): 10M events in under
60 s with raydp; driver memory under 2 GB whatever the size.

    python bench/analyze_scale.py [--events 1000000 10000000] [--engines local raydp]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kraftlab.runner import run_scenario
from workloads.scenario.loading import library_scenarios, load_scenario

BASE_SCENARIO = "last-replica-standing-load-no-elr"
RENAMED = ("node", "producer", "consumer", "topic")
POLL_S = 0.2


def base_run(tmp: Path) -> Path:
    scenario, _ = load_scenario(str(library_scenarios()[BASE_SCENARIO]))
    out = tmp / "base"
    run_scenario(scenario, source=BASE_SCENARIO, out_dir=out)
    return out


def copied_history(base: Path, copies: int, out: Path) -> int:
    """`copies` renamed copies of the base run's history in `out/events` (one file per copy);
    returns the number of rows."""
    table = ds.dataset(base / "events", format="parquet").to_table()
    (out / "events").mkdir(parents=True)
    shutil.copy(base / "summary.json", out / "summary.json")
    shutil.copy(base / "scenario.yaml", out / "scenario.yaml")
    for i in range(copies):
        suffix = pa.scalar(f"~{i}")
        columns = {
            name: (pc.binary_join_element_wise(table[name], suffix, "") if name in RENAMED else table[name])
            for name in table.column_names
        }
        pq.write_table(pa.table(columns, schema=table.schema), out / "events" / f"copy-{i:05d}.parquet")
    return table.num_rows * copies


def _under_raylet(process: psutil.Process) -> bool:
    return any(p.name() == "raylet" for p in process.parents())


def run_analyze(run: Path, engine: str, out: Path) -> dict:
    """`kraftlab analyze` in its own process, its process tree's memory sampled meanwhile."""
    cmd = [sys.executable, "-m", "kraftlab.cli", "analyze", str(run), "--engine", engine, "--out", str(out)]
    if (out / "checks.json").exists():
        (out / "checks.json").unlink()  # its time of writing is the measure
    start = time.perf_counter()
    start_wall = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    driver = psutil.Process(proc.pid)
    peak_driver = peak_jvm = peak_executors = 0
    while proc.poll() is None:
        try:
            peak_driver = max(peak_driver, driver.memory_info().rss)
            jvms = [c for c in driver.children(recursive=True) if "java" in c.name()]
            # An embedded Ray's raylet is the driver's child, and RayDP's executors (Ray actors) its
            # workers: they are the cluster's JVMs, not the driver's.
            executors = [j for j in jvms if _under_raylet(j)]
            peak_jvm = max(peak_jvm, sum(c.memory_info().rss for c in jvms if c not in executors))
            peak_executors = max(peak_executors, sum(c.memory_info().rss for c in executors))
        except psutil.Error:
            pass
        time.sleep(POLL_S)
    stdout, stderr = proc.communicate()
    command = time.perf_counter() - start
    checks = out / "checks.json"
    total = checks.stat().st_mtime - start_wall if checks.exists() else math.nan
    spark = re.search(r"Spark start ([0-9.]+) s", stdout)
    return {
        "returncode": proc.returncode,
        "total_s": total,
        "command_s": command,
        "spark_start_s": float(spark.group(1)) if spark else math.nan,
        "peak_driver_mb": peak_driver / 2**20,
        "peak_jvm_mb": peak_jvm / 2**20,
        "peak_executors_mb": peak_executors / 2**20,
        "stderr": stderr.strip(),
    }


def counts(checks_path: Path) -> dict[str, int]:
    checks = json.loads(checks_path.read_text())
    return {name: a["count"] for name, a in checks["anomalies"].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--engines", nargs="+", default=["local", "raydp"], choices=["local", "raydp"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="analyze-scale-") as tmp_name:
        tmp = Path(tmp_name)
        base = base_run(tmp)
        base_rows = ds.dataset(base / "events", format="parquet").count_rows()
        reference = run_analyze(base, "local", tmp / "base-analysis")
        if not (tmp / "base-analysis" / "checks.json").exists():
            sys.exit(f"the base run's analysis failed (exit {reference['returncode']}): {reference['stderr'][-500:]}")
        expected_one = counts(tmp / "base-analysis" / "checks.json")
        print(f"base: {BASE_SCENARIO}, {base_rows:,} events, anomalies {expected_one}")
        print(f"{'events':>12} {'copies':>6} {'engine':>6} {'spark s':>8} {'total s':>8} {'events/s':>10} {'command s':>9} "
              f"{'driver MB':>9} {'JVM MB':>7} {'exec. MB':>8}  counts")
        for wanted in args.events:
            copies = max(1, round(wanted / base_rows))
            run = tmp / f"run-{copies}"
            rows = copied_history(base, copies, run)
            expected = {name: n * copies for name, n in expected_one.items()}
            for engine in args.engines:
                out = run / f"analysis-{engine}"
                r = run_analyze(run, engine, out)
                if r["returncode"] == 2 or not (out / "checks.json").exists():
                    print(f"{rows:>12,} {copies:>6} {engine:>6}  failed (exit {r['returncode']}): {r['stderr'][-300:]}", flush=True)
                    continue
                got = counts(out / "checks.json")
                verdict = "as expected" if got == expected else f"UNEXPECTED {got} (expected {expected})"
                print(f"{rows:>12,} {copies:>6} {engine:>6} {r['spark_start_s']:>8.1f} {r['total_s']:>8.1f} "
                      f"{rows / r['total_s']:>10,.0f} {r['command_s']:>9.1f} {r['peak_driver_mb']:>9,.0f} {r['peak_jvm_mb']:>7,.0f} {r['peak_executors_mb']:>8,.0f}  {verdict}", flush=True)


if __name__ == "__main__":
    main()
