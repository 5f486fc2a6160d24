"""checks.json put together (docs/reference/analysis.md): per run, the anomalies, the invariants,
the verdict and the figures; for a campaign, the same over all runs, per matrix cell (`cells`),
and one row per run (`runs.parquet`, written by analyze.py).

Every figure is computed by Spark for all runs at once (grouped by `run`); the driver only puts
together the per-run rows, which are small (one per run)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .anomalies import EXAMPLES, NAMES, NOT_CHECKED, Anomaly, HistoryViews, find_anomalies
from .completeness import Census, take_census
from .invariants import merged, recheck_invariants, summary_violations
from .loading import Dataset, History


@contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started


COUNTS = ("events", "sent", "acked", "failed", "indeterminate", "consumed")
LATENCY_METHOD = "exact (Spark percentile, linear interpolation)"


@dataclass
class RunResult:
    """One run's verdict and figures (a row of runs.parquet, and a single run's checks.json)."""

    run: str
    valid: bool | str
    reasons: list[str]
    anomalies: dict[str, int]
    invariants: dict[str, dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)


def _latency(df: DataFrame, keys: list[str]) -> DataFrame:
    return (df.where(F.col("outcome") == "ok").groupBy(*keys)
            .agg(F.count("latency_ms").alias("count"),
                 F.expr("percentile(latency_ms, array(0.5, 0.99, 0.999))").alias("p"),
                 F.max("latency_ms").alias("max")))


def _latency_json(row) -> dict[str, Any]:
    """The figures of `_latency`'s row; with no record acknowledged ok, `count` 0 and null
    percentiles (as summary.json's `produce_latency_ms`): the key is always there."""
    if row is None or not row["count"]:
        return {"count": 0, "p50": None, "p99": None, "p999": None, "max": None, "method": LATENCY_METHOD}
    p50, p99, p999 = row["p"]
    return {"count": row["count"], "p50": p50, "p99": p99, "p999": p999, "max": row["max"], "method": LATENCY_METHOD}


def run_stats(census: Census, views: HistoryViews, record_stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run: the counts (`census`), the final read's size and the lost writes by acks setting
    (`record_stats`, anomalies.record_anomalies), the exact produce latency percentiles over every
    record acknowledged ok (the run summary's are an HdrHistogram's, within 1%)."""
    stats = {run: {name: counts[name] for name in COUNTS} for run, counts in census.counts.items()}
    for run, s in stats.items():
        s.update(record_stats.get(run, {"final_read": 0, "lost_by_acks": {}}))
    for r in _latency(views.acks, ["run"]).collect():
        if r["run"] in stats:
            stats[r["run"]]["latency_ms"] = _latency_json(r)
    for s in stats.values():
        s.setdefault("latency_ms", _latency_json(None))
    return stats


def overall_latency(views: HistoryViews) -> dict[str, Any]:
    """Every run's acknowledgements together (a campaign's figure; one run: the run's)."""
    return _latency_json(_latency(views.acks, []).first())


def _verdict(reasons: list[str], anomalies: dict[str, int], invariants: dict[str, Any]) -> bool | str:
    # An incomplete history decides nothing either way: with no final read every acknowledged
    # record would look lost, so "unknown" wins over what the anomalies say.
    if reasons:
        return "unknown"
    return not any(anomalies.values()) and not invariants


def compute_run_results(history: History, dataset: Dataset, timings: dict[str, float] | None = None
                        ) -> tuple[dict[str, RunResult], dict[str, Anomaly], dict[str, Any], Census]:
    """Every run's result, the anomalies over all runs (with examples), what decided `unseen` per
    run, and the census (completeness.py). `timings`: seconds spent per phase are added to it."""
    timings = timings if timings is not None else {}
    views = history.views
    with timed(timings, "census_s"):
        census = take_census(history.rows, history.control)
        reasons = census.reasons
    with timed(timings, "anomalies_s"):
        anomalies, unseen_rule, record_stats = find_anomalies(history.control, views, list(dataset.runs))
    with timed(timings, "invariants_s"):
        spark_found = recheck_invariants(history.control, history.rows)
    with timed(timings, "stats_s"):
        stats = run_stats(census, views, record_stats)
    results: dict[str, RunResult] = {}
    for run, run_dir in dataset.runs.items():
        online, source = summary_violations(run_dir)
        invariants = merged(spark_found.get(run, {}), online)
        counts = {name: anomalies[name].per_run.get(run, 0) for name in NAMES}
        run_stats_ = stats.get(run, {name: 0 for name in COUNTS})
        checked, why = unseen_rule.get(run, (False, NOT_CHECKED))
        run_stats_["unseen_checked"] = {"checked": checked, "reason": why}
        run_stats_["invariants_source"] = f"spark (re-checked: the history) and {source} (online)"
        results[run] = RunResult(run, _verdict(reasons.get(run, []), counts, invariants), reasons.get(run, []),
                                 counts, invariants, run_stats_)
    return results, anomalies, unseen_rule, census


def run_checks(result: RunResult, anomalies: dict[str, Anomaly], engine: str) -> dict[str, Any]:
    """checks.json of a single run directory (the contract's shape)."""
    checks: dict[str, Any] = {"valid": result.valid}
    if result.reasons:
        checks["reason"] = "; ".join(result.reasons)
    checks.update({
        "engine": engine,
        "runs": 1,
        "events": result.stats["events"],
        "anomalies": {name: {"count": a.count, "examples": [_without_run(e) for e in a.examples]} for name, a in anomalies.items()},
        "invariants": result.invariants,
        "stats": result.stats,
    })
    return checks


def _without_run(example: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in example.items() if k != "run"}


def campaign_checks(dataset: Dataset, results: dict[str, RunResult], anomalies: dict[str, Anomaly],
                    latency: dict[str, Any] | None, engine: str) -> dict[str, Any]:
    """checks.json of a campaign directory: the verdict over every run (false when one run is
    invalid; else "unknown" when one is unknown or missing; else true), the anomalies and
    invariants with the number of runs showing each, totals, and one entry per matrix cell."""
    rs = list(results.values())
    invalid = [r for r in rs if r.valid is False]
    unknown = [r for r in rs if r.valid == "unknown"]
    valid: bool | str = False if invalid else ("unknown" if unknown or dataset.missing else True)
    checks: dict[str, Any] = {"valid": valid}
    if valid == "unknown":
        why = []
        if unknown:
            why.append(f"{len(unknown)} runs with an incomplete history (first: {unknown[0].run}: {unknown[0].reasons[0]})")
        if dataset.missing:
            first = next(iter(dataset.missing.items()))
            why.append(f"{len(dataset.missing)} runs missing or unreadable (first: {first[1]})")
        checks["reason"] = "; ".join(why)
    invariants: dict[str, dict[str, Any]] = {}
    for r in rs:
        for name, entry in r.invariants.items():
            agg = invariants.setdefault(name, {"count": 0, "runs": 0, "examples": [], "source": entry["source"]})
            agg["count"] += entry["count"]
            agg["runs"] += 1
            if agg["source"] != entry["source"]:
                agg["source"] = "both"  # found by Spark in some runs, by the online checker in others
            for e in entry["examples"]:
                if len(agg["examples"]) < EXAMPLES:
                    agg["examples"].append({"run": r.run, **e})
    totals = {name: sum(r.stats.get(name, 0) for r in rs) for name in COUNTS}
    durations = sum(r.stats.get("duration_s", 0.0) for r in rs)
    checks.update({
        "engine": engine,
        "runs": len(rs),
        "events": totals["events"],
        "anomalies": {name: {"count": a.count, "runs": len(a.per_run), "examples": a.examples} for name, a in anomalies.items()},
        "invariants": dict(sorted(invariants.items())),
        "stats": {
            **totals,
            "runs_valid": sum(1 for r in rs if r.valid is True), "runs_invalid": len(invalid), "runs_unknown": len(unknown),
            "runs_missing": len(dataset.missing),
            # Runs that found nothing, whose histories `--keep-runs failures` removed: the figures
            # here leave them out (their own are in results.parquet).
            "runs_not_kept": len(dataset.not_kept),
            "throughput_rec_s": totals["acked"] / durations if durations > 0 else None,
            "latency_ms": latency,
            "offline_s": sum(r.stats.get("offline_s", 0) for r in rs),
            "unavailable_s": sum(r.stats.get("unavailable_s", 0) for r in rs),
        },
        "cells": cells(dataset, rs),
    })
    if dataset.missing:
        checks["missing_runs"] = dict(list(dataset.missing.items())[:20])
    return checks


def cells(dataset: Dataset, rs: list[RunResult]) -> list[dict[str, Any]]:
    """One entry per matrix cell (runs without a results.parquet row form the cell {}): runs,
    verdict counts, the runs showing each anomaly and invariant, acknowledged records, throughput
    (acked / seconds of run time, over the cell's runs) and the worst run's latency figures."""
    by_cell: dict[str, tuple[dict[str, Any], list[RunResult]]] = {}
    for r in rs:
        cell = dataset.cells.get(r.run, {})
        key = repr(sorted(cell.items()))
        by_cell.setdefault(key, (cell, []))[1].append(r)
    out = []
    for _, (cell, members) in sorted(by_cell.items()):
        seconds = sum(r.stats.get("duration_s", 0.0) for r in members)
        acked = sum(r.stats.get("acked", 0) for r in members)
        invariant_names = sorted({n for r in members for n in r.invariants})
        latencies = [r.stats["latency_ms"] for r in members if (r.stats.get("latency_ms") or {}).get("count")]
        out.append({
            "cell": cell,
            "runs": len(members),
            "valid": sum(1 for r in members if r.valid is True),
            "invalid": sum(1 for r in members if r.valid is False),
            "unknown": sum(1 for r in members if r.valid == "unknown"),
            "anomalies": {n: sum(1 for r in members if r.anomalies.get(n)) for n in NAMES},
            "invariants": {n: sum(1 for r in members if n in r.invariants) for n in invariant_names},
            "acked": acked,
            "lost_writes": sum(r.anomalies.get("lost-write", 0) for r in members),
            "throughput_rec_s": acked / seconds if seconds > 0 else None,
            # Percentiles of different runs do not combine; the cell shows its worst run's.
            "latency_ms": ({q: max(lat[q] for lat in latencies) for q in ("p50", "p99", "p999", "max")} if latencies else None),
        })
    return out


def run_rows(dataset: Dataset, results: dict[str, RunResult]) -> list[dict[str, Any]]:
    """runs.parquet's rows: one per run, with its seed and matrix cell (campaigns)."""
    rows = []
    for run, r in results.items():
        latency = r.stats.get("latency_ms") or {}
        row: dict[str, Any] = {"run": run, "seed": dataset.seeds.get(run)}
        row.update({k: dataset.cells.get(run, {}).get(k) for k in dataset.matrix_keys})
        row.update({
            "valid": str(r.valid).lower(),
            "reason": "; ".join(r.reasons) or None,
            **{name: r.anomalies[name] for name in NAMES},
            "invariants": sorted(r.invariants),
            "spark_invariants": sorted(n for n, inv in r.invariants.items() if inv["source"] != "online"),
            **{name: r.stats.get(name, 0) for name in COUNTS},
            "lost_acks_all": r.stats.get("lost_by_acks", {}).get("all", 0),
            "throughput_rec_s": r.stats.get("throughput_rec_s"),
            "latency_p50_ms": latency.get("p50"), "latency_p99_ms": latency.get("p99"),
            "latency_p999_ms": latency.get("p999"), "latency_max_ms": latency.get("max"),
            "offline_s": r.stats.get("offline_s"), "unavailable_s": r.stats.get("unavailable_s"),
        })
        rows.append(row)
    return rows
