"""One run directory analyzed end to end: input checked, Spark started, checks.json written."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .checks import compute_checks
from .loading import event_files, load_history
from .output import write_json_atomically
from .report import write_report
from .session import start_local
from .windows import compute_windows, window_stats, write_parquet_atomically


def analyze_run(run_dir: Path, out_dir: Path | None = None, engine: str = "local",
                spark=None) -> tuple[dict[str, Any], dict[str, float]]:
    """Write `out_dir/checks.json` and `out_dir/windows.parquet` (default RUN_DIR/analysis) and
    return checks.json's content with timings (s).
    `spark`: a session to use (tests share one); otherwise one is started and stopped here."""
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "analysis"
    event_files(run_dir)  # bad input fails before Spark starts or anything is written
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
        history = load_history(spark, run_dir)
        checks = compute_checks(history, run_dir, engine)
        windows, duration_s = compute_windows(history, run_dir)
        checks["stats"].update(window_stats(windows, duration_s))
        history.unpersist()
    finally:
        if own:
            spark.stop()
    write_parquet_atomically(out_dir / "windows.parquet", windows)
    write_json_atomically(out_dir / "checks.json", checks)
    report_started = time.perf_counter()
    write_report(out_dir, run_dir)  # report.html and its PNGs, from the two files just written
    timings["report_s"] = time.perf_counter() - report_started
    timings["total_s"] = time.perf_counter() - started
    return checks, timings
