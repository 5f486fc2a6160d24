"""How well a campaign finds the bugs kraftlab ships as protocol switches: for each switch turned
off, how many seeds catch it; with every switch on, how many seeds raise a false alarm.

It runs the library's `switches` campaign (each switch off, one cell each) and `hunt` (every switch
on), on a held-out seed range that no design work looked at (default: seeds from 100,000 on), with
the generator the campaigns name, through the same code as `kraftlab campaign`, and prints:

- per switch off: runs, catches (runs showing a finding the campaign's `expect` names for that
  cell), the runs that lost acknowledged records (`lost-write`, caught or not), the per-seed rate
  with its Wilson 95% interval, the mean and median seeds-to-catch (from each seed of the range,
  how many seeds until one catches, that one included), and how many blocks of 10 consecutive
  seeds caught it at least once;
- every switch on (`hunt`): runs, runs with an unexcused finding (false alarms), and their
  signatures;
- the hunting rate: runs per minute per core (the campaigns' wall time, and the cores Ray had).

    python bench/campaign_power.py [--seeds 50] [--hunt-seeds 1000] [--first-seed 100000]
                                   [--switches elr,prevote,...] [--parallel N] [--out DIR]

`--out` keeps the campaigns' directories (results, runs that found something, minimal scenarios);
run again with the same `--out`, a campaign resumes. A switch's table row takes the `switches`
cells; `broker_epoch_in_alter_partition` (KIP-903) the `switches-kip-903` campaign's cell.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from rich.console import Console

from kraftlab.campaign.command import execute_campaign
from kraftlab.campaign.report import wilson_interval
from workloads.campaign.spec import campaign_library, load_campaign

# Each switch, the campaign and variant that turn it off.
SWITCHES = {
    "elr": ("switches", "elr-off"),
    "maximal_isr": ("switches", "maximal-isr-off"),
    "strict_min_isr": ("switches", "strict-min-isr-off"),
    "leader_epoch_truncation": ("switches", "leader-epoch-truncation-off"),
    "prevote": ("switches", "prevote-off"),
    "check_quorum": ("switches", "check-quorum-off"),
    "raft_fsync": ("switches", "raft-fsync-off"),
    "broker_epoch_in_alter_partition": ("switches-kip-903", "kip-903-off"),
}


def seeds_to_catch(caught: list[bool]) -> list[int]:
    """From each seed of the range, how many seeds until one that catches (it included); starts
    with no catch after them are left out."""
    out, next_catch = [], None
    for i in range(len(caught) - 1, -1, -1):
        if caught[i]:
            next_catch = i
        if next_catch is not None:
            out.append(next_catch - i + 1)
    return out


def blocks_caught(caught: list[bool], size: int = 10) -> tuple[int, int]:
    blocks = [caught[i:i + size] for i in range(0, len(caught) - size + 1, size)]
    return sum(any(b) for b in blocks), len(blocks)


def run(name: str, variants: list[str] | None, seeds: int, first: int, out: Path, parallel: int | None, console: Console):
    """The library campaign `name` (only `variants`, if given) over the range, written as a file of
    its own in `out` and run as `kraftlab campaign` runs it: its spec, rows, wall seconds and how
    many runs this call made (the rows of a resumed campaign's earlier calls are not among them)."""
    raw = yaml.safe_load(campaign_library()[name].read_text())
    raw["seeds"] = [first, first + seeds - 1]
    if variants is not None:
        raw["variants"] = {v: o for v, o in raw["variants"].items() if v in variants}
        raw["expect"] = [r for r in raw.get("expect", []) if r.get("when", {}).get("variant") in raw["variants"]]
    label = f"{name}-{'-'.join(variants) if variants else 'all'}-{first}-{first + seeds - 1}"
    path = out / f"{label}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    campaign = load_campaign(str(path))
    done_before = results_rows(out / label)
    started = time.perf_counter()
    execute_campaign(campaign, out / label, parallel=parallel, address=None, console=console, minimize_budget=0, keep_runs="failures")
    wall = time.perf_counter() - started
    return campaign, pq.read_table(out / label / "results.parquet").to_pylist(), wall, results_rows(out / label) - done_before


def results_rows(directory: Path) -> int:
    """How many runs a campaign directory has results for (a resumed campaign skips them)."""
    log = directory / "results.jsonl"
    return sum(1 for _ in log.open()) if log.exists() else 0


def cores(parallel: int | None) -> int:
    """The cores the runs had: one with `--parallel 0` (in this process), else Ray's workers."""
    if parallel == 0:
        return 1
    return min(parallel, len(os.sched_getaffinity(0))) if parallel else len(os.sched_getaffinity(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=50, help="seeds per switch off")
    parser.add_argument("--hunt-seeds", type=int, default=1000, help="seeds with every switch on (0: skip)")
    parser.add_argument("--first-seed", type=int, default=100_000, help="the held-out range's first seed")
    parser.add_argument("--switches", default=",".join(SWITCHES), help="which switches, comma-separated")
    parser.add_argument("--parallel", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="keep the campaigns' directories here (default: a temporary folder)")
    args = parser.parse_args()
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="kraftlab-bench-power-") as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        chosen = [s for s in args.switches.split(",") if s]
        by_campaign: dict[str, list[str]] = {}
        for switch in chosen:
            by_campaign.setdefault(SWITCHES[switch][0], []).append(SWITCHES[switch][1])
        table, runs_total, wall_total = [], 0, 0.0
        for name, variants in by_campaign.items():
            campaign, rows, wall, ran = run(name, variants, args.seeds, args.first_seed, out, args.parallel, console)
            runs_total, wall_total = runs_total + ran, wall_total + wall
            for switch in chosen:
                if SWITCHES[switch][0] != name:
                    continue
                variant = SWITCHES[switch][1]
                wanted = {n for r in campaign.spec.expect if r.when.get("variant") == variant for n in (r.catch or [])}
                cell = sorted((r for r in rows if r.get("variant") == variant), key=lambda r: r["seed"])
                caught = [bool(wanted & set(r["violations"])) for r in cell]
                n, k = len(cell), sum(caught)
                lost = sum("lost-write" in r["violations"] for r in cell)
                low, high = wilson_interval(k, n)
                gaps = seeds_to_catch(caught)
                hit, blocks = blocks_caught(caught)
                table.append((switch, n, k, lost, k / n if n else 0.0, low, high, statistics.mean(gaps) if gaps else None,
                              statistics.median(gaps) if gaps else None, hit, blocks, " or ".join(sorted(wanted))))
        print(f"\nheld-out seeds {args.first_seed}..{args.first_seed + args.seeds - 1}, each switch off alone "
              f"(`switches` and `switches-kip-903`, faults drawn per seed as their files say)\n")
        print("| switch off | finding | runs | caught | runs with lost-write | per-seed rate [Wilson 95%] | mean seeds-to-catch | median | 10-seed blocks caught |")
        print("|---|---|---|---|---|---|---|---|---|")
        for switch, n, k, lost, rate, low, high, mean, median, hit, blocks, wanted in table:
            mean_s = f"{mean:.1f}" if mean is not None else "-"
            median_s = f"{median:g}" if median is not None else "-"
            print(f"| {switch} | {wanted} | {n} | {k} | {lost} | {rate:.2f} [{low:.2f}, {high:.2f}] | {mean_s} | {median_s} | {hit} of {blocks} |")
        if args.hunt_seeds:
            campaign, rows, wall, ran = run("hunt", None, args.hunt_seeds, args.first_seed, out, args.parallel, console)
            runs_total, wall_total = runs_total + ran, wall_total + wall
            alarms = [r for r in rows if r["status"] != "ok"]
            signatures: dict[str, int] = {}
            for r in alarms:
                signatures[r["signature"]] = signatures.get(r["signature"], 0) + 1
            excused = sum(1 for r in rows if r.get("excused"))
            print(f"\nevery switch on (`hunt`), seeds {args.first_seed}..{args.first_seed + args.hunt_seeds - 1}: "
                  f"{len(rows)} runs, {len(alarms)} with an unexcused finding (false alarms)"
                  + (f": {json.dumps(signatures)}" if signatures else "") + f"; {excused} runs with excused findings only")
        if runs_total:
            print(f"\nhunting rate: {runs_total} runs made by this call in {wall_total / 60:.1f} min on {cores(args.parallel)} cores = "
                  f"{runs_total / (wall_total / 60) / cores(args.parallel):.1f} runs/min per core")
        else:
            print("\nhunting rate: every run was already in --out (resumed): nothing made to time")


if __name__ == "__main__":
    main()
