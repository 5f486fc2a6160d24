"""One run's row of `results.parquet` (contract.md, "Campaign file"), from its summary.

A run's findings are what broke, by name: the invariants the online checker saw violated
(summary.json `violations`), the anomaly `lost-write` when acknowledged acks=all records are missing
from the final read (`acked_lost`), `liveness` when the cluster did not serve again within the
bound after the faults healed (a failed epilogue step, workloads/campaign/generate.py), and
`expect` when one of the base scenario's own steps failed. The full Jepsen-style anomalies of the
history are `kraftlab analyze CAMPAIGN_DIR`'s to find (Spark); a campaign's verdicts are the
online ones, so that each run costs only itself.

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
from pathlib import Path
from typing import Any

from observability.checks.invariants import excused_beyond_tolerance
from observability.history import read_kinds
from workloads.campaign.generate import RunPlan
from workloads.campaign.spec import LIVENESS

EXPECT = "expect"


def findings(summary: dict[str, Any], epilogue_start: int, beyond: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(findings, excused): names, sorted. `beyond`: the partitions ("t-0") beyond tolerance."""
    names: set[str] = set()
    excused: set[str] = set()
    for v in summary.get("violations", []):
        (excused if excused_beyond_tolerance(v["invariant"], v.get("detail", ""), beyond) else names).add(v["invariant"])
    if (summary.get("stats") or {}).get("acked_lost"):
        (excused if beyond else names).add("lost-write")
    for failure in summary.get("failures", []):
        names.add(LIVENESS if 0 <= epilogue_start <= failure["step"] else EXPECT)
    return sorted(names), sorted(excused - names)


def beyond_tolerance(run_dir: Path) -> set[str]:
    """The partitions of a run that went beyond the protocol's tolerance (its history says so)."""
    return {f"{r['topic']}-{r['partition']}" for r in read_kinds(run_dir / "events", ("beyond_tolerance",), ("topic", "partition"))}


def signature(names: list[str]) -> str:
    return "+".join(names)


def safe_name(sig: str) -> str:
    """A signature as a folder name (failures/<signature>/)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", sig)[:200] or "_"


def flat_stats(stats: dict[str, Any], prefix: str = "stats.") -> dict[str, Any]:
    """The summary's stats as columns `stats.<name>` (nested mappings by dotted path; lists, such
    as a Ray run's placement, left out)."""
    out: dict[str, Any] = {}
    for key, value in stats.items():
        if isinstance(value, dict):
            out |= flat_stats(value, f"{prefix}{key}.")
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def row_from_summary(plan: RunPlan, summary: dict[str, Any], replay: str, beyond: set[str] = frozenset()) -> dict[str, Any]:
    names, excused = findings(summary, plan.epilogue_start, beyond)
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
        "beyond_tolerance": sorted(beyond),
        "faults": plan.faults,
        "first_violation_ms": min((v["at_ms"] for v in summary.get("violations", [])), default=None),
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
