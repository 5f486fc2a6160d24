"""Where the Ray data path's time goes: py-spy samples of every busy actor process while
bench/ray_throughput.py runs its unthrottled phase, grouped into what the time is spent on.

It starts `bench/ray_throughput.py` (one storage mode, one partition count, long phases), waits
until at least three Ray worker processes are busy (the cluster is under load, not starting),
records each busy process with py-spy for `--sample-seconds`, and prints per role (broker,
producer, voter: told apart by the code on their stacks) the share of busy samples per category.
Samples waiting in the asyncio loop's `select` or in Ray's idle main loop are left out (idle).

    python bench/ray_profile.py [--partitions 1] [--storage page_cache] [--sample-seconds 8]

Categories, decided by the innermost frame that matches (in this order): Ray (its remote-call
machinery and serialization, `ray/` frames), sockets (asyncio's
transports: the send and receive system calls), serialization (pickle, msgpack, the record and
log codecs, message reconstruction), disk (the file store: appends, flushes, the journal), wire
framing (actors/runtime/ray/wire.py), the event history (observability/), the protocol (brokers'
replication and logs, the controller, the clients), the runtime's glue (actor loop, timers,
outputs) and asyncio's event loop.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
PY_SPY = Path(sys.executable).with_name("py-spy")

CATEGORIES = [
    ("Ray (remote calls, its serialization)", lambda f, fn: f.startswith("ray/") or "site-packages/ray/" in f or "_raylet" in f),
    ("sockets (send/receive system calls, asyncio transports)", lambda f, fn: "selector_events" in f or "asyncio/streams" in f),
    ("serialization (pickle, msgpack, record and log codecs)",
     lambda f, fn: "pickle" in f or "msgpack" in f or fn in ("loads", "dumps") or any(k in f for k in ("contract.py", "records.py", "codec.py"))),
    ("disk (appends, flushes, journal)", lambda f, fn: "file_store" in f),
    ("wire framing (wire.py)", lambda f, fn: "wire.py" in f),
    ("event history (observability/)", lambda f, fn: "observability/" in f),
    ("protocol (replication, logs, controller, clients)",
     lambda f, fn: any(k in f for k in ("actors/replication", "storage/", "broker_node", "controller_node", "actors/clients", "controller_quorum"))),
    ("runtime glue (actor loop, timers, outputs)", lambda f, fn: "actors/runtime" in f),
    ("asyncio event loop", lambda f, fn: "asyncio" in f or "selectors" in f),
]
# Waiting, not working: the asyncio loop's select, Ray's idle main loop, a thread on a condition.
IDLE_LEAVES = ("EpollSelector.select", "Worker.main_loop", "Condition.wait")
FRAME = re.compile(r"(.*) \((.*?)(:\d+)?\)$")


def category(stack: str) -> str:
    for frame in reversed(stack.split(";")):
        m = FRAME.match(frame.strip())
        fn, path = (m.group(1), m.group(2)) if m else (frame, "")
        for name, matches in CATEGORIES:
            if matches(path, fn):
                return name
    return "other"


def role(stacks: dict[str, int]) -> str:
    text = " ".join(stacks)
    if "actors/clients/producer.py" in text:
        return "producer"
    if "actors/replication" in text:
        return "broker"
    if "controller" in text:
        return "voter"
    return "other"


def read_raw(path: Path) -> dict[str, int]:
    """py-spy's raw output: one `frame;frame;... count` line per distinct stack, idle ones left out."""
    stacks: dict[str, int] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        leaf = stack.split(";")[-1]
        if not stack or not leaf.strip() or any(idle in leaf for idle in IDLE_LEAVES):
            continue
        stacks[stack] = stacks.get(stack, 0) + int(count)
    return stacks


def ray_process_cpu() -> dict[psutil.Process, float]:
    """Each Ray worker process's CPU (% of a core) over the next second."""
    procs = [p for p in psutil.process_iter(["cmdline"]) if any("ray::" in c for c in (p.info["cmdline"] or []))]
    for p in procs:
        p.cpu_percent(None)
    time.sleep(1.0)
    usage = {}
    for p in procs:
        try:
            usage[p] = p.cpu_percent(None)
        except psutil.Error:
            pass
    return usage


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--storage", default="page_cache", choices=["page_cache", "fsync"])
    ap.add_argument("--sample-seconds", type=float, default=8.0)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="kraftlab-profile-"))
    bench = subprocess.Popen([sys.executable, str(ROOT / "bench" / "ray_throughput.py"), "--seconds", "25",
                              "--partitions", str(args.partitions), "--storage", args.storage],
                             cwd=ROOT, stdout=open(out / "bench.log", "w"), stderr=subprocess.STDOUT)
    try:
        # Under load, not starting: three processes busy and more than a core in all, for three
        # seconds in a row (a cluster's start keeps a few processes busy, each for a moment).
        streak = 0
        while streak < 3:
            if bench.poll() is not None:
                sys.exit(f"the benchmark ended before the cluster was under load: {out / 'bench.log'}")
            usage = ray_process_cpu()
            loaded = sum(c > 15.0 for c in usage.values()) >= 3 and sum(usage.values()) > 100.0
            streak = streak + 1 if loaded else 0
        targets = [p for p, c in ray_process_cpu().items() if c > 5.0]
        spies = [subprocess.Popen([str(PY_SPY), "record", "--pid", str(p.pid), "--duration", str(int(args.sample_seconds)),
                                   "--rate", "200", "--format", "raw", "--nonblocking", "-o", str(out / f"{p.pid}.txt")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in targets]
        for spy in spies:
            spy.wait()
    finally:
        bench.wait()
    per_role: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    processes: collections.Counter = collections.Counter()
    for path in sorted(out.glob("[0-9]*.txt")):
        stacks = read_raw(path)
        if not stacks:
            continue
        name = role(stacks)
        processes[name] += 1
        for stack, n in stacks.items():
            per_role[name][category(stack)] += n
    print(f"{args.storage}, {args.partitions} partition(s), unthrottled; py-spy at 200 Hz for {args.sample_seconds:g} s per busy process "
          f"(raw stacks in {out})")
    for name, counts in sorted(per_role.items()):
        total = sum(counts.values())
        print(f"{name} ({processes[name]} process(es), {total:,} busy samples):")
        for cat, n in counts.most_common():
            print(f"  {100 * n / total:5.1f}%  {cat}")
    print((out / "bench.log").read_text().strip().splitlines()[-2] if (out / "bench.log").exists() else "")


if __name__ == "__main__":
    main()
