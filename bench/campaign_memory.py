"""What the campaign driver holds for a campaign of `--runs` finished runs (the project's target:
"campaigns of 100,000 runs: design every reader for that").

It runs the library's `switches` campaign (8 cells) for 2 seeds in this process, for real rows of
the results log, then copies those rows into a log of `--runs` rows (new run ids and seeds; one
run in ten a failure, under one of a few signatures, so the report and the signatures have work).
Then, in a fresh process, it runs `kraftlab campaign` on that directory as a user resuming a
finished campaign would (`execute_campaign`, nothing left to run): the log read back, the
per-cell table, the signatures, the `expect` verdicts, summary.json and results.parquet rebuilt.
It prints that process's peak resident memory and its time, and the same for an empty log (what
Python and the imports alone hold), so the difference is what the runs cost.

    python bench/campaign_memory.py [--runs 100000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from workloads.campaign.spec import campaign_library

SIGNATURES = ["lost-write", "UncleanExclusion", "LeaderCompleteness+lost-write", "liveness", "HighWatermarkMonotonic"]


def real_rows(work: Path) -> tuple[Path, list[dict]]:
    from rich.console import Console

    from kraftlab.campaign.command import execute_campaign
    from workloads.campaign.spec import load_campaign

    spec = yaml.safe_load(campaign_library()["switches"].read_text())
    spec["seeds"] = 2
    spec["faults"]["duration_ms"] = 3000
    spec["faults"]["converge_ms"] = 10000
    spec.pop("expect", None)
    path = work / "campaign.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = work / "real"
    execute_campaign(load_campaign(str(path)), out, parallel=0, address=None, console=Console(quiet=True), minimize_budget=0)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return path, rows


def synthetic_campaign(work: Path, spec_path: Path, rows: list[dict], runs: int) -> Path:
    """A campaign directory whose log holds `runs` rows, every cell's seeds 0..runs/cells-1."""
    spec = yaml.safe_load(spec_path.read_text())
    cells = len(spec["variants"])
    seeds = max(1, runs // cells)
    spec["seeds"] = seeds
    out = work / f"c{runs}"
    out.mkdir()
    spec_file = out / "campaign.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    (out / "base-scenario.yaml").write_text((work / "real" / "base-scenario.yaml").read_text())
    (out / "runs").mkdir()
    by_cell = {r["cell"]: r for r in rows}
    with (out / "results.jsonl").open("w") as f:
        for seed in range(seeds if runs else 0):
            for cell in range(cells):
                row = dict(by_cell[cell], run=f"c{cell}-s{seed}", seed=seed)
                row["replay"] = row["replay"].replace("-s0/", f"-s{seed}/")
                if (seed * cells + cell) % 10 == 7:
                    sig = SIGNATURES[seed % len(SIGNATURES)]
                    row.update(status="violation", violations=sig.split("+"), signature=sig, first_violation_ms=1234.5)
                f.write(json.dumps(row) + "\n")
    return out


MEASURE = """
import resource, sys, time
from pathlib import Path
from rich.console import Console
from kraftlab.campaign.command import execute_campaign
from workloads.campaign.spec import load_campaign
out = Path(sys.argv[1])
started = time.perf_counter()
summary = execute_campaign(load_campaign(str(out / "campaign.yaml")), out, parallel=0, address=None,
                           console=Console(quiet=True), minimize_budget=0)
print(summary["done"], time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def measure(out: Path) -> tuple[int, float, float]:
    done, seconds, peak_mb = subprocess.run([sys.executable, "-c", MEASURE, str(out)], check=True, capture_output=True,
                                            text=True).stdout.split()
    return int(done), float(seconds), float(peak_mb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kraftlab-campaign-memory-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        spec_path, rows = real_rows(work)
        print(f"real rows: {len(rows)} ({time.perf_counter() - started:.1f} s); "
              f"a row is {sum(len(json.dumps(r)) for r in rows) / len(rows):,.0f} bytes of JSON")
        empty = synthetic_campaign(work, spec_path, rows, 0)
        full = synthetic_campaign(work, spec_path, rows, args.runs)
        log_mb = (full / "results.jsonl").stat().st_size / 1e6
        base = measure(empty)
        done, seconds, peak = measure(full)
        print(f"{'runs':>10} {'log MB':>8} {'seconds':>8} {'peak RSS MB':>12} {'per run':>10}")
        print(f"{0:>10,} {0:>8.1f} {base[1]:>8.1f} {base[2]:>12,.0f} {'':>10}")
        print(f"{done:>10,} {log_mb:>8.1f} {seconds:>8.1f} {peak:>12,.0f} {1024 * (peak - base[2]) / max(done, 1):>8.2f} KB")


if __name__ == "__main__":
    main()
