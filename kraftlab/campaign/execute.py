"""Carrying out a campaign's runs: each simulator run a Ray task, each `runtime: ray` run a set of
actors driven from a thread of this process; at most `window` runs in flight at any moment.

Every run, whatever runs it, goes through `execute_plan`: it writes the run directory
(`runs/<run>/`, assembled aside and renamed into place by kraftlab/runner.py) and returns the run's
results row; a run that raises returns an `error` row with its traceback instead, so one broken
run never stops a campaign.
"""

from __future__ import annotations

import shutil
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kraftlab.runner import run_scenario
from workloads.campaign.generate import RunPlan

from .outcome import beyond_tolerance, error_row, row_from_summary


def replay_command(runs_dir: Path, plan: RunPlan) -> str:
    """The command that reruns one run alone: its complete scenario is kept in its run directory."""
    runtime = plan.raw.get("runtime", "sim")
    return f"kraftlab run {runs_dir / plan.run / 'scenario.yaml'} --runtime {runtime}"


def execute_plan(plan: RunPlan, runs_dir: Path, address: str | None = None) -> dict[str, Any]:
    """Run `plan` into `runs_dir/<run>/` (replacing what a killed campaign left there) and return
    its results row."""
    out_dir = runs_dir / plan.run
    replay = replay_command(runs_dir, plan)
    try:
        shutil.rmtree(out_dir, ignore_errors=True)
        result = run_scenario(plan.scenario(), source=plan.run, out_dir=out_dir, address=address)
        return row_from_summary(plan, result.summary, replay, beyond_tolerance(result.run_dir))
    except Exception as exc:  # a bug in a run is that run's result, not the campaign's end
        return error_row(plan, type(exc).__name__, traceback.format_exc(), replay)


class Executor:
    """Starts runs and hands back futures of their rows; `window`: how many may be in flight."""

    window: int = 1

    def submit(self, plan: RunPlan) -> Future:
        raise NotImplementedError

    def close(self) -> None:
        pass


class InProcess(Executor):
    """Runs each plan at once in this process (tests of the campaign's bookkeeping; `--parallel 0`)."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir

    def submit(self, plan: RunPlan) -> Future:
        future: Future = Future()
        future.set_result(execute_plan(plan, self.runs_dir))
        return future


class OnRay(Executor):
    """Simulator runs as Ray tasks (one CPU each, so Ray runs as many at once as the cluster has
    CPUs, on any of its nodes); `runtime: ray` runs from `threads` driver threads, each a cluster of
    actors. Both give `concurrent.futures` futures, so one `wait` watches both kinds."""

    def __init__(self, runs_dir: Path, address: str | None, parallel: int | None, ray_runs: bool) -> None:
        from actors.runtime.ray.adapter import connect, task_submitter

        self.runs_dir = runs_dir
        self.address = address
        self.connection = connect(address)
        # Default window: simulator runs, a task per CPU plus as many queued (no CPU waits for the
        # driver); `runtime: ray` runs, one cluster at a time.
        self.window = max(1, parallel) if parallel else (1 if ray_runs else 2 * self.cpus())
        self._threads = ThreadPoolExecutor(self.window if ray_runs else 1, thread_name_prefix="campaign-ray-run")
        self._start_task = task_submitter(execute_plan)

    def cpus(self) -> int:
        from actors.runtime.ray.adapter import cluster_cpus

        return cluster_cpus()

    def submit(self, plan: RunPlan) -> Future:
        if plan.raw.get("runtime", "sim") == "ray":
            return self._threads.submit(execute_plan, plan, self.runs_dir, self.address)
        return self._start_task(plan, self.runs_dir)

    def close(self) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)


def result_or_error(future: Future, plan: RunPlan, runs_dir: Path, on_lost: Callable[[BaseException], None] | None = None) -> dict[str, Any]:
    """The row a finished future holds; a task lost with its worker (killed, out of memory) is an
    `error` row naming why."""
    try:
        return future.result()
    except Exception as exc:
        if on_lost is not None:
            on_lost(exc)
        return error_row(plan, type(exc).__name__, "".join(traceback.format_exception(exc)), replay_command(runs_dir, plan))
