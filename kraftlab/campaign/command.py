"""`kraftlab campaign` on the console: the progress bar while runs go, then the table per cell,
the failure signatures with their minimal scenarios, and the `expect` verdicts.

Exit codes: 0 every `expect` rule held and no run raised; 1 a rule did not hold or a run raised
(its traceback is in results.parquet and summary.json); 2 the campaign file or `--out` is invalid
(nothing runs).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from workloads.campaign.generate import count_runs
from workloads.campaign.spec import Campaign, Cell

from . import orchestrate
from .disk import DiskWatch
from .execute import InProcess, OnRay
from .minimize import DEFAULT_BUDGET, minimize, write_minimal
from .outcome import safe_name
from .report import CampaignTally, check_expect


def runtime_of(campaign: Campaign, cell: Cell) -> str:
    """A cell's runtime (the seed draws faults and load, not the runtime)."""
    return campaign.base_with(cell.overrides()).get("runtime", "sim")


def kernel_faults_refusal(campaign: Campaign) -> str | None:
    """Why `--faults kernel` cannot run `campaign`, from its file alone (None: it can)."""
    sim_cells = [cell.label() for cell in campaign.spec.cells() if runtime_of(campaign, cell) != "ray"]
    if sim_cells:
        return (f"--faults kernel: only for runtime ray runs, and these cells run in the simulator: {'; '.join(sim_cells)} "
                "(set `runtime: ray` in the base scenario, or a matrix key `runtime: [ray]`)")
    faults = campaign.spec.faults
    if faults is not None:
        mix, key = (faults.swarm, "faults.swarm") if faults.swarm is not None else (faults, "faults")
        if "slow" in mix.kinds:
            return f"{key}.kinds: `slow` delays a link, which --faults kernel cannot (no netem): leave it out"
        if "link" in mix.kinds and max(mix.link_delay_ms) > 0:
            return (f"{key}.link_delay_ms: {list(mix.link_delay_ms)}, but --faults kernel cannot delay (no netem): "
                    "set it to [0, 0] (the link faults then drop only)")
    return None


def execute_campaign(campaign: Campaign, out: Path, *, parallel: int | None, address: str | None, console: Console,
                     minimize_budget: int = DEFAULT_BUDGET, keep_runs: str = "all", faults: str = "emulated") -> dict[str, Any]:
    """Run what is missing, minimize each new failure signature, write summary.json; return it.
    `faults`: the `runtime: ray` runs' fault backend (emulated or kernel)."""
    total = count_runs(campaign)
    console.print(f"[bold]{campaign.spec.name}[/]: {len(campaign.spec.cells())} cells × {len(campaign.spec.seed_list())} seeds = "
                  f"{total:,} runs  →  {out}", highlight=False)
    runtimes = {runtime_of(campaign, cell) for cell in campaign.spec.cells()}

    def make_executor(runs_dir: Path):
        if parallel == 0:
            return InProcess(runs_dir, keep_runs, faults)
        return OnRay(runs_dir, address, parallel, ray_runs="ray" in runtimes, keep_runs=keep_runs, faults=faults)

    disk = DiskWatch(out / "runs", keep_runs)
    started = time.monotonic()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                  TimeRemainingColumn(), TextColumn("{task.fields[rate]}"), console=console, transient=False) as bar:
        task = bar.add_task("runs", total=total, rate="")

        def on_start(progress: orchestrate.Progress) -> None:
            bar.update(task, completed=progress.done)
            if progress.resumed:
                console.print(f"resuming: {progress.resumed:,} runs already done in {out / orchestrate.LOG_NAME}", highlight=False)

        def on_row(progress: orchestrate.Progress, row: dict[str, Any]) -> None:
            done_now = progress.done - progress.resumed
            per_min = done_now / max(1e-9, (time.monotonic() - started) / 60)
            failing = progress.failures_by_signature()
            shown = ", ".join(f"{sig} {n}" for sig, n in list(failing.items())[:3]) + (" …" if len(failing) > 3 else "")
            bar.update(task, completed=progress.done, rate=f"{per_min:,.1f} runs/min" + (f"  failures: {shown}" if shown else ""))
            warning = disk.after_run(str(row["run"]), progress.total - progress.done)
            if warning:
                console.print(f"[yellow]{warning}[/]", highlight=False, soft_wrap=True)

        def on_stopping(running: int) -> None:
            console.print(f"[yellow]stopping[/]: waiting for the {running} run{'s' if running > 1 else ''} in flight to finish "
                          "(they will be recorded); Ctrl-C again to abandon them", highlight=False)

        try:
            progress = orchestrate.run_campaign(campaign, out, make_executor, on_start=on_start, on_row=on_row, on_stopping=on_stopping)
        except KeyboardInterrupt:
            console.print(f"[yellow]interrupted[/]: every finished run is recorded in {out / orchestrate.LOG_NAME}; "
                          "run the same command again to run only what is missing", highlight=False)
            raise
    minimal = minimize_signatures(campaign, out, progress.tally, console, minimize_budget, parallel, address)
    summary = build_summary(campaign, out, progress.tally, minimal, time.monotonic() - started)
    orchestrate.write_json(out / "summary.json", summary)
    return summary


