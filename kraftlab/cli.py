"""The `kraftlab` command (docs/reference/cli.md).

Exit codes: 0 every expectation held and no unexpected invariant violation; 1 an expectation
failed or an invariant was violated (the replay command is printed); 2 the input is invalid
(nothing runs, nothing is written).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from actors.runtime import interrupts
from kraftlab import demo as demo_mod
from kraftlab.runner import (RunResult, RunSetupError, default_run_dir, kernel_faults_refusal, listeners_refusal, out_dir_problem,
                             out_dir_refusal, run_scenario)
from workloads.scenario.loading import ScenarioError, library_scenarios, load_scenario, parse_yaml
from workloads.scenario.schema import Scenario


def _console(stderr: bool = False) -> Console:
    # Rich lays out for 80 columns when the output is not a terminal (a log, a pipe, CI): the
    # per-cell table's labels (matrix values) would be cut to "cluster.protoc…". Wider there.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or "COLUMNS" in os.environ else 200
    return Console(stderr=stderr, width=width)


out = _console()
err = _console(stderr=True)


def _input_error(message: str) -> None:
    # The message quotes the user's input and the schema's words ("[first, last]"): not markup.
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
    sys.exit(2)


def _refuse_unreachable_ray(address: str | None) -> None:
    """Exit 2 before anything runs when --address (or RAY_ADDRESS) names no reachable Ray cluster."""
    from actors.runtime.ray.adapter import address_problem  # Ray is only loaded when used

    problem = address_problem(address, os.environ)
    if problem is not None:
        _input_error(problem)


def _refuse_hosts_without_kernel_faults(address: str | None) -> None:
    """Exit 2 before anything runs when the Ray cluster's hosts cannot make kernel faults."""
    from actors.runtime.ray import adapter

    adapter.connect(address)
    problems = adapter.kernel_fault_problems()
    if problems:
        _input_error("--faults kernel: the cluster's hosts cannot make kernel faults: " + "; ".join(problems))


def _refuse_unusable_out(out_dir: Path) -> None:
    problem = out_dir_problem(out_dir)
    if problem is not None:
        _input_error(problem)


FAULTS_OPTION = click.option(
    "--faults", type=click.Choice(["emulated", "kernel"]), default="emulated", show_default=True,
    help="Ray runs: who makes network faults and crashes: kraftlab's own send path (emulated), or the hosts' "
         "packet filters and SIGKILL (kernel: root, nftables, hosts that lend node addresses, as `kraftlab testbed` makes).")


