"""Carrying out a campaign's runs: each simulator run a Ray task, each `runtime: ray` run a set of
actors driven from a thread of this process; at most `window` runs in flight at any moment.

Every run, whatever runs it, goes through `execute_plan`: it writes the run directory
(`runs/<run>/`, assembled aside and renamed into place by kraftlab/runner.py) and returns the run's
results row; a run that raises returns an `error` row with its traceback instead, so one broken
run never stops a campaign.

A Ray task may run on another machine than the command (a cluster started by `ray up`): it writes
its run directory in a temporary folder of its own node and returns it, packed (tar), with the row;
the command unpacks it into `runs/<run>/` before it logs the run. So a campaign's directory is
complete on the machine that ran the command, whatever node ran each run (a run's history is a few
MB; at most `window` of them are in flight).
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kraftlab.runner import run_scenario
from workloads.campaign.generate import RunPlan

from .outcome import error_row, read_history_findings, row_from_summary


def replay_command(runs_dir: Path, plan: RunPlan, faults: str = "emulated") -> str:
    """The command that reruns one run alone: its complete scenario is kept in its run directory."""
    runtime = plan.raw.get("runtime", "sim")
    return f"kraftlab run {runs_dir / plan.run / 'scenario.yaml'} --runtime {runtime}" + (
        f" --faults {faults}" if faults != "emulated" else "")


# What `--keep-runs failures` removes from a run that found nothing: its bulk (a standard run's
# history is about 3 MB, so 100,000 runs would need 300 GB). Its scenario.yaml (the replay command
# reruns it) and summary.json stay, and its row in results.parquet holds its figures.
BULK = ("events", "metrics.om", "ray")


def execute_plan(plan: RunPlan, runs_dir: Path, address: str | None = None, replay_dir: Path | None = None,
                 keep_runs: str = "all", faults: str = "emulated") -> dict[str, Any]:
    """Run `plan` into `runs_dir/<run>/` (replacing what a killed campaign left there) and return
    its results row (its replay command names `replay_dir`, default `runs_dir`). With `keep_runs`
    "failures", an ok run's history and metrics are removed once its row is made (`history_kept`
    false in the row). `faults`: a `runtime: ray` run's fault backend (emulated or kernel)."""
    out_dir = runs_dir / plan.run
    replay = replay_command(replay_dir or runs_dir, plan, faults)
    # The run's own summary.json says how to replay it too: from the scenario.yaml its folder will
    # keep (a run id alone names no file a user could run).
    scenario_file = (replay_dir or runs_dir) / plan.run / "scenario.yaml"
    try:
        shutil.rmtree(out_dir, ignore_errors=True)
        result = run_scenario(plan.scenario(), source=str(scenario_file), out_dir=out_dir, address=address, faults=faults)
        row = row_from_summary(plan, result.summary, replay, read_history_findings(result.run_dir))
        row["history_kept"] = keep_runs == "all" or row["status"] != "ok"
        if not row["history_kept"]:
            remove_bulk(result.run_dir)
        return row
    except Exception as exc:  # a bug in a run is that run's result, not the campaign's end
        return error_row(plan, type(exc).__name__, traceback.format_exc(), replay)
    except KeyboardInterrupt:  # the run is not done: the next start runs it again from nothing
        shutil.rmtree(out_dir, ignore_errors=True)
        raise


def remove_bulk(run_dir: Path) -> None:
    for name in BULK:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def execute_and_pack(plan: RunPlan, runs_dir: Path, keep_runs: str = "all") -> tuple[dict[str, Any], bytes]:
    """A Ray task's body: run `plan` on this node, in a temporary folder, and return its row (with
    `ray_node`, the id of the Ray node that ran it) and its run directory packed (`unpack_run` puts
    it into the command's `runs_dir`)."""
    from actors.runtime.ray.adapter import this_node

    with tempfile.TemporaryDirectory(prefix="kraftlab-campaign-run-") as tmp:
        row = {**execute_plan(plan, Path(tmp), replay_dir=runs_dir, keep_runs=keep_runs), "ray_node": this_node()}
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w") as tar:
            if (Path(tmp) / plan.run).is_dir():
                tar.add(Path(tmp) / plan.run, arcname=plan.run)
        return row, packed.getvalue()