def minimize_signatures(campaign: Campaign, out: Path, tally: CampaignTally, console: Console, budget: int,
                        parallel: int | None = None, address: str | None = None) -> dict[str, Any]:
    """failures/<signature>/minimal.yaml for each failure signature (kept when already there), the
    signatures minimized at once, each a Ray task (in this process with `--parallel 0`)."""
    found: dict[str, Any] = {}
    cells = {c.index: c for c in campaign.spec.cells()}
    jobs = []
    for sig in tally.signatures():
        if sig.startswith("error-") or campaign.spec.faults is None or budget == 0:
            continue
        directory = out / "failures" / safe_name(sig)
        if (directory / "minimize.json").is_file():
            found[sig] = json.loads((directory / "minimize.json").read_text())
            continue
        first = tally.first_failing[sig]
        if runtime_of(campaign, cells[first["cell"]]) == "sim":
            jobs.append((sig, directory, (campaign, cells[first["cell"]], first["seed"], first, (out / "runs" / first["run"]).resolve(), budget)))
    if not jobs:
        return found
    submit = _minimizer(parallel, address)
    with console.status(f"minimizing {len(jobs)} failure signature{'s' if len(jobs) > 1 else ''}…"):
        futures = [(sig, directory, submit(*args)) for sig, directory, args in jobs]
        for sig, directory, future in futures:
            m = future.result()
            path = write_minimal(m, campaign, directory)
            report = m.as_dict() | {"minimal": str(path), "replay": f"kraftlab run {path}"}
            orchestrate.write_json(directory / "minimize.json", report)
            found[sig] = report
    return found


def _minimizer(parallel: int | None, address: str | None):
    if parallel == 0:
        def at_once(*args: Any) -> Future:
            future: Future = Future()
            future.set_result(minimize(*args))
            return future
        return at_once
    from actors.runtime.ray.adapter import connect, task_submitter

    connect(address)
    return task_submitter(minimize)