class KraftlabGroup(click.Group):
    """Ctrl-C and SIGTERM end a command with a line saying so and exit 130 or 143 (after the
    command's own clean-up ran: actors/runtime/interrupts.py), not click's "Aborted!" and exit 1,
    the code of a failed expectation."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            what = "terminated (SIGTERM)" if interrupts.terminated(exc) else "interrupted (Ctrl-C)"
            output = interrupts.output()
            click.echo(f"{what}: stopped" + (f"; {output.stopped_line()}" if output is not None else ""), err=True)
            raise click.exceptions.Exit(interrupts.exit_code(exc)) from None


@click.group(cls=KraftlabGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kraftlab")
def main() -> None:
    """kraftlab: a laboratory for the Apache Kafka replication protocol in KRaft mode."""
    interrupts.install()


@main.command()
@click.argument("scenario")
@click.option("--runtime", type=click.Choice(["sim", "ray"]), default=None, help="Override the scenario's runtime.")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Override the scenario's seed.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Run directory (default runs/<name>-<seed>-<time>/).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key by dotted path.")
@click.option("--address", default=None, help="Ray cluster to join (runtime ray); default RAY_ADDRESS, else an embedded local Ray.")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=None, help="Serve the run's metrics live for Prometheus on this port (0: any free one).")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address the metrics server binds to.")
@FAULTS_OPTION
def run(scenario: str, runtime: str | None, seed: int | None, out_dir: Path | None, overrides: tuple[str, ...], address: str | None,
        metrics_port: int | None, metrics_host: str, faults: str) -> None:
    """Run SCENARIO (a file, or a name from `kraftlab scenarios`)."""
    try:
        sc, path = load_scenario(scenario, overrides, seed=seed, runtime=runtime)
    except ScenarioError as exc:
        _input_error(str(exc))
        return
    if faults == "kernel" and (refusal := kernel_faults_refusal(sc)) is not None:
        _input_error(f"{scenario}: {refusal}")
    if (refusal := listeners_refusal(sc)) is not None:
        _input_error(f"{scenario}: {refusal}")
    _run_and_report(sc, scenario, overrides, out_dir, address, metrics_port, metrics_host, faults)


def _run_and_report(sc: Scenario, source: str, overrides: tuple[str, ...], out_dir: Path | None, address: str | None = None,
                    metrics_port: int | None = None, metrics_host: str = "127.0.0.1", faults: str = "emulated") -> RunResult:
    if out_dir is not None and (refusal := out_dir_refusal(Path(out_dir))) is not None:
        _input_error(refusal)  # before the run's header: nothing runs
    out_dir = Path(out_dir) if out_dir is not None else default_run_dir(sc)
    interrupts.record_into(out_dir, "the run", complete_when="summary.json")
    out.print(f"[bold]{sc.name}[/]  seed={sc.seed}  runtime={sc.runtime}  steps={len(sc.steps)}", highlight=False)
    try:
        with out.status("running…") as status:
            result = run_scenario(
                sc,
                source=source,
                overrides=overrides,
                out_dir=out_dir,
                on_step=lambda i, step: status.update(f"step {i}: {step.kind()}"),
                address=address,
                metrics_port=metrics_port,
                metrics_host=metrics_host,
                on_metrics_url=lambda url: out.print(f"metrics: {url}", highlight=False),
                on_bootstrap_servers=lambda servers: out.print(f"bootstrap servers (Kafka clients): {servers}", highlight=False),
                faults=faults,
            )
    except RunSetupError as exc:
        _input_error(str(exc))
        raise  # unreachable
    _print_summary(result)
    sys.exit(0 if result.ok else 1)


def _print_summary(result: RunResult) -> None:
    s = result.summary
    table = Table(show_header=False, box=None)
    table.add_row("result", "[green]ok[/]" if s["ok"] else "[red]FAILED[/]")
    for key in ("acked", "failed", "acked_lost", "consumed", "events", "sim_ms", "wall_s", "trace_hash"):
        value = s["stats"].get(key)
        table.add_row(key, "-" if value is None else str(value))
    out.print(table)
    for f in s["failures"]:
        out.print(f"[red]failure[/] step {f['step']} ({f['kind']}): {f['detail']}", highlight=False)
    for v in s["violations"]:
        expected = v["invariant"] in s["expect_violations"]
        tag = "[yellow]expected violation[/]" if expected else "[red]violation[/]"
        out.print(f"{tag} {v['invariant']} at {v['at_ms']} ms: {v['detail']}", highlight=False)
    for v in s.get("epilogue_violations", []):
        expected = v["invariant"] in s["expect_violations"]
        tag = "[yellow]expected violation[/]" if expected else "[red]violation[/]"
        out.print(f"{tag} after the last step: {v['invariant']} at {v['at_ms']} ms: {v['detail']}", highlight=False)
    missing = set(s["expect_violations"]) - {v["invariant"] for v in s["violations"] + s.get("epilogue_violations", [])}
    for name in sorted(missing):
        out.print(f"[red]expected violation did not happen:[/] {name}", highlight=False)
    out.print(f"run directory: {result.run_dir}", highlight=False)
    if not s["ok"]:
        out.print(f"replay: {s['replay']}", highlight=False)


@main.command()
def scenarios() -> None:
    """List the built-in scenario library."""
    out.print(_library_table(library_scenarios()))


def _library_table(library: dict[str, Path]) -> Table:
    """Each library file's name and the first sentence of its description (it says what it shows)."""
    table = Table("name", "description")
    for name, path in library.items():
        raw = parse_yaml(path.read_text(), str(path))
        text = " ".join(str(raw.get("description", "")).split())
        first = text.split(". ")[0].rstrip(".")
        table.add_row(name, first + ("." if first else ""))
    return table


