"""A minimal scenario per failure signature (delta debugging, Zeller and Hildebrandt 2002).

From one failing run of the signature (its first in cell and seed order), in the simulator:

1. **cut**: when the failure is an invariant violation (it has a time), end the safety phase just
   after the first violation: later faults cannot have caused it;
2. **remove faults**: ddmin over the schedule's faults (each with the action that undoes it),
   keeping a smaller set whenever the run still fails with the same signature;
3. **shorten**: end the safety phase after the last remaining fault is undone, and lighten the
   load (fewer producers and consumers, half the rate) while the signature still appears.

Every candidate is a complete run (workloads/campaign/generate.py's `plan_run` with the smaller
schedule), so the result is exactly a scenario that fails that way: `minimal.yaml`, which
`kraftlab run` reproduces (exit code 1). Runs cost simulated time only; `budget` bounds their
number. `runtime: ray` failures are not minimized (their timing is not the seed's alone): their
scenario is kept as it ran.
"""

from __future__ import annotations

import copy
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any


from observability.history import read_kinds
from workloads.campaign.generate import RunPlan, draw_schedule, plan_run
from workloads.campaign.spec import Campaign, Cell
from workloads.scenario.loading import dump_scenario
from workloads.faults import FaultAction, PlannedFault

from .outcome import findings, read_history_findings, signature

DEFAULT_BUDGET = 40


@dataclass
class Candidate:
    faults: list[PlannedFault]
    load: dict[str, Any] | None
    duration_ms: float

    def size(self) -> dict[str, Any]:
        return {"faults": len(self.faults), "safety_ms": round(self.duration_ms),
                "load": dict(self.load) if self.load is not None else None}


@dataclass
class Minimized:
    signature: str
    source_run: str
    before: dict[str, Any]
    after: dict[str, Any]
    runs: int  # candidate runs tried
    plan: RunPlan
    reproduced: bool  # the minimal scenario, run once more, fails with the signature
    steps: tuple[int, int] = (0, 0)  # scenario steps before and after
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"signature": self.signature, "from_run": self.source_run, "candidate_runs": self.runs,
                "before": self.before | {"steps": self.steps[0]}, "after": self.after | {"steps": self.steps[1]},
                "reproduced": self.reproduced, "notes": self.notes}


class Tester:
    """Runs candidates of one cell and seed and tells whether they fail with `target`."""

    def __init__(self, campaign: Campaign, cell: Cell, seed: int, target: str, budget: int, work: Path) -> None:
        self.campaign, self.cell, self.seed, self.target = campaign, cell, seed, target
        self.budget, self.work, self.runs = budget, work, 0

    def plan(self, c: Candidate) -> RunPlan:
        return plan_run(self.campaign, self.cell, self.seed, faults=c.faults, load=c.load, duration_ms=c.duration_ms)

    def fails_same(self, c: Candidate) -> bool:
        if self.runs >= self.budget:
            return False
        self.runs += 1
        return run_signature(self.plan(c), self.work / f"try-{self.runs}") == self.target


