"""A campaign's results per matrix cell, its failure signatures, and its `expect` block checked.

Per cell: runs, ok, violation and error runs, runs per failure signature, acknowledged records
lost, and the detection rate (runs showing any finding, among runs that finished without error)
with its Wilson score 95% interval. Wilson's interval, unlike the normal approximation, stays
within [0, 1] and is not empty at 0 or n detections, which is where campaigns live ("the switch
never caught in 200 seeds: at most 1.9%").
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workloads.campaign.generate import run_id
from workloads.campaign.spec import Campaign, Cell, ExpectRule, same_value

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (E. B. Wilson, 1927); (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


KEEP_SEEDS = 20  # the seeds a report lists per finding (summary.json); the count is always whole


@dataclass
class SeedSample:
    """The seeds of the runs showing one finding in one cell: how many, and the first KEEP_SEEDS in
    the campaign's seed order, whatever order the runs finished in (so the report of a resumed or
    parallel campaign is the same as of a sequential one)."""

    count: int = 0
    first: list[tuple[int, int]] = field(default_factory=list)  # (position in the seed list, seed), sorted

    def add(self, position: int, seed: int) -> None:
        self.count += 1
        if len(self.first) < KEEP_SEEDS or position < self.first[-1][0]:
            bisect.insort(self.first, (position, seed))
            del self.first[KEEP_SEEDS:]

    @property
    def seeds(self) -> list[int]:
        return [seed for _, seed in self.first]


@dataclass
class CellReport:
    cell: Cell
    runs: int
    ok: int = 0
    violation: int = 0
    error: int = 0
    signatures: dict[str, int] = field(default_factory=dict)  # failure signature -> runs
    findings: dict[str, SeedSample] = field(default_factory=dict)  # finding name -> the seeds showing it
    acked: int = 0
    acked_lost: int = 0
    # finding name -> the seeds where the protocol allowed it (beyond tolerance): not findings
    excused: dict[str, SeedSample] = field(default_factory=dict)

    @property
    def missing(self) -> int:
        return self.runs - self.ok - self.violation - self.error

    @property
    def detection(self) -> tuple[float, float, float]:
        """(rate, low, high): runs with a finding among those that finished without error."""
        n = self.ok + self.violation
        low, high = wilson_interval(self.violation, n)
        return (self.violation / n if n else 0.0), low, high

    def as_dict(self) -> dict[str, Any]:
        rate, low, high = self.detection
        return {
            "cell": self.cell.index, **self.cell.columns(), "label": self.cell.label(),
            "runs": self.runs, "ok": self.ok, "violation": self.violation, "error": self.error, "missing": self.missing,
            "signatures": self.signatures,
            "findings": {name: {"runs": s.count, "seeds": s.seeds} for name, s in sorted(self.findings.items())},
            "acked": self.acked, "acked_lost": self.acked_lost,
            "detection_rate": round(rate, 4), "detection_ci95": [round(low, 4), round(high, 4)],
        }


# What the minimizer reads of the failing run it starts from.
FIRST_FAILING_KEPT = ("run", "cell", "seed", "signature", "violations", "first_violation_ms", "replay")
EXAMPLES = 5  # runs to replay, per signature


class CampaignTally:
    """A campaign's results folded row by row as runs finish: the per-cell table, the failure
    signatures with their first runs, and the failing run each signature's minimizer starts from.

    What it holds does not grow with the finished runs but for their ids (resuming must know which
    are done): O(cells × findings × KEEP_SEEDS + signatures). A campaign of 100,000 runs is read
    back from its log one line at a time into it (bench/campaign_memory.py)."""

    def __init__(self, campaign: Campaign) -> None:
        seeds = campaign.spec.seed_list()
        self._position = {seed: i for i, seed in enumerate(seeds)}
        self._cells = {cell.index: CellReport(cell, len(seeds)) for cell in campaign.spec.cells()}
        self.done: set[str] = set()  # the run ids counted
        self._signatures: dict[str, dict[str, Any]] = {}  # in the order first seen
        # signature -> its failing run with the smallest (cell, seed), FIRST_FAILING_KEPT of its row
        self.first_failing: dict[str, dict[str, Any]] = {}

    def add(self, row: dict[str, Any]) -> bool:
        """Count one finished run; False, counting nothing, for a run counted already or not of this
        campaign (a log is data from outside)."""
        run, seed = str(row["run"]), row.get("seed")
        report = self._cells.get(row.get("cell"))  # type: ignore[arg-type]
        position = self._position.get(seed)  # type: ignore[arg-type]
        if run in self.done or report is None or position is None or run != run_id(report.cell, seed):  # type: ignore[arg-type]
            return False
        self.done.add(run)
        status = row["status"]
        setattr(report, status, getattr(report, status) + 1)
        for name in row.get("violations") or []:
            report.findings.setdefault(name, SeedSample()).add(position, seed)  # type: ignore[arg-type]
        for name in row.get("excused") or []:
            report.excused.setdefault(name, SeedSample()).add(position, seed)  # type: ignore[arg-type]
        report.acked += int(row.get("stats.acked") or 0)
        report.acked_lost += int(row.get("stats.acked_lost") or 0)
        if status != "ok":
            sig = row["signature"]
            report.signatures[sig] = report.signatures.get(sig, 0) + 1
            entry = self._signatures.setdefault(sig, {"runs": 0, "cells": [], "examples": []})
            entry["runs"] += 1
            if report.cell.index not in entry["cells"]:
                entry["cells"].append(report.cell.index)
            if len(entry["examples"]) < EXAMPLES:
                entry["examples"].append({"run": run, "seed": seed, "replay": row.get("replay")})
            first = self.first_failing.get(sig)
            if first is None or (report.cell.index, seed) < (first["cell"], first["seed"]):
                self.first_failing[sig] = {k: row.get(k) for k in FIRST_FAILING_KEPT}
        return True

    def reports(self) -> list[CellReport]:
        return list(self._cells.values())

    def signatures(self) -> dict[str, dict[str, Any]]:
        """Each failure signature: how many runs, in which cells, and the first runs to replay; the
        most frequent first (ties in the order first seen)."""
        return dict(sorted(self._signatures.items(), key=lambda kv: -kv[1]["runs"]))


def cell_reports(campaign: Campaign, rows: Mapping[str, dict[str, Any]]) -> list[CellReport]:
    """The table from rows by run id (rows need no `run`, `cell` or `seed` of their own)."""
    tally = CampaignTally(campaign)
    for cell in campaign.spec.cells():
        for seed in campaign.spec.seed_list():
            row = rows.get(run_id(cell, seed))
            if row is not None:
                tally.add({**row, "run": run_id(cell, seed), "cell": cell.index, "seed": seed})
    return tally.reports()


def matches(rule: ExpectRule, cell: Cell) -> bool:
    columns = cell.columns()
    return all(key in columns and same_value(columns[key], value) for key, value in rule.when.items())


def check_expect(campaign: Campaign, reports: list[CellReport]) -> list[dict[str, Any]]:
    """Each rule's verdict: held, or why not, cell by cell. A cell with missing runs cannot show
    `clean` (a missing run may be the one that breaks it); `catch` holds as soon as found."""
    verdicts = []
    for i, rule in enumerate(campaign.spec.expect):
        problems = []
        cells = [r for r in reports if matches(rule, r.cell)]
        for r in cells:
            if rule.catch is not None:
                absent = [name for name in rule.catch if name not in r.findings]
                if absent:
                    excused = [f"{name} excused as beyond tolerance in seeds {_seeds(r.excused[name])}" for name in absent if name in r.excused]
                    problems.append(f"cell {r.cell.index} ({r.cell.label()}): {', '.join(absent)} not found in {r.ok + r.violation} runs"
                                    + (f" ({'; '.join(excused)})" if excused else ""))
            elif rule.absent is not None:
                shown = [f"{name} (seeds {_seeds(r.findings[name])})" for name in rule.absent if name in r.findings]
                if shown or r.missing:
                    problems.append(f"cell {r.cell.index} ({r.cell.label()}): found " + "; ".join(shown + ([f"{r.missing} runs missing"] if r.missing else [])))
            elif r.violation or r.error or r.missing:
                shown = ", ".join(f"{name} (seeds {_seeds(seeds)})" for name, seeds in sorted(r.findings.items()))
                parts = [shown] if shown else []
                parts += [f"{r.error} runs raised"] if r.error else []
                parts += [f"{r.missing} runs missing"] if r.missing else []
                problems.append(f"cell {r.cell.index} ({r.cell.label()}): not clean: {'; '.join(parts)}")
        rule_text = {"when": rule.when} | (
            {"catch": rule.catch} if rule.catch is not None else {"absent": rule.absent} if rule.absent is not None else {"clean": True})
        verdicts.append({"rule": i, **rule_text, "cells": [r.cell.index for r in cells], "held": not problems, "problems": problems})
    return verdicts


def _seeds(sample: SeedSample) -> str:
    seeds = sample.seeds
    return ", ".join(map(str, seeds[:5])) + (f" and {sample.count - 5} more" if sample.count > 5 else "")