@main.command()
@click.argument("campaign_file", metavar="CAMPAIGN")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Campaign directory (default campaigns/<name>/); the same --out resumes.")
@click.option("--parallel", type=click.IntRange(min=0), default=None,
              help="Runs in flight at once (default: 2 per Ray CPU for simulator runs, 1 for runtime ray); 0: one at a time in this process, without Ray.")
@click.option("--address", default=None, help="Ray cluster to run on; default RAY_ADDRESS, else an embedded local Ray.")
@click.option("--print-schedule", "print_seed", type=click.IntRange(min=0), default=None, metavar="SEED",
              help="Print the load and fault schedule SEED draws (first cell), and run nothing.")
@click.option("--seeds", "seed_count", type=click.IntRange(min=1), default=None, metavar="N",
              help="How many seeds each cell runs, replacing the file's `seeds` (from --first-seed, or the file's first).")
@click.option("--first-seed", type=click.IntRange(min=0), default=None, metavar="K",
              help="The first seed (default: the file's first, 0 for `seeds: N`); with the file's count unless --seeds.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario key in every run (as `kraftlab run --set`; it joins the file's `set`).")
@click.option("--minimize-budget", type=click.IntRange(min=0), default=40, show_default=True, help="Most candidate runs per failure signature when minimizing.")
@click.option("--keep-runs", type=click.Choice(["all", "failures"]), default="all", show_default=True,
              help="failures: remove the history and metrics of runs that found nothing (their scenario, summary and results row stay).")
@FAULTS_OPTION
def campaign(campaign_file: str, out_dir: Path | None, parallel: int | None, address: str | None, print_seed: int | None,
             seed_count: int | None, first_seed: int | None, overrides: tuple[str, ...], minimize_budget: int, keep_runs: str,
             faults: str) -> None:
    """Run CAMPAIGN (a file, or a name from `kraftlab campaigns`): its matrix × seeds, with faults and
    load drawn from each seed; resumable with the same --out."""
    from kraftlab.campaign.command import execute_campaign, kernel_faults_refusal, print_summary
    from kraftlab.campaign.orchestrate import default_out
    from workloads.campaign.generate import check_every_cell, plan_run
    from workloads.campaign.spec import CampaignError, load_campaign

    try:
        loaded = load_campaign(campaign_file, seeds=seed_count, first_seed=first_seed, overrides=overrides)
        check_every_cell(loaded)
    except CampaignError as exc:
        _input_error(str(exc))
        return
    if print_seed is not None:
        out.print(plan_run(loaded, loaded.spec.cells()[0], print_seed).schedule, highlight=False)
        return
    if faults == "kernel" and (refusal := kernel_faults_refusal(loaded)) is not None:
        _input_error(f"{campaign_file}: {refusal}")
    target = out_dir if out_dir is not None else default_out(loaded, seed_count is not None or first_seed is not None, overrides)
    _refuse_unusable_out(target)
    interrupts.record_into(target, "the campaign", complete_when="summary.json")
    if parallel != 0:  # 0: every run in this process, without Ray
        _refuse_unreachable_ray(address)
    if faults == "kernel":
        _refuse_hosts_without_kernel_faults(address)
    try:
        summary = execute_campaign(loaded, target, parallel=parallel, address=address, console=out, minimize_budget=minimize_budget,
                                   keep_runs=keep_runs, faults=faults)
    except CampaignError as exc:
        _input_error(str(exc))
        return
    print_summary(summary, out)
    sys.exit(0 if summary["ok"] else 1)