def build_summary(campaign: Campaign, out: Path, tally: CampaignTally, minimal: dict[str, Any], wall_s: float) -> dict[str, Any]:
    reports = tally.reports()
    verdicts = check_expect(campaign, reports)
    sigs = tally.signatures()
    for sig, entry in sigs.items():
        if sig in minimal:
            entry["minimal"] = {k: minimal[sig][k] for k in ("minimal", "replay", "before", "after", "reproduced", "candidate_runs")}
    errors = sum(r.error for r in reports)
    # the documented exit codes: 1 when "an invariant was violated" that nothing expected. An
    # `expect` block says which findings a campaign is meant to show; without one, every finding
    # is unexpected (a campaign that runs as a gate fails on it).
    unexpected = 0 if campaign.spec.expect else sum(r.violation for r in reports)
    return {
        "campaign": campaign.spec.name,
        "out": str(out),
        "runs": count_runs(campaign),
        "done": len(tally.done),
        "errors": errors,
        "ok": all(v["held"] for v in verdicts) and errors == 0 and unexpected == 0,
        "unexpected": unexpected,
        "wall_s": round(wall_s, 1),
        "cells": [r.as_dict() for r in reports],
        "signatures": sigs,
        "expect": verdicts,
    }


SHOWN_SIGNATURES = 12  # the rest are in summary.json


def print_summary(summary: dict[str, Any], console: Console) -> None:
    """The table per cell (signatures by their number, S1 the most frequent), then the signatures
    with a replay command and their minimal scenario, then the `expect` verdicts."""
    numbers = {sig: f"S{i}" for i, sig in enumerate(summary["signatures"], 1)}
    table = Table("cell", "runs", "ok", "failures by signature", "acked lost", "detection (95% CI)", title="per cell")
    for c in summary["cells"]:
        failures = ", ".join(f"{numbers[sig]} ×{n}" for sig, n in sorted(c["signatures"].items(), key=lambda kv: (-kv[1], numbers[kv[0]])))
        low, high = c["detection_ci95"]
        extra = "".join(f" [red]{c[k]} {k}[/]" for k in ("error", "missing") if c[k])
        table.add_row(c["label"], f"{c['runs']:,}", f"{c['ok']:,}{extra}", failures, f"{c['acked_lost']:,}",
                      f"{100 * c['detection_rate']:.1f}% [{100 * low:.1f}, {100 * high:.1f}]")
    console.print(table)
    for sig, entry in list(summary["signatures"].items())[:SHOWN_SIGNATURES]:
        console.print(f"[bold]{numbers[sig]}[/] {sig}: {entry['runs']:,} runs; replay: {entry['examples'][0]['replay']}",
                      highlight=False, soft_wrap=True)
        m = entry.get("minimal")
        if m:
            b, a = m["before"], m["after"]
            mark = "" if m["reproduced"] else " [red](did not reproduce)[/]"
            console.print(f"    minimal: {m['minimal']}  ({b['faults']} faults, {b['safety_ms']:,} ms, {b['steps']} steps -> "
                          f"{a['faults']} faults, {a['safety_ms']:,} ms, {a['steps']} steps; {m['candidate_runs']} runs){mark}",
                          highlight=False, soft_wrap=True)
    if len(summary["signatures"]) > SHOWN_SIGNATURES:
        console.print(f"… and {len(summary['signatures']) - SHOWN_SIGNATURES} more signatures in summary.json", highlight=False)
    for v in summary["expect"]:
        what = f"catch {v['catch']}" if "catch" in v else f"absent {v['absent']}" if "absent" in v else "clean"
        if v["held"]:
            console.print(f"[green]expect held[/]: when {v['when']}: {what}", highlight=False)
        else:
            console.print(f"[red]expect FAILED[/]: when {v['when']}: {what}", highlight=False)
            for p in v["problems"]:
                console.print(f"  {p}", highlight=False, soft_wrap=True)
    if summary["errors"]:
        console.print(f"[red]{summary['errors']} runs raised[/] (status error; tracebacks in results.parquet)", highlight=False)
    if summary.get("unexpected"):
        console.print(f"[red]{summary['unexpected']} runs found a violation[/] and the campaign has no `expect` block to "
                      "say it should (exit 1; an `expect` rule with `catch` declares what a cell is meant to find)",
                      highlight=False, soft_wrap=True)
    console.print(f"{summary['done']:,} of {summary['runs']:,} runs; summary: {Path(summary['out']) / 'summary.json'}", highlight=False)
