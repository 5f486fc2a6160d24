"""`make trace-hashes`: the simulator's trace hash of every library scenario and every conformance
case, kept in tests/golden/trace-hashes.json.

A trace hash digests every message and timer a simulated run delivered, in order
(actors/runtime/sim/simulator.py), so it changes when, and only when, the run's behaviour does.
The library and conformance tests compare each run's hash with this file (`check`): a commit that
changes the protocol's behaviour, on purpose or not, fails them until it rewrites the file, and
the file's diff then shows which scenarios changed, for the commit's message to say why. A commit
that only reshapes code leaves the file alone.

    python -m tests.trace_hashes            # rewrite the file (every scenario and case, in the simulator)
    python -m tests.trace_hashes --check    # compare without writing; exit 1 and list what differs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "trace-hashes.json"


def golden() -> dict[str, dict[str, str]]:
    """{"library": {scenario: hash}, "conformance": {case: hash}} as committed."""
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def check(family: str, name: str, trace_hash: str | None) -> None:
    """Fail (AssertionError) when a run's hash is not the committed one."""
    expected = golden().get(family, {}).get(name)
    assert trace_hash == expected, (
        f"{family} {name}: trace hash {trace_hash}, tests/golden/trace-hashes.json has {expected}. The run behaves "
        "differently: if on purpose, run `make trace-hashes` and say why in the commit message")


def _library_hash(name: str) -> str:
    from kraftlab.runner import run_scenario
    from workloads.scenario.loading import library_scenarios, load_scenario

    scenario, _ = load_scenario(str(library_scenarios()[name]))
    with tempfile.TemporaryDirectory(prefix="kraftlab-hash-") as tmp:
        return run_scenario(scenario, source=name, out_dir=Path(tmp) / "run").summary["stats"]["trace_hash"]


def _conformance_hash(name: str) -> str:
    from kraftlab import conformance

    case = next(c for c in conformance.cases() if c.name == name)
    with tempfile.TemporaryDirectory(prefix="kraftlab-hash-") as tmp:
        return conformance.run_case(case, "sim", Path(tmp)).trace_hash


def compute() -> dict[str, dict[str, str]]:
    """Every library scenario's and conformance case's hash, run in the simulator on every core."""
    from kraftlab import conformance
    from workloads.scenario.loading import library_scenarios

    library = sorted(library_scenarios())
    cases = sorted(c.name for c in conformance.cases())
    with ProcessPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
        lib = dict(zip(library, pool.map(_library_hash, library), strict=True))
        conf = dict(zip(cases, pool.map(_conformance_hash, cases), strict=True))
    return {"library": lib, "conformance": conf}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    args = parser.parse_args()
    now, kept = compute(), golden()
    changed = [f"{family} {name}: {kept.get(family, {}).get(name)} -> {h}"
               for family, hashes in now.items() for name, h in hashes.items() if kept.get(family, {}).get(name) != h]
    gone = [f"{family} {name}: no longer exists" for family, hashes in kept.items() for name in hashes if name not in now.get(family, {})]
    for line in changed + gone:
        print(line)
    if args.check:
        sys.exit(1 if changed or gone else 0)
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    staged = GOLDEN.with_suffix(".json.tmp")
    staged.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    staged.replace(GOLDEN)  # whole or not at all
    total = sum(len(h) for h in now.values())
    print(f"wrote {GOLDEN.relative_to(ROOT)}: {total} hashes, {len(changed) + len(gone)} changed")


if __name__ == "__main__":
    main()
