"""`kraftlab campaign`: the matrix × seeds, run with a bounded window, recorded as runs finish,
resumable, then grouped by failure signature, minimized and reported.

The campaign directory (`--out`, default `campaigns/<name>/`):

    campaign.yaml        the campaign file as given (what `kraftlab analyze` reads its matrix from)
    base-scenario.yaml   the base scenario as it was when the campaign started
    results.jsonl        the results log: one line per finished run, fsynced before the run counts
    results.parquet      one row per run (docs/reference), rebuilt from the log at the end
    summary.json         the per-cell table, the signatures and the `expect` verdicts
    runs/<run>/          each run's directory (summary.json, scenario.yaml, events/, metrics.om)
    failures/<signature>/minimal.yaml, minimize.json   a minimal scenario per failure signature

Started again with the same `--out`, a campaign runs only the runs its log does not hold: a run
directory without a log line (the campaign was killed between the two) is run again, and the
half-written directories of runs in flight at the kill are removed. An `--out` holding another
campaign (another matrix, seeds, faults, load or base scenario) is refused, naming the difference.

Memory: the plan is a generator and at most `window` runs are in flight; a finished run's row is
logged and folded into the tally (report.py, `CampaignTally`), which keeps counts and the first
few examples, not rows; results.parquet is written from the log a batch of rows at a time. So a
campaign of 100,000 runs holds the runs in flight, the tally and the finished runs' ids
(bench/campaign_memory.py).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from actors.runtime import interrupts
from workloads.campaign.generate import RunPlan, count_runs, plan_campaign, plan_run, run_id
from workloads.campaign.spec import VARIANT_KEY, Campaign, CampaignError, CampaignSpec, same_value
from workloads.scenario.loading import Problem

from .execute import Executor, result_or_error
from .report import CampaignTally
from .results_log import LOG_NAME, PARQUET_NAME, LogRows, ResultsLog, iter_log, write_parquet

CAMPAIGN_FILE = "campaign.yaml"
BASE_FILE = "base-scenario.yaml"
DEFAULT_ROOT = Path("campaigns")
# What a resumed campaign must share with the one that wrote the directory (`expect` and
# `description` may change: they do not change any run).
IDENTITY_KEYS = ("name", "seeds", "set", "matrix", "variants", "faults", "load")


@dataclass
class Progress:
    """What the progress bar and the report read: the finished runs folded into a tally, never kept."""

    total: int
    tally: CampaignTally
    resumed: int = 0  # runs the log already held at the start

    @property
    def done(self) -> int:
        return len(self.tally.done)

    def add(self, row: dict[str, Any]) -> None:
        self.tally.add(row)

    def failures_by_signature(self) -> dict[str, int]:
        return {sig: entry["runs"] for sig, entry in self.tally.signatures().items()}


def default_out(campaign: Campaign, seeds_given: bool = False, overrides: tuple[str, ...] = ()) -> Path:
    """`campaigns/<name>/`; with seeds or `--set` given on the command line, a directory of their
    own, so that another range or another setting of the same campaign never meets the first's
    results: `campaigns/<name>-seeds-<first>-<last>/`, `campaigns/<name>-<key>=<value>.../`."""
    name = campaign.spec.name
    if seeds_given:
        seeds = campaign.spec.seed_list()
        name += f"-seeds-{seeds[0]}-{seeds[-1]}"
    for item in overrides:
        name += "-" + re.sub(r"[^A-Za-z0-9._=-]", "_", item.split("cluster.protocol.")[-1])
    return DEFAULT_ROOT / name


def prepare_out(campaign: Campaign, out: Path) -> None:
    """Make `out` this campaign's directory, or refuse one that holds another campaign."""
    existing = out / CAMPAIGN_FILE
    if existing.is_file():
        differences = _differences(campaign, out)
        if differences:
            raise CampaignError(str(campaign.path), [Problem("--out", f"{out} holds another campaign's results: {'; '.join(differences)}")])
    elif out.exists() and any(p.name != "ray" for p in out.iterdir()):
        raise CampaignError(str(campaign.path), [Problem("--out", f"{out} exists, is not empty and holds no {CAMPAIGN_FILE}: not a campaign directory")])
    (out / "runs").mkdir(parents=True, exist_ok=True)
    if not existing.is_file():
        _write_text(out / BASE_FILE, campaign.base_text)
        _write_text(existing, campaign.text)
    else:  # a changed `expect` is taken as the new one
        _write_text(existing, campaign.text)


