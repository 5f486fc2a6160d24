"""checks.json put together (contract.md, "`analysis/`"): the anomalies, the invariants, the
verdict and the figures computed here. The figures drawn from the per-second windows
(`throughput_rec_s`, `offline_s`, `unavailable_s`) are added by analyze.py from windows.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .anomalies import HistoryViews, find_anomalies, lost_writes
from .completeness import incomplete_reasons
from .invariants import summary_violations


def _stats(history: DataFrame, views: HistoryViews) -> dict[str, Any]:
    k = F.col("kind")
    row = history.agg(
        F.count(F.lit(1)).alias("events"),
        F.sum((k == "produce_send").cast("long")).alias("sent"),
        F.sum(((k == "produce_ack") & (F.col("outcome") == "ok")).cast("long")).alias("acked"),
        F.sum(((k == "produce_ack") & (F.col("outcome") == "fail")).cast("long")).alias("failed"),
        # Jepsen's indeterminate operations: an attempt may have been appended; neither lost nor required.
        F.sum(((k == "produce_ack") & (F.col("outcome") == "info")).cast("long")).alias("indeterminate"),
        F.sum((k == "consume").cast("long")).alias("consumed"),
    ).first().asDict()
    stats = {name: int(row[name] or 0) for name in ("events", "sent", "acked", "failed", "indeterminate", "consumed")}
    stats["final_read"] = views.final.select("producer", "sequence").distinct().count()
    stats["lost_by_acks"] = {r["acks"]: r["n"] for r in lost_writes(views).groupBy("acks")
                             .agg(F.count(F.lit(1)).alias("n")).orderBy("acks").collect()}
    # Exact percentiles (Spark's `percentile`: linear interpolation between the closest ranks),
    # over every record acknowledged ok; the run summary's are an HdrHistogram's, within 1%.
    lat = (views.acks.where(F.col("outcome") == "ok")
           .agg(F.count("latency_ms").alias("count"),
                F.expr("percentile(latency_ms, array(0.5, 0.99, 0.999))").alias("p"),
                F.max("latency_ms").alias("max")).first())
    if lat["count"]:
        p50, p99, p999 = lat["p"]
        stats["latency_ms"] = {"count": lat["count"], "p50": p50, "p99": p99, "p999": p999, "max": lat["max"],
                               "method": "exact (Spark percentile, linear interpolation)"}
    return stats


def compute_checks(history: DataFrame, run_dir: Path, engine: str) -> dict[str, Any]:
    """checks.json's content for one run's history."""
    views = HistoryViews.of(history)
    anomalies, unseen_rule = find_anomalies(history, views)
    invariants, invariants_source = summary_violations(run_dir)
    reasons = incomplete_reasons(history)
    stats = _stats(history, views)
    stats["unseen_checked"] = unseen_rule
    stats["invariants_source"] = invariants_source
    # An incomplete history decides nothing either way: with no final read every acknowledged
    # record would look lost, so "unknown" wins over what the anomalies say.
    if reasons:
        valid: bool | str = "unknown"
    else:
        valid = not any(a.count for a in anomalies.values()) and not invariants
    checks: dict[str, Any] = {"valid": valid}
    if reasons:
        checks["reason"] = "; ".join(reasons)
    checks.update({
        "engine": engine,
        "runs": 1,
        "events": stats["events"],
        "anomalies": {name: a.as_json() for name, a in anomalies.items()},
        "invariants": invariants,
        "stats": stats,
    })
    return checks
