"""Scale across emulated hosts: the standard campaign's runs/min on 1, 2 and 4 testbed hosts, and
a `runtime: ray` run's produce throughput with the brokers on separate hosts vs on one host.

For each host count it makes a testbed (`kraftlab testbed up --name bench-N`), `ray up`s its
cluster file (one Ray node per host, each with an equal share of the machine's cores as Ray
CPUs), and runs, on the head through `ray exec`:

- `bench/campaign_rate.py --seeds S --address auto`: the standard campaign (simulator runs as Ray
  tasks, spread over the hosts' Ray CPUs);
- with `--throughput`, `bench/ray_throughput.py --address auto --partitions 8 --storage page_cache`:
  3 brokers and 3 voters placed round-robin on the hosts (on 1 host all share it; from 3 hosts
  on, each broker has a host of its own).

then `ray down` and `kraftlab testbed down`. As root on Linux. Figures only: the hosts share this
machine's cores, so on a 2-core machine more hosts cannot run more at once; what the figures show
is the cost of the separation (Ray's per-node processes, the network between hosts), not a
speed-up.

    sudo python bench/testbed_scale.py [--hosts 1 2 4] [--seeds 16] [--throughput] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def sh(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), text=True, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


def alive(cluster_file: str) -> int:
    done = sh(str(BIN / "ray"), "exec", cluster_file,
              "python -c \"import ray; ray.init(address='auto', logging_level='ERROR'); "
              "print('ALIVE', sum(n['Alive'] for n in ray.nodes()))\"", timeout=120)
    match = re.search(r"^ALIVE (\d+)", done.stdout, re.MULTILINE)
    return int(match.group(1)) if match else 0


def measure(hosts: int, seeds: int, throughput: bool, seconds: float) -> dict:
    name = f"bench-{hosts}"
    sh(str(BIN / "kraftlab"), "testbed", "down", "--name", name)
    up = sh(str(BIN / "kraftlab"), "testbed", "up", "--name", name, "--hosts", str(hosts))
    if up.returncode != 0:
        raise SystemExit(up.stderr)
    cluster_file = str(Path.home() / ".kraftlab" / "testbeds" / name / "cluster.yaml")
    out: dict = {"hosts": hosts}
    try:
        started = time.monotonic()
        done = sh(str(BIN / "ray"), "up", "-y", "--no-config-cache", cluster_file, timeout=600)
        if done.returncode != 0:
            raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
        while alive(cluster_file) < hosts and time.monotonic() - started < 300:
            time.sleep(3)
        out["cluster_up_s"] = round(time.monotonic() - started, 1)
        campaign = sh(str(BIN / "ray"), "exec", cluster_file, f"python {ROOT / 'bench/campaign_rate.py'} --seeds {seeds} --address auto")
        row = re.search(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \|.*\| ([\d.]+) \|\s*$", campaign.stdout, re.MULTILINE)
        if row:
            out.update(runs=int(row.group(1)), wall_s=float(row.group(2)), runs_per_min=float(row.group(3)), mean_run_s=float(row.group(4)))
        else:
            out["campaign_error"] = campaign.stdout[-2000:]
        if throughput:
            tp = sh(str(BIN / "ray"), "exec", cluster_file,
                    f"python {ROOT / 'bench/ray_throughput.py'} --address auto --partitions 8 --storage page_cache --seconds {seconds:g}")
            line = re.search(r"page_cache 8p\s+unthrottled: ([\d,]+) acked rec/s.*?p99 ([\d.,]+)", tp.stdout)
            if line:
                out.update(acked_per_s=int(line.group(1).replace(",", "")), p99_ms=line.group(2))
            else:
                out["throughput_error"] = tp.stdout[-2000:]
    finally:
        sh(str(BIN / "ray"), "down", "-y", cluster_file, timeout=600)
        sh(str(BIN / "kraftlab"), "testbed", "down", "--name", name)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--seeds", type=int, default=16, help="runs of the standard campaign per host count")
    ap.add_argument("--throughput", action="store_true", help="also measure a runtime ray run's produce throughput")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per throughput phase")
    args = ap.parse_args()
    rows = []
    for hosts in args.hosts:
        row = measure(hosts, args.seeds, args.throughput, args.seconds)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| hosts | Ray up s | campaign runs | runs/min | mean run s | ray run acked rec/s (8p, page cache) | p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['hosts']} | {r.get('cluster_up_s', '-')} | {r.get('runs', '-')} | {r.get('runs_per_min', '-')} | "
              f"{r.get('mean_run_s', '-')} | {r.get('acked_per_s', '-')} | {r.get('p99_ms', '-')} |")


if __name__ == "__main__":
    main()
