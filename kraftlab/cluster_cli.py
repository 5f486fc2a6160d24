"""The `kraftlab cluster` commands (kraftlab/cluster_command.py does the work)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from actors.runtime import interrupts
from kraftlab import cluster_command as cc
from kraftlab.runner import RunSetupError, default_run_dir, out_dir_refusal, run_scenario
from workloads.scenario.loading import ScenarioError, apply_overrides, load_scenario, validate

out = Console(highlight=False)
NAME_OPTION = click.option("--name", default=cc.DEFAULT_NAME, show_default=True,
                           help="Which cluster (several may be up at once, each with its own name).")


def _input_error(message: str) -> None:
    Console(stderr=True, highlight=False).print(f"[red]error:[/] {message}")
    sys.exit(2)


@click.group()
def cluster() -> None:
    """A cluster to point Kafka clients at: up, faults by hand, status, down."""


@cluster.command()
@click.argument("scenario", required=False)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Run directory (default runs/<name>-<seed>-<time>/).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key by dotted path.")
@click.option("--address", default=None, help="Ray cluster to join; default RAY_ADDRESS, else an embedded local Ray.")
@NAME_OPTION
def up(scenario: str | None, out_dir: Path | None, overrides: tuple[str, ...], address: str | None, name: str) -> None:
    """Start SCENARIO's cluster (default: 3 brokers, 3 voters, topic t with 3 partitions, RF 3) on
    Ray with Kafka listeners on every broker, run its steps, print the bootstrap servers and serve
    until `kraftlab cluster down` (or Ctrl-C); then write the run's summary with its verdict."""
    # Every cluster served this way has Kafka listeners: that is what it is for.
    overrides = (*overrides, "cluster.listeners=[kafka]")
    try:
        if scenario is None:
            raw = apply_overrides(copy.deepcopy(cc.DEFAULT_SCENARIO), overrides, "kraftlab cluster up")
            sc = validate(raw, "kraftlab cluster up", None, overrides)
            source = "cluster"
        else:
            sc, _ = load_scenario(scenario, overrides, runtime="ray")
            source = scenario
    except ScenarioError as exc:
        _input_error(str(exc))
        return
    out_dir = Path(out_dir) if out_dir is not None else default_run_dir(sc)
    if (refusal := out_dir_refusal(out_dir)) is not None:
        _input_error(refusal)
    try:
        server = cc.ControlServer(name, out_dir, sc)
    except RuntimeError as exc:
        _input_error(str(exc))
        return
    interrupts.record_into(out_dir, "the cluster", complete_when="summary.json")
    out.print(f"[bold]{sc.name}[/]  cluster {name!r}  steps={len(sc.steps)}")

    def serving(runtime, steps) -> None:
        server.announce(runtime.bootstrap_servers)
        out.print(f"serving; from another terminal: kraftlab cluster status|fault|down --name {name}")
        server.serve(runtime, steps, on_command=lambda text: out.print(text))

    try:
        result = run_scenario(sc, source=source, overrides=overrides, out_dir=out_dir, address=address, after_steps=serving,
                              on_bootstrap_servers=lambda servers: out.print(f"bootstrap servers (Kafka clients): {servers}"))
    except RunSetupError as exc:
        _input_error(str(exc))
        return
    finally:
        server.close()
    _print_verdict(result.summary, out_dir)
    sys.exit(0 if result.ok else 1)


def _print_verdict(summary: dict, run_dir: Path) -> None:
    stats = summary.get("stats", {})
    verdict = "[green]ok[/]" if summary.get("ok") else "[red]FAILED[/]"
    out.print(f"result {verdict}  acked {stats.get('acked')}  acked_lost {stats.get('acked_lost')}  "
              f"violations {sorted({v['invariant'] for v in summary.get('violations', [])}) or 'none'}")
    out.print(f"run directory: {run_dir}")


@cluster.command()
@click.argument("kind", type=click.Choice(["isolate", "heal", "crash", "restart", "partition", "link"]))
@click.argument("args", nargs=-1)
@click.option("--mode", type=click.Choice(["process", "os", "disk"]), default="process", show_default=True, help="crash: what the crash loses.")
@click.option("--drop", type=click.FloatRange(0, 1), default=1.0, show_default=True, help="link: the share of messages dropped.")
@click.option("--delay-ms", type=click.FloatRange(min=0), default=0.0, show_default=True, help="link: the delay added.")
@NAME_OPTION
def fault(kind: str, args: tuple[str, ...], mode: str, drop: float, delay_ms: float, name: str) -> None:
    """Make a fault by hand in a running cluster: isolate NODE, heal [NODE], crash NODE [--mode],
    restart NODE, partition GROUP GROUP... (nodes comma-separated: b1,c1 b2,b3), link FROM TO
    [--drop] [--delay-ms]. A node is a name (b1, c2) or a selector (partition-leader:t-0). Each
    is a `fault` row of the run's history with source cli."""
    try:
        step = cc.fault_step(kind, args, mode, drop, delay_ms)
        reply = cc.request(name, {"op": "step", "step": step})
    except (ValueError, cc.NoCluster) as exc:
        _input_error(str(exc))
        return
    if not reply.get("ok"):
        _input_error(f"{kind}: {reply.get('error')}")
    out.print(f"{kind} {' '.join(args)}: done")


@cluster.command()
@NAME_OPTION
def status(name: str) -> None:
    """The running cluster: its nodes, each partition's leader, ISR and ELR, the controllers'
    leader, and the bootstrap servers."""
    try:
        reply = cc.request(name, {"op": "status"})
    except cc.NoCluster as exc:
        _input_error(str(exc))
        return
    out.print(f"bootstrap servers: {reply['bootstrap_servers']}")
    out.print("running: " + " ".join(n if up else f"[red]{n} (down)[/]" for n, up in reply["running"].items()))
    quorum = reply["quorum"]
    out.print(f"controllers' leader: c{quorum.get('leader')} (epoch {quorum.get('epoch')})")
    table = Table("partition", "leader", "epoch", "isr", "elr", "hwm")
    for key, p in reply["partitions"].items():
        table.add_row(key, str(p.get("leader")), str(p.get("leader_epoch")), str(p.get("isr")), str(p.get("elr")), str(p.get("hwm")))
    out.print(table)
    out.print(f"run directory: {reply['run_dir']}")


@cluster.command()
@NAME_OPTION
def down(name: str) -> None:
    """Stop the running cluster: its clients settle, every log is read, the checks run, and the
    summary is written with the verdict; exits as `kraftlab run` does (0 ok, 1 not)."""
    try:
        reply = cc.request(name, {"op": "down"})
    except cc.NoCluster as exc:
        _input_error(str(exc))
        return
    run_dir = Path(reply["run_dir"])
    out.print("stopping…")
    summary = cc.wait_until_down(name, run_dir)
    if summary is None:
        _input_error(f"the cluster did not finish within 10 minutes; see {run_dir}")
        return
    _print_verdict(summary, run_dir)
    sys.exit(0 if summary.get("ok") else 1)