@main.command()
def campaigns() -> None:
    """List the built-in campaign library."""
    from workloads.campaign.spec import campaign_library

    out.print(_library_table(campaign_library()))


@main.command()
@click.option("--runtime", type=click.Choice(["ray", "sim"]), default="ray", show_default=True, help="ray: an embedded local Ray (or --address); sim: the simulator, in a second.")
@click.option("--address", default=None, help="Ray cluster to join; default RAY_ADDRESS, else an embedded local Ray.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Folder for the two run directories (default runs/demo-<time>/).")
@click.option("--analyze/--no-analyze", "analyze_too", default=True, show_default=True, help="End with `kraftlab analyze` of both histories (Spark).")
@click.option("--engine", type=click.Choice(["raydp", "local"]), default=None, help="Spark for the analysis: raydp (default with --runtime ray) or local (default with --runtime sim).")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=None, help="Serve each run's metrics live: ELR on at PORT, ELR off at PORT+1 (0: any free ports).")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address the metrics servers bind to.")
@click.option("--client", type=click.Choice(list(demo_mod.CLIENT_OVERRIDES)), default="kraftlab", show_default=True,
              help="Who runs the load: kraftlab's own clients, or librdkafka (confluent-kafka clients against the brokers' Kafka listeners; --runtime ray only).")
