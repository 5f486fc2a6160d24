"""One run's row of `results.parquet` (docs/reference/campaign-format.md), from its summary.

A run's findings are what broke, by name: the invariants the online checker saw violated
(summary.json `violations`), the contract's history anomalies found in the run's own history
(`lost-write`, `duplicate`, `uncommitted-read`, `nonmonotonic-poll`...: observability/history_anomalies.py,
the Spark analysis's rules counted in plain Python, so that each run costs only itself; `lost-write`
is the documented one, "acknowledged ok, absent from the final read", whatever the record's `acks`, and
also found when the summary's `acked_lost` counts acks=all records missing from the log now),
`liveness` when the cluster did not serve again within the bound after the faults healed (a
failed epilogue step, workloads/campaign/generate.py), and `expect` when one of the base
scenario's own steps failed. `kraftlab analyze CAMPAIGN_DIR` gives the same anomalies with
examples: `lost-write` covers records of every `acks`, so a cell that loses acks=1 records, which
Kafka allows, is not `clean`, as `analyze` would say.

What Kafka's clients are promised may happen is excused when the campaign says so (its `allow`): a
lost acks=1 (or 0) record that no consumer read (`acks-1-loss`), and a duplicate written by a load
producer without idempotence, a retried batch (`retry-duplicate`). Without it, both are findings,
as the contract defines the anomalies.

Findings the protocol allows are kept apart (`excused`), as the simulator's sweeps keep them: on a
partition that went beyond the protocol's tolerance (MinISR lossy unclean shutdowns of its leader
candidates: the history's `beyond_tolerance` rows), the violations protocol-facts.md allows there
(observability/checks/invariants.py, BEYOND_TOLERANCE_ALLOWED), and a lost write in a run with
such a partition (the summary counts lost records per run, not per partition, so a run with a
partition beyond tolerance has its lost writes excused: a known coarseness).

The `signature` groups runs that fail the same way: the sorted findings, joined by `+` ("what
broke, not when": no time, offset or node in it). A run that raised has status `error`, signature
`error-<ExceptionType>` and its traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from observability.checks.invariants import excused_beyond_tolerance
from observability.history import read_kinds
from observability.history_anomalies import count_with_allowed
from workloads.campaign.generate import RunPlan
from workloads.campaign.spec import EXPECT, LIVENESS


@dataclass(frozen=True)
class HistoryFindings:
    """What a run's own history says beyond its summary: the partitions ("t-0") that went beyond
    the protocol's tolerance, the history anomalies found (name -> count), and how many of each
    are what Kafka's clients are promised may happen (observability/history_anomalies.py: a lost
    acks=1 record nobody read, a duplicate of a producer without idempotence)."""

    beyond: frozenset[str] = frozenset()
    anomalies: tuple[tuple[str, int], ...] = ()
    allowed: tuple[tuple[str, int], ...] = ()


def read_history_findings(run_dir: Path) -> HistoryFindings:
    events = run_dir / "events"
    beyond = frozenset(f"{r['topic']}-{r['partition']}" for r in read_kinds(events, ("beyond_tolerance",), ("topic", "partition")))
    counts, allowed = count_with_allowed(events)
    return HistoryFindings(beyond, tuple((name, n) for name, n in counts.items() if n),
                           tuple((name, n) for name, n in allowed.items() if n))


def findings(summary: dict[str, Any], epilogue_start: int, history: HistoryFindings = HistoryFindings(),
             allow: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(findings, excused): names, sorted. `allow`: the anomaly names the campaign excuses when
    every instance of it in the history is one Kafka allows (its `allow` key)."""
    names: set[str] = set()
    excused: set[str] = set()
    beyond = history.beyond
    for v in summary.get("violations", []) + summary.get("epilogue_violations", []):
        (excused if excused_beyond_tolerance(v["invariant"], v.get("detail", ""), beyond) else names).add(v["invariant"])
    # Records lost on a partition beyond tolerance are the protocol's limit, and so are the reads
    # of them (uncommitted-read...): excused for the whole run (the counts are per run).
    if (summary.get("stats") or {}).get("acked_lost"):
        (excused if beyond else names).add("lost-write")
    allowed = {name: n for name, n in history.allowed if name in allow}
    for name, count in history.anomalies:
        (excused if beyond or allowed.get(name, 0) >= count else names).add(name)
    for failure in summary.get("failures", []):
        names.add(LIVENESS if 0 <= epilogue_start <= failure["step"] else EXPECT)
    return sorted(names), sorted(excused - names)


def signature(names: list[str]) -> str:
    return "+".join(names)


def safe_name(sig: str) -> str:
    """A signature as a folder name (failures/<signature>/)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", sig)[:200] or "_"


def flat_stats(stats: dict[str, Any], prefix: str = "stats.") -> dict[str, Any]:
    """The summary's stats as columns `stats.<name>` (nested mappings by dotted path; lists, such
    as a Ray run's placement, left out). `availability`, a mapping per partition, is summed up
    over the partitions (`availability_columns`): a column per partition made a row of a
    1,000-partition run 3,000 columns and 142 KB of the results log."""
    out: dict[str, Any] = {}
    for key, value in stats.items():
        if key == "availability" and prefix == "stats." and isinstance(value, dict):
            out |= availability_columns(value, f"{prefix}{key}.")
        elif isinstance(value, dict):
            out |= flat_stats(value, f"{prefix}{key}.")
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def availability_columns(per_partition: dict[str, dict[str, float]], prefix: str) -> dict[str, Any]:
    """A run's availability whatever its number of partitions: for each figure (`offline_ms`,
    `under_min_isr_ms`, `unavailable_ms`), the worst partition's (`max_offline_ms`...) and how many
    partitions had any (`partitions_offline`...)."""
    out: dict[str, Any] = {}
    names = sorted({name for partition in per_partition.values() for name in partition})
    for name in names:
        values = [partition.get(name) or 0.0 for partition in per_partition.values()]
        out[f"{prefix}max_{name}"] = max(values)
        out[f"{prefix}partitions_{name.removesuffix('_ms')}"] = sum(1 for v in values if v > 0)
    return out


def row_from_summary(plan: RunPlan, summary: dict[str, Any], replay: str, history: HistoryFindings = HistoryFindings()) -> dict[str, Any]:
    names, excused = findings(summary, plan.epilogue_start, history, plan.allow)
    return {
        "run": plan.run,
        "seed": plan.seed,
        "cell": plan.cell,
        **plan.columns,
        "status": "violation" if names else "ok",
        "violations": names,
        "signature": signature(names),
        "replay": replay,
        "excused": excused,
        "beyond_tolerance": sorted(history.beyond),
        "faults": plan.faults,
        "first_violation_ms": min((v["at_ms"] for v in summary.get("violations", []) + summary.get("epilogue_violations", [])), default=None),
        **flat_stats(summary.get("stats") or {}),
    }


def error_row(plan: RunPlan, exc_type: str, tb: str, replay: str) -> dict[str, Any]:
    return {
        "run": plan.run,
        "seed": plan.seed,
        "cell": plan.cell,
        **plan.columns,
        "status": "error",
        "violations": [],
        "signature": f"error-{exc_type}",
        "replay": replay,
        "faults": plan.faults,
        "traceback": tb,
    }