def _differences(campaign: Campaign, out: Path) -> list[str]:
    try:
        old_spec = CampaignSpec.model_validate(yaml.safe_load((out / CAMPAIGN_FILE).read_text()))
    except Exception as exc:
        return [f"its {CAMPAIGN_FILE} cannot be read ({exc})"]
    old, new = old_spec.model_dump(), campaign.spec.model_dump()
    out_list = []
    for k in IDENTITY_KEYS:
        if k == "seeds":
            # `seeds: 2` and `[0, 1]` are the same runs.
            if old_spec.seed_list() != campaign.spec.seed_list():
                out_list.append(f"seeds: {old.get(k)!r} there, {new.get(k)!r} here")
        elif not same_value(old.get(k), new.get(k)):
            out_list.append(f"{k}: {old.get(k)!r} there, {new.get(k)!r} here")
        elif k in ("matrix", "variants") and list(old.get(k) or {}) != list(new.get(k) or {}):
            # Cells, and so run ids, are numbered in the file's order: the same keys and values in
            # another order would put the finished runs under other cells.
            out_list.append(f"{k}: the same keys and values in another order ({', '.join(old[k])} there, "
                            f"{', '.join(new[k])} here; cells are numbered in the file's order)")
    base = out / BASE_FILE
    if base.is_file() and base.read_text() != campaign.base_text:
        out_list.append(f"the base scenario {campaign.base_path} changed since {base} was written")
    return out_list


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def remove_partial_runs(runs_dir: Path) -> None:
    """The half-assembled directories of runs a kill interrupted (kraftlab/runner.py's `.partial-`)."""
    for path in runs_dir.glob(".*.partial-*"):
        shutil.rmtree(path, ignore_errors=True)


def run_campaign(
    campaign: Campaign,
    out: Path,
    executor_factory: Callable[[Path], Executor],
    *,
    on_start: Callable[[Progress], None] | None = None,
    on_row: Callable[[Progress, dict[str, Any]], None] | None = None,
    on_stopping: Callable[[int], None] | None = None,
) -> Progress:
    """Run every run the log does not hold yet, the executor's `window` at most in flight (the
    executor is made only when there is something to run); each finished run is
    logged (fsynced) before the next is started. `results.parquet` is rebuilt at the end, also
    when interrupted (KeyboardInterrupt propagates after it)."""
    prepare_out(campaign, out)
    runs_dir = (out / "runs").resolve()
    remove_partial_runs(runs_dir)
    log_path = out / LOG_NAME
    progress = Progress(count_runs(campaign), CampaignTally(campaign))
    for row in iter_log(log_path):
        progress.add(row)
    progress.resumed = progress.done
    if on_start is not None:
        on_start(progress)
    todo = _missing(campaign, progress.tally.done)
    log = ResultsLog(log_path)
    executor: Executor | None = None
    in_flight: dict[Future, RunPlan] = {}
    try:
        plan = next(todo, None)
        if plan is not None:
            executor = executor_factory(runs_dir)
        while plan is not None or in_flight:
            while plan is not None and len(in_flight) < executor.window:  # type: ignore[union-attr]
                in_flight[executor.submit(plan)] = plan  # type: ignore[union-attr]
                plan = next(todo, None)
            done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            for future in done:
                finished = in_flight.pop(future)
                row = result_or_error(executor, future, finished, runs_dir)  # type: ignore[arg-type]
                log.append(row)
                progress.add(row)
                if on_row is not None:
                    on_row(progress, row)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or broken: runs not started yet are cancelled; those that
        # cannot be (a `runtime: ray` run in a thread of this process) are waited for, and every
        # run that finishes meanwhile is logged, so the wait is not lost. A second Ctrl-C during
        # the wait abandons them (they run again on the next start).
        running = [f for f in in_flight if not f.cancel()]
        if running and on_stopping is not None:
            on_stopping(len(running))
        try:
            if executor is not None:
                try:
                    executor.close()  # waits for the runs that could not be cancelled
                except KeyboardInterrupt:
                    interrupts.abandon_runs()  # each stops at its next poll (Abandoned)
                    executor.close()
                    raise
        finally:
            for future in running:
                if future.done() and not future.cancelled() and future.exception() is None:
                    row = result_or_error(executor, future, in_flight[future], runs_dir)  # type: ignore[arg-type]
                    log.append(row)
                    progress.add(row)
        raise
    finally:
        log.close()
        if executor is not None:
            executor.close()
        rebuild_parquet(campaign, out)
    return progress


def _missing(campaign: Campaign, done: set[str]) -> Iterator[RunPlan]:
    for cell, seed in plan_campaign(campaign):
        if run_id(cell, seed) not in done:
            yield plan_run(campaign, cell, seed)


def first_columns(campaign: Campaign) -> list[str]:
    variant = [VARIANT_KEY] if campaign.spec.variants is not None else []
    return ["run", "seed", *variant, *campaign.spec.matrix, "status", "violations", "signature", "replay"]


def rebuild_parquet(campaign: Campaign, out: Path) -> int:
    return write_parquet(LogRows(out / LOG_NAME), out / PARQUET_NAME, first_columns(campaign))


def write_json(path: Path, data: Any) -> None:
    _write_text(path, json.dumps(data, indent=2, default=str) + "\n")