@FAULTS_OPTION
def demo(runtime: str, address: str | None, out_dir: Path | None, analyze_too: bool, engine: str | None,
         metrics_port: int | None, metrics_host: str, client: str, faults: str) -> None:
    """The default job: Last Replica Standing under load, ELR on vs off, compared."""
    if faults == "kernel" and runtime != "ray":
        _input_error("--faults kernel: only with --runtime ray (the simulator makes its own faults)")
    if client != "kraftlab" and runtime != "ray":
        _input_error(f"--client {client}: real Kafka clients need --runtime ray (they run on real time against the brokers' "
                     "Kafka listeners, which the simulator does not have)")
    if out_dir is not None:
        _refuse_unusable_out(out_dir)
    if out_dir is not None and out_dir.exists() and any(out_dir.iterdir()):
        _input_error(f"--out {out_dir}: the folder exists and is not empty")
    if runtime == "ray" or (analyze_too and engine == "raydp"):  # else no Ray: runs in the simulator, local Spark
        _refuse_unreachable_ray(address)
    if faults == "kernel":
        _refuse_hosts_without_kernel_faults(address)
    out_dir = out_dir if out_dir is not None else demo_mod.default_root()
    interrupts.record_into(out_dir, "the two runs")
    out.print(f"[bold]Last Replica Standing[/] (KIP-966) under acks=all load on page-cache storage, ELR on vs off  runtime={runtime}"
              + (f"  load client={client}" if client != "kraftlab" else ""), highlight=False)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[step]}"), TimeElapsedColumn())
    with Progress(*columns, console=out) as progress:
        tasks = {variant: progress.add_task(variant, total=None, step="starting the cluster") for variant, _ in demo_mod.VARIANTS}

        def on_progress(variant: str, index: int, steps: int, kind: str) -> None:
            progress.update(tasks[variant], completed=index, total=steps, step=kind)

        try:
            rows = demo_mod.run_demo(runtime=runtime, address=address, out_root=out_dir, on_progress=on_progress,
                                     metrics_port=metrics_port, metrics_host=metrics_host, faults=faults, client=client,
                                     on_metrics_url=lambda variant, url: progress.console.print(f"metrics ({variant}): {url}", highlight=False))
        except RunSetupError as exc:
            _input_error(str(exc))
            return
    if analyze_too:
        engine = engine or ("raydp" if runtime == "ray" else "local")
        with out.status(f"analyzing both histories with Spark ({engine})…"):
            rows = demo_mod.analyze_demo(rows, engine, address)
    table = Table("", "acked", "lost", "offline s", "unavail. s", "rec/s", "p99 ms", "as expected")
    for r in rows:
        p99 = "-" if r.p99_ms is None else f"{r.p99_ms:,.0f}"
        lost = f"[red]{r.acked_lost:,}[/]" if r.acked_lost else "0"
        table.add_row(r.variant, f"{r.acked:,}", lost, f"{r.offline_s:.1f}", f"{r.unavailable_s:.1f}", f"{r.records_per_s:,.0f}", p99, "[green]yes[/]" if r.ok else "[red]no[/]")
    out.print(table)
    out.print("lost: acknowledged (acks=all) records missing from the log at the end; unavail.: offline or ISR below "
              "min.insync.replicas (acks=all refused); rec/s: acknowledged per second of load; p99: produce latency, "
              "handed over -> acknowledged.", highlight=False, style="dim")
    if analyze_too:
        history = Table("", "history (Spark)", "anomalies found in the history (records)")
        for r in rows:
            valid = {True: "[green]valid[/]", False: "[red]INVALID[/]"}.get(r.analysis["valid"], "[yellow]unknown[/]")
            history.add_row(r.variant, valid, ", ".join(f"{n} {c:,}" for n, c in r.anomalies().items()) or "none")
        out.print(history)
        out.print("`kraftlab analyze` of each run's event history: Jepsen-style anomalies (docs: Reference, "
                  "Anomalies and invariants), records by identity (producer, sequence), counted by Spark.", highlight=False, style="dim")
    out.print("ELR keeps broker 2, which has every acknowledged record, as the only leader candidate and waits for it; "
              "without ELR the crashed leader is elected again, sooner, with the records its host lost.", highlight=False)
    for r in rows:
        report = r.run_dir / "analysis" / "report.html"
        out.print(f"{r.variant}: {r.run_dir}" + (f"  (report: {report})" if r.analysis is not None else ""), highlight=False)
        for problem in (*r.problems, *r.analysis_problems()):
            out.print(f"  [red]not as expected:[/] {problem}", highlight=False)
    sys.exit(0 if all(r.ok and not r.analysis_problems() for r in rows) else 1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Output folder (default RUN_DIR/analysis).")
@click.option("--engine", type=click.Choice(["raydp", "local"]), default="raydp", show_default=True, help="raydp: Spark on Ray (embedded local Ray, or --address); local: plain PySpark on this machine's cores.")
@click.option("--address", default=None, help="Ray cluster to join (engine raydp); default RAY_ADDRESS, else an embedded local Ray.")
def analyze(run_dir: Path, out_dir: Path | None, engine: str, address: str | None) -> None:
    """Check the event history of RUN_DIR (a run, or a campaign directory: every run as one
    dataset) with Spark; write checks.json and windows.parquet (docs/reference/analysis.md)."""
    # Imported here: Spark's modules are heavy and no other command needs them.
    from observability.analysis.analyze import analyze_run
    from observability.analysis.errors import AnalysisInputError

    out_dir = out_dir if out_dir is not None else run_dir / "analysis"
    _refuse_unusable_out(out_dir)
    interrupts.record_into(out_dir, "the analysis", complete_when="checks.json")
    if engine == "raydp":
        _refuse_unreachable_ray(address)
    try:
        with out.status(f"analyzing with Spark ({engine})…"):
            if engine == "raydp":
                from kraftlab.spark_on_ray import analyze_on_ray

                checks, timings = analyze_on_ray(run_dir, out_dir, address)
            else:
                checks, timings = analyze_run(run_dir, out_dir, engine=engine)
    except AnalysisInputError as exc:
        _input_error(str(exc))
        return
    except Exception:
        if interrupts.interrupted():  # a py4j call that lost its JVM to the same Ctrl-C
            raise interrupts.as_exception() from None
        raise
    _print_checks(checks, timings, out_dir / "checks.json")
    # As `kraftlab run`: 0 when the history checked out; 1 when it did not, or could not be
    # decided ("unknown": an incomplete history is no pass); 2 (above) for bad input.
    sys.exit(0 if checks["valid"] is True else 1)


def _print_checks(checks: dict, timings: dict[str, float], path: Path) -> None:
    valid = checks["valid"]
    shown = {True: "[green]valid[/]", False: "[red]INVALID[/]"}.get(valid, "[yellow]unknown[/]")
    runs = f"  runs={checks['runs']:,}" if "cells" in checks else ""
    out.print(f"history: {shown}  events={checks['events']:,}{runs}  engine={checks['engine']}", highlight=False)
    if "reason" in checks:
        out.print(f"  why unknown: {checks['reason']}", highlight=False)
    not_kept = checks.get("stats", {}).get("runs_not_kept")
    if not_kept:
        out.print(f"  {not_kept:,} runs that found nothing were run with --keep-runs failures: their histories were not kept, "
                  "and the figures here leave them out (theirs are in results.parquet)", highlight=False)
    campaign = "cells" in checks
    table = Table("anomaly", "count", *(["runs"] if campaign else []), "first example")
    for name, a in checks["anomalies"].items():
        example = json.dumps(a["examples"][0]) if a["examples"] else ""
        runs_showing = [f"{a['runs']:,}"] if campaign else []
        table.add_row(name, f"[red]{a['count']:,}[/]" if a["count"] else "0", *runs_showing, example)
    out.print(table)
    for name, inv in checks["invariants"].items():
        where = f"in {inv['runs']:,} runs" if campaign else f"source: {inv['source']}"
        out.print(f"[red]invariant[/] {name}: {inv['count']:,} ({where})", highlight=False)
    if campaign:
        _print_cells(checks["cells"])
    out.print(f"Spark start {timings['spark_start_s']:.1f} s, total {timings['total_s']:.1f} s; checks: {path}", highlight=False)
    phases = [(k[:-2], v) for k, v in timings.items() if k not in ("spark_start_s", "total_s")]
    if phases:
        out.print("  time per phase: " + ", ".join(f"{name} {s:.1f} s" for name, s in phases), highlight=False, style="dim")
    out.print(f"report: {path.parent / 'report.html'}", highlight=False)


def _print_cells(cells: list[dict]) -> None:
    """A campaign's table per matrix cell: runs, verdicts, and the runs showing each finding."""
    table = Table("cell", "runs", "valid", "invalid", "unknown", "found (runs)", "acked", "rec/s")
    for c in cells:
        label = ", ".join(f"{k}={v}" for k, v in c["cell"].items()) or "(no matrix)"
        found = {**{n: k for n, k in c["anomalies"].items() if k}, **{n: k for n, k in c["invariants"].items() if k}}
        rate = f"{c['throughput_rec_s']:,.0f}" if c["throughput_rec_s"] is not None else ""
        table.add_row(label, f"{c['runs']:,}", f"{c['valid']:,}", f"{c['invalid']:,}", f"{c['unknown']:,}",
                      ", ".join(f"{n} ({k})" for n, k in found.items()), f"{c['acked']:,}", rate)
    out.print(table)


@main.group()
def metrics() -> None:
    """Prometheus metrics of runs (metrics.om)."""


@metrics.command("load")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--tsdb", "tsdb", type=click.Path(path_type=Path), required=True, help="Prometheus TSDB folder to write blocks into.")
def metrics_load(run_dir: Path, tsdb: Path) -> None:
    """Load RUN_DIR's metrics.om (or every run's of a campaign directory, each with a `run` label)
    into a Prometheus TSDB folder with promtool; then start Prometheus on it."""
    from observability.metrics.tsdb import MetricsInputError, load_into_tsdb

    try:
        reports = load_into_tsdb(run_dir, tsdb)
    except MetricsInputError as exc:
        _input_error(str(exc))
        return
    out.print(f"loaded {len(reports)} metrics.om into {tsdb}; start Prometheus on it:", highlight=False)
    out.print(f"  prometheus --storage.tsdb.path={tsdb} --config.file=infra/prometheus/empty.yml "
              "--web.listen-address=127.0.0.1:9090", highlight=False)
    out.print("simulated runs are stamped from 2023-11-14T22:13:20Z (time 0); query that range.", highlight=False, style="dim")


DASHBOARDS_DIR = Path(__file__).resolve().parents[1] / "infra" / "grafana" / "dashboards"


@main.group()
def dashboards() -> None:
    """Grafana dashboards of the metrics (infra/grafana/dashboards/*.json)."""


@dashboards.command("generate")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=DASHBOARDS_DIR, show_default=True, help="Folder for the JSON files.")
def dashboards_generate(out_dir: Path) -> None:
    """Write every dashboard's JSON model (built in observability/metrics/dashboards.py)."""
    from observability.metrics.dashboards import write

    for path in write(out_dir):
        out.print(f"wrote {path}", highlight=False)