def run_signature(plan: RunPlan, out_dir: Path) -> str:
    from kraftlab.runner import run_scenario

    try:
        result = run_scenario(plan.scenario(), source=plan.run, out_dir=out_dir)
        return signature(findings(result.summary, plan.epilogue_start, read_history_findings(result.run_dir), plan.allow)[0])
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def ddmin(items: list, still_fails: Callable[[list], bool]) -> list:
    """The classic complement-removing ddmin: a 1-minimal sublist (no single chunk removable) when
    the test budget allows."""
    if still_fails([]):
        return []
    n = 2
    while len(items) >= 2:
        size = math.ceil(len(items) / n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        for chunk in chunks:
            rest = [x for x in items if x not in chunk]
            if still_fails(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(2 * n, len(items))
    return items


def safety_start_ms(run_dir: Path, first_fault_step: int) -> float | None:
    """When the run's safety phase began: the time of its first fault-schedule step (None when the
    run's history is not on this machine: a minimizing task on another node then skips the cut)."""
    if not (run_dir / "events").is_dir():
        return None
    for row in read_kinds(run_dir / "events", ("step",), ("index",)):
        if row.get("index") == first_fault_step:
            return float(row["time_ms"])
    return None


def minimize(campaign: Campaign, cell: Cell, seed: int, row: dict[str, Any], run_dir: Path, budget: int = DEFAULT_BUDGET) -> Minimized:
    spec = campaign.spec
    target = row["signature"]
    original = plan_run(campaign, cell, seed)
    assert spec.faults is not None
    schedule = draw_schedule(spec.faults, campaign.base_with(cell.overrides()), seed)
    full = Candidate(list(schedule.faults), (original.raw["steps"][original.load_step]["load"] if original.load_step >= 0 else None), spec.faults.duration_ms)
    best = Candidate(list(full.faults), copy.deepcopy(full.load), full.duration_ms)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kraftlab-minimize-") as work:
        tester = Tester(campaign, cell, seed, target, budget, Path(work))
        # 1. cut after the first violation
        first = row.get("first_violation_ms")
        start = safety_start_ms(run_dir, original.safety_step) if first is not None else None
        if first is not None and start is not None and first - start < best.duration_ms:
            cut = max(1.0, math.ceil(first - start) + 1)
            candidate = Candidate([p for p in best.faults if p.fault.at_ms < cut], best.load, cut)
            candidate.faults = [p if p.undo.at_ms < cut else replace(p, undo=_at(p.undo, cut)) for p in candidate.faults]
            if tester.fails_same(candidate):
                best = candidate
                notes.append(f"cut after the first violation: safety phase {round(cut)} ms")
        # 2. remove faults
        kept = ddmin(best.faults, lambda faults: tester.fails_same(Candidate(faults, best.load, best.duration_ms)))
        if len(kept) < len(best.faults):
            notes.append(f"faults: {len(best.faults)} -> {len(kept)}")
        best = Candidate(kept, best.load, best.duration_ms)
        # 3. shorten the safety phase and lighten the load
        end = max((p.undo.at_ms for p in best.faults), default=0.0) + 1.0
        if end < best.duration_ms and tester.fails_same(Candidate(best.faults, best.load, end)):
            best = Candidate(best.faults, best.load, end)
        if best.load is not None:
            for key, lighter in (("producers", 1), ("consumers", 0)):
                if best.load.get(key, 0) > lighter:
                    trial = dict(best.load, **{key: lighter})
                    if tester.fails_same(Candidate(best.faults, trial, best.duration_ms)):
                        best = Candidate(best.faults, trial, best.duration_ms)
            while best.load.get("rate_per_s", 0) >= 2:
                trial = dict(best.load, rate_per_s=float(math.floor(best.load["rate_per_s"] / 2)))
                if not tester.fails_same(Candidate(best.faults, trial, best.duration_ms)):
                    break
                best = Candidate(best.faults, trial, best.duration_ms)
        plan = tester.plan(best)
        reproduced = run_signature(plan, Path(work) / "final") == target
    return Minimized(target, row["run"], full.size(), best.size(), tester.runs, plan, reproduced,
                     (len(original.raw["steps"]), len(plan.raw["steps"])), notes)


def _at(action: FaultAction, at_ms: float) -> FaultAction:
    return replace(action, at_ms=at_ms)


def minimal_scenario(m: Minimized, campaign: Campaign) -> dict[str, Any]:
    """The minimal run as a scenario file: named after the signature, and ending with
    `expect: {acked_lost: 0}` so that a lost write, too, fails it (exit code 1)."""
    raw = copy.deepcopy(m.plan.raw)
    raw["name"] = f"{campaign.spec.name}-minimal"
    raw["steps"] = list(raw["steps"]) + [{"expect": {"acked_lost": 0}}]
    raw["description"] = (f"Minimal scenario of the failure signature {m.signature} of campaign {campaign.spec.name}, "
                          f"cut down from run {m.source_run} ({m.before['faults']} faults, {m.before['safety_ms']} ms of faults "
                          f"-> {m.after['faults']} faults, {m.after['safety_ms']} ms). `kraftlab run` it: it fails the same way.\n\n"
                          + m.plan.schedule)
    return raw


def write_minimal(m: Minimized, campaign: Campaign, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "minimal.yaml"
    tmp = directory / ".minimal.yaml.tmp"
    tmp.write_text(dump_scenario(minimal_scenario(m, campaign)))
    tmp.replace(path)
    return path
