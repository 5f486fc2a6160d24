"""`make test-flaky`: run the tiers that touch real time several times and print every test that
failed even once.

A test whose outcome depends on timing passes one run in N and fails the next, on a loaded machine
more often. This runs the real-time tiers (the ones with timeouts and signals on the wall clock:
Ctrl-C and SIGTERM of the commands, Prometheus, Spark's command line, the `ray` and `testbed`
tiers) `--runs` times, one pass after another as `make test`'s second pass runs them, optionally
with the machine loaded (`--load`: a busy loop on one core, `stress-ng --cpu 1` when Debian's
stress-ng is on PATH), and prints a table of the tests that ever failed, with the first line of
each failure. Every pass's JUnit XML and log stay in `--out` (default `runs/flaky/`), and
`flaky.json` there holds the table.

    python -m tests.flaky --runs 3                   # the real-time tiers three times
    python -m tests.flaky --runs 2 --load            # ... with one core kept busy meanwhile
    python -m tests.flaky --runs 5 -- tests/ray/test_close.py    # other tests (pytest's arguments)

Exit code 0 when every test passed in every pass, 1 when one failed once or more.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]

# The tiers whose tests wait on the wall clock (timeouts, signals, servers), as `make test` runs
# them: every test marked `ray` or `testbed`, and the modules of the first pass that start a
# process and signal it, a Prometheus or a Spark command line.
REAL_TIME_MODULES = ("tests/scenario/test_interrupted.py", "tests/unit/test_interrupts.py", "tests/prometheus",
                     "tests/spark/test_cli.py", "tests/ray", "tests/testbed")


def pytest_args(extra: list[str]) -> list[str]:
    return extra or [*REAL_TIME_MODULES]


@contextmanager
def loaded(enabled: bool):
    """One core kept busy while the body runs (the other is the tests')."""
    if not enabled:
        yield None
        return
    if shutil.which("stress-ng"):
        command = ["stress-ng", "--cpu", "1", "--cpu-load", "100", "--quiet"]
    else:
        command = [sys.executable, "-c", "while True: pass"]
    hog = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield command[0]
    finally:
        hog.terminate()
        hog.wait(timeout=30)


def one_pass(index: int, out: Path, args: list[str], load: bool) -> dict:
    """One pytest process over `args`; its JUnit XML read into {test id: failure's first line or None}."""
    xml = out / f"pass-{index}.xml"
    log = out / f"pass-{index}.log"
    started = time.monotonic()
    with loaded(load), log.open("w") as sink:
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *args],
                               cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    return {"pass": index, "exit": code, "seconds": round(time.monotonic() - started), "loaded": load,
            "tests": read_junit(xml) if xml.is_file() else {}}


def read_junit(xml: Path) -> dict[str, str | None]:
    """Each test case's id (module::name) and, if it failed or errored, its message's first line."""
    outcomes: dict[str, str | None] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if case.find("skipped") is not None:
            continue
        message = None if problem is None else (problem.get("message") or problem.text or "failed").strip().splitlines()[0][:160]
        outcomes[name] = message
    return outcomes


def ever_failed(passes: list[dict]) -> list[dict]:
    """The tests that failed in at least one pass: runs, failures, and the first failure's line."""
    runs: dict[str, int] = defaultdict(int)
    failures: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for p in passes:
        for test, message in p["tests"].items():
            runs[test] += 1
            if message is not None:
                failures[test].append((p["pass"], message))
    return [{"test": t, "runs": runs[t], "failed": len(f), "passes": [i for i, _ in f], "first": f[0][1]}
            for t, f in sorted(failures.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.flaky", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="passes over the tests (default 3)")
    parser.add_argument("--load", action="store_true", help="keep one core busy during every pass")
    parser.add_argument("--load-every", type=int, default=0, metavar="K",
                        help="keep one core busy during every K-th pass only (1: all, as --load)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "flaky", help="where the passes' XML and logs go")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments (after --); default: the real-time tiers")
    options = parser.parse_args(argv)
    if options.runs < 1:
        parser.error("--runs: expected 1 or more")
    options.out.mkdir(parents=True, exist_ok=True)
    console = Console()
    passes = []
    for index in range(1, options.runs + 1):
        load = options.load or (options.load_every > 0 and index % options.load_every == 0)
        console.print(f"pass {index} of {options.runs}{' (one core kept busy)' if load else ''} …", highlight=False)
        result = one_pass(index, options.out, pytest_args(options.pytest_args), load)
        failed = sum(m is not None for m in result["tests"].values())
        console.print(f"  {len(result['tests'])} tests, {failed} failed, {result['seconds']} s (exit {result['exit']})", highlight=False)
        passes.append(result)
    flaky = ever_failed(passes)
    table = Table("test", "failed", "passes", "first failure", expand=True)
    table.columns[0].overflow = table.columns[3].overflow = "fold"
    for row in flaky:
        table.add_row(row["test"], f"{row['failed']} of {row['runs']}", ",".join(map(str, row["passes"])), row["first"])
    console.print(table if flaky else "every test passed in every pass")
    (options.out / "flaky.json").write_text(json.dumps({"passes": [{k: v for k, v in p.items() if k != "tests"} | {"tests": len(p["tests"])}
                                                                   for p in passes], "failed": flaky}, indent=2) + "\n")
    broken = [p for p in passes if p["exit"] not in (0, 1)]  # pytest itself failed: collection, usage
    for p in broken:
        log = options.out / f"pass-{p['pass']}.log"
        console.print(f"[red]pass {p['pass']} ended with pytest's exit code {p['exit']}[/] (log: {log})", highlight=False)
    return 1 if flaky or broken else 0


if __name__ == "__main__":
    sys.exit(main())