@dashboards.command("push")
@click.option("--url", default=None, help="Grafana server, e.g. http://127.0.0.1:3000 (the token comes from GRAFANA_TOKEN only).")
@click.option("--from", "from_dir", type=click.Path(path_type=Path), default=None, help="Upload the JSON files of this folder instead of building them now.")
def dashboards_push(url: str | None, from_dir: Path | None) -> None:
    """Upload the dashboards to a Grafana server (folder `kraftlab`), with the token in GRAFANA_TOKEN."""
    import os

    from kraftlab.dashboards import DashboardsError, push

    token = os.environ.get("GRAFANA_TOKEN", "")
    if not url:
        _input_error("--url: missing (the Grafana server, e.g. http://127.0.0.1:3000)")
    if not token:
        _input_error("GRAFANA_TOKEN: not set (a Grafana service account token; it is read from the environment only)")
    try:
        uids = push(url, token, from_dir)
    except DashboardsError as exc:
        _input_error(str(exc))
        return
    except Exception as exc:  # grafana-client's errors, or the server unreachable
        err.print(f"[bold red]error:[/] {escape(f'{url}: {type(exc).__name__}: {exc}')}", highlight=False, soft_wrap=True)
        sys.exit(1)
    out.print(f"pushed {', '.join(uids)} to {url} (folder kraftlab)", highlight=False)