def unpack_run(packed: bytes, runs_dir: Path, run: str) -> None:
    """The packed run directory into `runs_dir/<run>/`: unpacked aside, then renamed into place
    (a kill leaves a `.partial-` folder, which the next start removes)."""
    partial = runs_dir / f".{run}.partial-unpack"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r") as tar:
        tar.extractall(partial, filter="data")
    shutil.rmtree(runs_dir / run, ignore_errors=True)
    if (partial / run).is_dir():
        (partial / run).rename(runs_dir / run)
    shutil.rmtree(partial, ignore_errors=True)


class Executor:
    """Starts runs and hands back futures of their rows; `window`: how many may be in flight."""

    window: int = 1

    def submit(self, plan: RunPlan) -> Future:
        raise NotImplementedError

    def row(self, result: Any, plan: RunPlan) -> dict[str, Any]:
        """A finished run's row, from what its future held (and its run directory in place)."""
        return result

    def close(self) -> None:
        pass


class InProcess(Executor):
    """Runs each plan at once in this process (tests of the campaign's bookkeeping; `--parallel 0`)."""

    def __init__(self, runs_dir: Path, keep_runs: str = "all", faults: str = "emulated") -> None:
        self.runs_dir = runs_dir
        self.keep_runs = keep_runs
        self.faults = faults

    def submit(self, plan: RunPlan) -> Future:
        future: Future = Future()
        future.set_result(execute_plan(plan, self.runs_dir, keep_runs=self.keep_runs, faults=self.faults))
        return future


class OnRay(Executor):
    """Simulator runs as Ray tasks (one CPU each, so Ray runs as many at once as the cluster has
    CPUs, on any of its nodes); `runtime: ray` runs from `threads` driver threads, each a cluster of
    actors. Both give `concurrent.futures` futures, so one `wait` watches both kinds."""

    def __init__(self, runs_dir: Path, address: str | None, parallel: int | None, ray_runs: bool, keep_runs: str = "all",
                 faults: str = "emulated") -> None:
        from actors.runtime.ray.adapter import connect, task_submitter

        self.runs_dir = runs_dir
        self.keep_runs = keep_runs
        self.faults = faults  # the `runtime: ray` runs' fault backend
        self.address = address
        self.connection = connect(address)
        # Default window: simulator runs, a task per CPU plus as many queued (no CPU waits for the
        # driver); `runtime: ray` runs, one cluster at a time.
        self.window = max(1, parallel) if parallel else (1 if ray_runs else 2 * self.cpus())
        self._threads = ThreadPoolExecutor(self.window if ray_runs else 1, thread_name_prefix="campaign-ray-run")
        self._start_task = task_submitter(execute_and_pack)

    def cpus(self) -> int:
        from actors.runtime.ray.adapter import cluster_cpus

        return cluster_cpus()

    def submit(self, plan: RunPlan) -> Future:
        if plan.raw.get("runtime", "sim") == "ray":
            return self._threads.submit(execute_plan, plan, self.runs_dir, self.address, None, self.keep_runs, self.faults)
        return self._start_task(plan, self.runs_dir, self.keep_runs)

    def row(self, result: Any, plan: RunPlan) -> dict[str, Any]:
        if isinstance(result, tuple):  # a Ray task's: (row, packed run directory)
            row, packed = result
            unpack_run(packed, self.runs_dir, plan.run)
            return row
        return result

    def close(self) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)


def result_or_error(executor: Executor, future: Future, plan: RunPlan, runs_dir: Path) -> dict[str, Any]:
    """The row of a finished run; a task lost with its worker (killed, out of memory) is an
    `error` row naming why."""
    try:
        return executor.row(future.result(), plan)
    except Exception as exc:
        return error_row(plan, type(exc).__name__, "".join(traceback.format_exception(exc)), replay_command(runs_dir, plan))
