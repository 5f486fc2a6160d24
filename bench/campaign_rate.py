"""How fast `kraftlab campaign` runs the standard campaign (issue 15's target: 1,000 seeds × 60 s
simulated in under 15 minutes on 2 cores, about 67 runs per minute).

The standard campaign: the `random-faults` library scenario (3 brokers, 3 KRaft voters, 3
partitions, RF 3, MinISR 2, page cache) with 2 producers at 300 records/s in all (acks=all) and a
consumer, random OS and process crashes, isolations, partitions and lossy links for 55 s after its
5 s warm-up (60 s simulated), then the heal and the convergence epilogue. It runs `--seeds` seeds
through the same code as the command (simulator runs as Ray tasks on the embedded local Ray, or
in this process with `--parallel 0`), then prints:

- runs per minute and the projected time for 1,000 seeds;
- simulated seconds per wall second, for the whole campaign and inside a run (the simulator alone:
  the difference is scheduling, Ray and the driver);
- where one run's time goes (`--profile`: cProfile of one run in this process, by module);
- what the protocol alone costs (`--floor`): one run in this process as it is, then again with
  the online readers switched off (the invariant checks, the metrics, the availability tracker and
  the trace hash; the cluster view and the history's Parquet stay, the run needs them). The second
  figure bounds what any work on the readers could win: what is left is the brokers, the voters,
  the clients and the simulator.

    python bench/campaign_rate.py [--seeds 20] [--parallel N] [--profile] [--floor] [--address RAY_ADDRESS]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml
from rich.console import Console

from kraftlab.campaign.command import execute_campaign
from workloads.campaign.generate import plan_run
from workloads.campaign.spec import load_campaign

STANDARD = {
    "name": "standard",
    "scenario": "random-faults",
    "faults": {"kinds": ["crash_os", "crash_process", "isolate", "partition", "link"], "mean_interval_ms": 5000,
               "duration_ms": 55000, "converge_ms": 30000},
    "load": {"producers": 2, "consumers": 1, "rate_per_s": 300, "acks": "all"},
}


def profile_one(campaign_file: Path, out: Path) -> None:
    from kraftlab.runner import run_scenario

    campaign = load_campaign(str(campaign_file))
    plan = plan_run(campaign, campaign.spec.cells()[0], 0)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    result = run_scenario(plan.scenario(), source="bench", out_dir=out / "profiled")
    profiler.disable()
    wall = time.perf_counter() - started
    by_module: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tottime, _, _) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        parts = Path(filename).parts
        top = next((p for p in ("actors", "controller_quorum", "storage", "observability", "workloads", "kraftlab") if p in parts), None)
        key = "/".join(parts[parts.index(top):][:2]) if top else ("pyarrow" if "pyarrow" in filename else "python/other")
        by_module[key] += tottime
    total = sum(by_module.values())
    print(f"\none run profiled in this process: {wall:.2f} s wall ({result.summary['stats']['events']:,} events, "
          f"{result.summary['stats']['sim_ms'] / 1000:.1f} s simulated); time by module:")
    for key, seconds in sorted(by_module.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {key:<40s} {seconds:6.2f} s  {100 * seconds / total:5.1f}%")


def floor_one(campaign_file: Path, out: Path) -> None:
    from actors.runtime.sim import simulator, trace
    from kraftlab.runner import run_scenario

    campaign = load_campaign(str(campaign_file))
    plan = plan_run(campaign, campaign.spec.cells()[0], 0)
    as_is = run_scenario(plan.scenario(), source="bench", out_dir=out / "as-is").summary["stats"]
    needed = {"ClusterProjection", "CommittedHistory", "HistoryWriter"}
    event = trace.TraceRecorder.event
    check = simulator.Simulator._check_invariants

    def event_to_needed_sinks(self, at_ms, node, incarnation, ev):
        if not getattr(self, "_floor", False):
            self._floor = True
            self.sinks = [s for s in self.sinks if type(getattr(s, "__self__", s)).__name__ in needed]
            self._pack = lambda _entry: b""
        return event(self, at_ms, node, incarnation, ev)

    trace.TraceRecorder.event = event_to_needed_sinks
    simulator.Simulator._check_invariants = lambda self: None
    try:
        bare = run_scenario(plan.scenario(), source="bench", out_dir=out / "bare").summary["stats"]
    finally:
        trace.TraceRecorder.event = event
        simulator.Simulator._check_invariants = check
    print(f"\none run in this process ({as_is['events']:,} events, {as_is['sim_ms'] / 1000:.1f} s simulated): "
          f"{as_is['wall_s']:.2f} s as it is, {bare['wall_s']:.2f} s with the online readers off "
          f"(the checks, metrics, availability and trace hash: {100 * (1 - bare['wall_s'] / as_is['wall_s']):.0f}% of the run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=None)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--floor", action="store_true", help="Also time one run with the online readers switched off.")
    parser.add_argument("--address", default=None, help="A Ray cluster to run on (e.g. a fake multi-node cluster); default: the embedded local Ray.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kraftlab-bench-campaign-") as tmp:
        work = Path(tmp)
        campaign_file = work / "standard.yaml"
        campaign_file.write_text(yaml.safe_dump(STANDARD | {"seeds": args.seeds}))
        campaign = load_campaign(str(campaign_file))
        console = Console(stderr=True)
        started = time.perf_counter()
        summary = execute_campaign(campaign, work / "out", parallel=args.parallel, address=args.address, console=console, minimize_budget=0)
        wall = time.perf_counter() - started
        rows = [yaml.safe_load(line) for line in (work / "out" / "results.jsonl").read_text().splitlines()]
        sim_s = sum(r.get("stats.sim_ms") or 0 for r in rows) / 1000
        run_wall = [r.get("stats.wall_s") or 0 for r in rows]
        per_min = len(rows) / (wall / 60)
        print(f"\nstandard campaign, {len(rows)} runs ({summary['errors']} errors), "
              f"{sum(c['violation'] for c in summary['cells'])} with findings")
        print("| runs | wall s | runs/min | 1,000 seeds (projected) | sim s / wall s (campaign) | sim s / wall s (inside a run) | mean run wall s |")
        print("|---|---|---|---|---|---|---|")
        print(f"| {len(rows)} | {wall:.1f} | {per_min:.1f} | {1000 / per_min:.1f} min | {sim_s / wall:.1f} | "
              f"{sim_s / max(1e-9, sum(run_wall)):.1f} | {statistics.mean(run_wall):.2f} |")
        if args.profile:
            profile_one(campaign_file, work)
        if args.floor:
            floor_one(campaign_file, work)


if __name__ == "__main__":
    main()
