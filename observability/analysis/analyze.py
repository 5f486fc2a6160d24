"""One run directory, or a campaign directory as one dataset, analyzed end to end: input checked,
Spark started (or given), checks.json, windows.parquet (and, for a campaign, runs.parquet)
written."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .checks import campaign_checks, compute_run_results, overall_latency, run_checks, run_rows, timed
from .loading import discover, load_history, unreadable_files_named
from .output import write_json_atomically, write_table_atomically
from .partitions import SCHEMA as PARTITIONS
from .partitions import partition_figures
from .report import write_report
from .session import start_local
from .windows import compute_windows, window_stats, write_dataframe, write_windows


def analyze_run(run_dir: Path, out_dir: Path | None = None, engine: str = "local",
                spark=None) -> tuple[dict[str, Any], dict[str, float]]:
    """Write `out_dir/checks.json`, `windows.parquet`, `partitions.parquet`, `report.html` with its
    PNGs (default out_dir: DIR/analysis), and for a campaign `runs.parquet`, for a run or a
    campaign directory, and return checks.json's content with timings (s).
    `spark`: a session to use (tests share one); otherwise one is started and stopped here."""
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "analysis"
    dataset = discover(run_dir)  # bad input fails before Spark starts or anything is written
    timings: dict[str, float] = {}
    started = time.perf_counter()
    own = spark is None
    if own:
        # Only the local engine starts here; a RayDP session comes in as `spark` (kraftlab/spark_on_ray.py).
        if engine != "local":
            raise ValueError(f"engine {engine!r}: pass its Spark session as `spark`")
        spark = start_local(out_dir)
    timings["spark_start_s"] = time.perf_counter() - started
    try:
        with unreadable_files_named(dataset):
            with timed(timings, "load_s"):
                history = load_history(spark, dataset)
            results, anomalies, _, census = compute_run_results(history, dataset, timings)
            with timed(timings, "windows_s"):
                windows, partition_states, durations = compute_windows(history, dataset.runs, census.last_ms)
                for run, figures in window_stats(windows, durations).items():
                    results[run].stats.update(figures)
                    results[run].stats["duration_s"] = durations[run]
            if dataset.campaign:
                latency = overall_latency(history.views)
                checks = campaign_checks(dataset, results, anomalies, latency, engine)
            else:
                checks = run_checks(next(iter(results.values())), anomalies, engine)
            with timed(timings, "write_s"):
                write_windows(out_dir / "windows.parquet", windows)
            with timed(timings, "partitions_s"):
                write_dataframe(out_dir / "partitions.parquet", partition_figures(history, partition_states, durations), PARTITIONS)
            windows.unpersist()
            partition_states.unpersist()
            history.unpersist()
    finally:
        if own:
            spark.stop()
    if dataset.campaign:
        write_table_atomically(out_dir / "runs.parquet", run_rows(dataset, results))
    write_json_atomically(out_dir / "checks.json", checks)
    report_started = time.perf_counter()
    # report.html and its PNGs, from the files just written (and a single run's partition states)
    write_report(out_dir, None if dataset.campaign else run_dir)
    timings["report_s"] = time.perf_counter() - report_started
    timings["total_s"] = time.perf_counter() - started
    return checks, timings

