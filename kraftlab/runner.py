"""Running one scenario end to end: build the cluster, run the steps, write the run directory.

The run directory (docs/reference/run-directory.md) is assembled in a hidden sibling folder and
renamed into place when complete, so a reader never sees a half-written run:

    summary.json    the run summary (docs/reference)
    scenario.yaml   the scenario as run, with every default filled in
    events/         the event history as Parquet files (observability/history.py)
    error.txt       only when the run itself broke (a role's internal assertion, a bug)
    ray/            on an embedded Ray: Ray's own logs written during the run (kept off the console)

After the steps comes the run's epilogue, which completes the history: the producers settle every
pending record (`produce_ack` "info" or "fail"), load consumers catch up with what is committed,
and a final read records each partition's committed log (`final_read`). The summary's `final`
and `violations` describe the cluster when the steps ended; its counters include the epilogue.
Violations first found in the epilogue are listed apart (`epilogue_violations`) but count in the
verdict like any other (docs/reference: `ok` is judged from every violation of the run).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


from actors.runtime import interrupts
from actors.runtime.gc_tuning import release_finished_run, tune_for_event_streams
from observability.availability import AvailabilityTracker
from observability.events import StepsDone
from observability.history import HistoryWriter
from observability.metrics.openmetrics import SIM_EPOCH_S, recorder_for
from observability.metrics.serve import LockedSink, serve
from observability.states import plain
from workloads.drivers import build_cluster
from workloads.scenario.loading import dump_scenario
from workloads.scenario.schema import Scenario
from workloads.steps import Failure, StepRunner

DEFAULT_RUNS_ROOT = Path("runs")


class RunSetupError(Exception):
    """The run cannot start (e.g. the output folder is taken): exit code 2, nothing written."""


def _join_ray(address: str | None) -> None:
    """Join the Ray cluster `address` (or RAY_ADDRESS) names, or start an embedded one, before the
    run directory exists: a cluster that cannot be joined is the user's input (exit 2), not a
    failed run."""
    from actors.runtime.ray import adapter  # Ray is only loaded when used

    problem = adapter.address_problem(address, os.environ)
    if problem is not None:
        raise RunSetupError(problem)
    named = address or os.environ.get("RAY_ADDRESS")
    try:
        adapter.connect(address)
    except Exception as exc:
        if not named:
            raise  # the embedded Ray did not start: not the user's input
        raise RunSetupError(f"{'--address' if address else 'RAY_ADDRESS'} {named}: cannot join the Ray cluster there "
                            f"({type(exc).__name__}: {exc}); {adapter.ADDRESS_EXPECTED}") from None


@dataclass
class RunResult:
    summary: dict[str, Any]
    run_dir: Path

    @property
    def ok(self) -> bool:
        return bool(self.summary["ok"])


def replay_command(source: str, scenario: Scenario, overrides: Sequence[str] = (), faults: str = "emulated") -> str:
    parts = ["kraftlab", "run", source, "--seed", str(scenario.seed), "--runtime", scenario.runtime]
    for item in overrides:
        parts += ["--set", item]
    if faults != "emulated":
        parts += ["--faults", faults]
    return shlex.join(parts)


def kernel_faults_refusal(scenario: Scenario) -> str | None:
    """Why `--faults kernel` cannot run `scenario`, found from the file alone (None: it can)."""
    if scenario.runtime != "ray":
        return "--faults kernel: only for runtime ray (the simulator makes its own faults); add --runtime ray"
    for index, step in enumerate(scenario.steps):  # 0-based, as the loader's messages name steps
        if step.kind() == "link" and step.link.delay_ms > 0:
            return (f"steps[{index}].link.delay_ms: {step.link.delay_ms:g} ms, but with --faults kernel a delay needs the "
                    f"kernel's netem queueing discipline, which kraftlab does not use{_netem_note()}; "
                    "use --faults emulated, or a link with drop only")
    return None


def listeners_refusal(scenario: Scenario) -> str | None:
    """Why the scenario's `cluster.listeners`, or its real clients as load (`load.client:
    librdkafka`, which turns the listeners on), cannot run on its runtime (None: they can)."""
    if scenario.load.client == "librdkafka" and scenario.runtime != "ray":
        return ("load.client: librdkafka needs runtime ray (real Kafka clients run on real time and talk to the brokers' Kafka "
                "listeners, which the simulator does not have); add --runtime ray, or use load.client: kraftlab")
    if scenario.cluster.listeners and scenario.runtime != "ray":
        return ("cluster.listeners: [kafka] needs runtime ray (a real client's connections run on real time, which the "
                "simulator's virtual clock does not); add --runtime ray, or remove the listeners")
    return None


def _netem_note() -> str:
    """What this machine's kernel says of netem, when it can be read."""
    import gzip

    try:
        config = gzip.decompress(Path("/proc/config.gz").read_bytes()).decode()
    except OSError:
        return ""
    if "CONFIG_NET_SCH_NETEM=y" in config or "CONFIG_NET_SCH_NETEM=m" in config:
        return ""
    return " (and this machine's kernel lacks: CONFIG_NET_SCH_NETEM is not set)"


def default_run_dir(scenario: Scenario, root: Path = DEFAULT_RUNS_ROOT) -> Path:
    """`runs/<name>-<seed>-<UTC time>[-n]/`, created empty now: the name is reserved by the
    mkdir itself, so runs started in the same second (a script starting several) each get their
    own (a check for existence, then a later mkdir, gave two runs one name)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = root / f"{scenario.name}-{scenario.seed}-{stamp}"
    base.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = base, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = base.with_name(f"{base.name}-{n}")


def out_dir_refusal(out_dir: Path) -> str | None:
    """Why a run cannot be written to `out_dir` (it cannot become a folder, or holds files), or None."""
    problem = out_dir_problem(out_dir)
    if problem is None and out_dir.exists() and any(out_dir.iterdir()):
        problem = f"--out {out_dir}: the folder exists and is not empty"
    return problem


def out_dir_problem(out_dir: Path) -> str | None:
    """Why `out_dir` cannot become a folder (it, or a folder above it, is a file), or None."""
    for path in (out_dir, *out_dir.parents):
        if path.exists() and not path.is_dir():
            what = "is" if path == out_dir else f"is under {path}, which is"
            return f"--out {out_dir}: {what} a file, not a folder"
    return None


def run_scenario(scenario: Scenario, *, source: str, **options: Any) -> RunResult:
    """Run `scenario` and write its run directory (`_run_scenario`, which documents the options),
    then free the run's world: the simulator or the Ray driver's cluster, every role, log and
    check, one large reference cycle that only a full collection frees (gc_tuning.py). Without it
    a process running run after run (a campaign's worker) grew by the size of each run's world."""
    try:
        return _run_scenario(scenario, source=source, **options)
    finally:
        release_finished_run()


def _run_scenario(
    scenario: Scenario,
    *,
    source: str,
    overrides: Sequence[str] = (),
    out_dir: Path | None = None,
    on_step: Callable[[int, Any], None] | None = None,
    address: str | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    on_metrics_url: Callable[[str], None] | None = None,
    on_bootstrap_servers: Callable[[str], None] | None = None,
    after_steps: Callable[[Any, Any], None] | None = None,
    faults: str = "emulated",
) -> RunResult:
    """Run `scenario` and write its run directory; `source` is how the user named it (for replay).
    `address`: the Ray cluster to join for `runtime: ray` (default RAY_ADDRESS, else embedded).
    `faults`: who makes a Ray run's network faults and crashes, "emulated" (kraftlab's send path)
    or "kernel" (the hosts' packet filters; refused, as a RunSetupError, where they cannot).
    `metrics_port`: also serve the metrics live on http://metrics_host:metrics_port/metrics while
    the run goes (its URL is passed to `on_metrics_url`). `after_steps(runtime, steps)`: called once
    the steps are done, before the run's end (`kraftlab cluster up` serves there until told to stop)."""
    tune_for_event_streams()
    final_dir = Path(out_dir) if out_dir is not None else default_run_dir(scenario)
    problem = out_dir_refusal(final_dir)
    if problem is not None:
        raise RunSetupError(problem)
    started = time.perf_counter()
    logs_since = time.time()
    if metrics_port is not None:
        # Before Ray: a taken port is bad input, and nothing should run (Ray takes seconds to start).
        _refuse_unservable(metrics_host, metrics_port)
    if faults == "kernel" and (refusal := kernel_faults_refusal(scenario)) is not None:
        raise RunSetupError(refusal)
    if (refusal := listeners_refusal(scenario)) is not None:
        raise RunSetupError(refusal)
    if scenario.runtime == "ray":
        _join_ray(address)
    if faults == "kernel":
        from actors.runtime.ray import adapter

        problems = adapter.kernel_fault_problems()
        if problems:
            raise RunSetupError("--faults kernel: the cluster's hosts cannot make kernel faults: " + "; ".join(problems))
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    work_dir = final_dir.with_name(f".{final_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(work_dir, ignore_errors=True)

    failures: list[Failure] = []
    error: str | None = None
    runtime = None
    steps = None
    at_end = None
    events = metrics = server = None
    closed = False

    def close_everything() -> None:
        """The history and metrics flushed, the live server stopped, the cluster (and its data
        root) gone: once, whether the run ends or is interrupted."""
        nonlocal closed
        if closed:
            return
        closed = True
        try:
            if events is not None:
                events.close()
            if metrics is not None:
                metrics.close(runtime.now_ms if runtime is not None else 0.0)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
            if runtime is not None and hasattr(runtime, "close"):
                runtime.close()

    # From the folder's creation on, the run ends in one of two ways: renamed into place complete
    # (summary.json), or kept interrupted (interrupted.txt); never a `.partial-` folder left behind.
    try:
        with interrupts.deferred():  # the folder and its writers come into being together
            work_dir.mkdir(parents=True)
            # A Ray run's clock starts once Ray is up (its cluster's `epoch_s` is taken then):
            # metrics.om stamps `time_ms` from here, so its samples line up with the wall clock.
            started_at = time.time()
            events = HistoryWriter(work_dir / "events")
            availability = AvailabilityTracker()
            # metrics.om: simulated time from a fixed base (two runs of a seed give the same
            # file), a Ray run's from its wall-clock start. Records lost are read from the cluster
            # view, once it exists.
            metrics = recorder_for(
                work_dir / "metrics.om", tuple(f"c{i}" for i in range(1, scenario.cluster.controllers + 1)), scenario.cluster.brokers,
                SIM_EPOCH_S if scenario.runtime == "sim" else started_at)
            metrics_sink: Callable[[Any], None] = metrics
            if metrics_port is not None:
                # The scrape thread reads the model while the driver feeds it: one lock for both.
                lock = threading.Lock()
                metrics_sink = LockedSink(metrics, lock)
                try:
                    server = serve(metrics.model, lock, metrics_host, metrics_port)
                except OSError as exc:  # taken since the check above
                    raise RunSetupError(_unservable(metrics_host, metrics_port, exc)) from None
        if server is not None and on_metrics_url is not None:
            on_metrics_url(f"http://{metrics_host}:{server.server_port}/metrics")
        try:
            runtime = build_cluster(scenario, [events, availability, metrics_sink], address, faults)
            if getattr(runtime, "bootstrap_servers", None) and on_bootstrap_servers is not None:
                on_bootstrap_servers(runtime.bootstrap_servers)
            metrics.model.lost.view = runtime.view()
            steps = StepRunner(runtime, scenario)
            failures = steps.run(on_step)
            if after_steps is not None:
                after_steps(runtime, steps)
            runtime.record(StepsDone(1 if failures else 0))
            runtime.check_everything()
            at_end = capture_verdict(runtime)
            # The epilogue is checked too: its violations are facts of the run (an election while
            # the load settles can lose records), reported apart and counted in the verdict.
            runtime.clients.finish()
        except Exception as exc:  # a broken internal invariant or a bug: keep the evidence, fail the run
            error = "".join(traceback.format_exception(exc))
            at_step = steps.current if steps is not None else -1
            failures.append(Failure(at_step, "internal_error", f"{type(exc).__name__}: {exc} (see error.txt)"))
        wall_s = time.perf_counter() - started
        try:
            if runtime is not None:
                runtime.settle()
            if at_end is None and runtime is not None:
                at_end = capture_verdict(runtime)
            summary = build_summary(scenario, runtime, failures, wall_s, replay_command(source, scenario, overrides, faults), availability, at_end)
        finally:
            close_everything()
        # The last moment a run in a thread of its own (`kraftlab demo`'s) can be abandoned: past
        # it, the run is complete.
        interrupts.raise_if_abandoned()
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (actors/runtime/interrupts.py)
        _keep_interrupted(work_dir, final_dir, scenario, steps, time.perf_counter() - started, exc, close_everything)
        raise
    except BaseException:
        close_everything()
        shutil.rmtree(work_dir, ignore_errors=True)
        raise
    with interrupts.deferred():  # a signal now waits until the complete run is in place
        if scenario.runtime == "ray":  # also when the cluster never came up: Ray's logs tell why
            from actors.runtime.ray import adapter  # Ray is only loaded when used

            adapter.copy_embedded_logs(work_dir / "ray", logs_since)
        (work_dir / "scenario.yaml").write_text(dump_scenario(scenario.model_dump(by_alias=True)))
        if error is not None:
            (work_dir / "error.txt").write_text(error)
        (work_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        # Onto the empty folder itself (a rename replaces an empty directory at once): removing it
        # first would free the name for another run's reservation in between.
        os.replace(work_dir, final_dir)
    return RunResult(summary, final_dir)


INTERRUPTED_FILE = "interrupted.txt"


def _keep_interrupted(work_dir: Path, final_dir: Path, scenario: Scenario, steps: Any, wall_s: float, exc: KeyboardInterrupt,
                      close_everything: Callable[[], None]) -> None:
    """An interrupted run keeps what it recorded (issue 12: a run stopped at any moment keeps its
    history): the history and metrics flushed, the cluster and its data root removed, and the
    folder put in place with its scenario and `interrupted.txt` instead of a summary (there is no
    verdict: `kraftlab analyze` finds the history without a final read, valid "unknown"). A
    second Ctrl-C during this clean-up abandons the folder instead."""
    if not work_dir.is_dir():  # stopped before the folder was made: nothing was recorded
        return
    try:
        close_everything()
        (work_dir / "scenario.yaml").write_text(dump_scenario(scenario.model_dump(by_alias=True)))
        what = "SIGTERM" if interrupts.terminated(exc) else "Ctrl-C (SIGINT)"
        at_step = steps.current if steps is not None else -1
        (work_dir / INTERRUPTED_FILE).write_text(
            f"interrupted by {what} at step {at_step}, {wall_s:.1f} s into the run: events/ and metrics.om hold what was "
            "recorded until then; there is no summary.json (no verdict)\n")
        os.replace(work_dir, final_dir)
    except BaseException:
        shutil.rmtree(work_dir, ignore_errors=True)
        raise


def _unservable(host: str, port: int, exc: OSError) -> str:
    return f"--metrics-port {port} --metrics-host {host}: cannot serve metrics there ({exc})"


def _refuse_unservable(host: str, port: int) -> None:
    """Bind `host:port` as the metrics server will (address reuse on, as Python's HTTP servers
    have), then let it go; a port taken or an address not this machine's is a RunSetupError."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        raise RunSetupError(_unservable(host, port, exc)) from None


def capture_verdict(runtime: Any) -> dict[str, Any]:
    """What the summary reports as of the end of the steps: the violations and the final state."""
    view = runtime.view()
    return {
        "violations": runtime.violations(),
        "final": {"partitions": plain(view.partitions()), "brokers": plain(view.brokers()), "quorum": plain(view.quorum())},
    }


def build_summary(
    scenario: Scenario,
    runtime: Any,
    failures: list[Failure],
    wall_s: float,
    replay: str,
    availability: AvailabilityTracker | None = None,
    at_end: dict[str, Any] | None = None,
) -> dict[str, Any]:
    violations = at_end["violations"] if at_end is not None else []
    violated = {v["invariant"] for v in violations}
    epilogue = [v for v in runtime.violations() if v["invariant"] not in violated] if runtime is not None else []
    ok = not failures and violated | {v["invariant"] for v in epilogue} == set(scenario.expect_violations)
    stats: dict[str, Any] = {}
    bootstrap_servers = None
    final: dict[str, Any] = at_end["final"] if at_end is not None else {"partitions": {}, "brokers": {}, "quorum": {}}
    if runtime is not None:
        view = runtime.view()
        history = view.history()
        runtime_stats = runtime.stats()
        stats = {
            "acked": history.get("acked"),
            "failed": history.get("failed"),
            "indeterminate": history.get("indeterminate"),
            "acked_lost": history.get("acked_lost"),
            "consumed": history.get("consumed"),
            "elections_clean": history.get("elections_clean"),
            "elections_unclean": history.get("elections_unclean"),
            "elections_elr": history.get("elections_elr"),
            "events": runtime_stats["events"],
            "sim_ms": runtime_stats["sim_ms"],
            "wall_s": round(wall_s, 3),
            "trace_hash": runtime_stats["trace_hash"],
            "messages_delivered": runtime_stats["messages_delivered"],
            "messages_dropped": runtime_stats["messages_dropped"],
        }
        clients = runtime.clients  # None only if the run broke before its clients existed
        if clients is not None:
            stats["produce_latency_ms"] = clients.produce_latency().summary()
            load = clients.load_stats()
            if load is not None:
                stats["load"] = load
        if availability is not None:
            stats["availability"] = availability.report(runtime.now_ms)
        if "placement" in runtime_stats:
            stats["placement"] = runtime_stats["placement"]
        bootstrap_servers = runtime_stats.get("bootstrap_servers")
    return plain(
        {
            "scenario": scenario.name,
            "seed": scenario.seed,
            "runtime": scenario.runtime,
            "ok": ok,
            "failures": [f.as_dict() for f in failures],
            "violations": violations,
            # Invariants first broken after the last step (while the epilogue settled the load
            # and read the logs): listed apart, and counted in `ok` like the others.
            "epilogue_violations": epilogue,
            "expect_violations": list(scenario.expect_violations),
            "stats": stats,
            "final": final,
            "replay": replay,
            **({"bootstrap_servers": bootstrap_servers} if bootstrap_servers else {}),
        }
    )