@dashboards.command("render")
@click.option("--prometheus", default="http://127.0.0.1:9090", show_default=True, help="Prometheus holding the runs (e.g. started on `kraftlab metrics load`'s TSDB).")
@click.option("--start", type=float, default=None, help="Range start, Unix seconds (default: simulated time 0, 2023-11-14T22:13:20Z).")
@click.option("--end", type=float, default=None, help="Range end, Unix seconds (default: start + 60).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("docs"), show_default=True, help="Folder for dashboard-<name>.png.")
def dashboards_render(prometheus: str, start: float | None, end: float | None, out_dir: Path) -> None:
    """Draw each dashboard's main panels with matplotlib from Prometheus (Grafana's queries, variables at All)."""
    from kraftlab.dashboards import DashboardsError, render_all
    from observability.metrics.openmetrics import SIM_EPOCH_S

    start = SIM_EPOCH_S if start is None else start
    end = start + 60 if end is None else end
    if end <= start:
        _input_error(f"--end {end} is not after --start {start}")
    try:
        paths = render_all(prometheus, start, end, out_dir)
    except DashboardsError as exc:
        _input_error(str(exc))
        return
    for path in paths:
        out.print(f"wrote {path}", highlight=False)


def _add_testbed() -> None:
    from kraftlab.testbed.command import testbed

    main.add_command(testbed)


_add_testbed()


def _add_cluster() -> None:
    from kraftlab.cluster_cli import cluster

    main.add_command(cluster)


_add_cluster()


@main.command()
def schema() -> None:
    """Print the JSON Schema of scenario files (for editors)."""
    click.echo(json.dumps(Scenario.model_json_schema(by_alias=True), indent=2))


if __name__ == "__main__":
    main()
