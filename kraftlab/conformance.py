"""The conformance suite: Apache Kafka's own test cases as scenario files (workloads/conformance/),
and the table that says, for each, whether kraftlab agrees with Kafka (docs/conformance.md).

Each file's description starts with the Kafka test it translates and the rule it checks:

    PartitionChangeBuilderTest.testElectLastKnownLeader: <the rule, in one sentence>

Its steps reach the test's starting state and its expectations are what Kafka's test asserts.
Where kraftlab differs from Kafka, the description says why in a paragraph of its own, starting
with "Differs on purpose:" (a choice: the reference documents' rule, a protocol switch) or "Not
modelled yet:" (a simplification, named with what modelling it needs); such a case is expected to
fail, and the table shows it. A case whose steps need the simulator's exact timing (a state held
for milliseconds, which real time on Ray does not hold) says so in a paragraph starting with "On
Ray:"; it is expected to fail there only. Test cases that no scenario can express yet are listed in
workloads/conformance/inexpressible.yaml with what is missing.

The table is generated (`make conformance`, or `python -m kraftlab.conformance`): the simulator's
result of every case is run anew; the Ray column is run anew with `--ray`, and otherwise kept from the
table as it was. tests/scenario/test_conformance.py fails when the table is stale (the files and the
table disagree, or a case's result changed); tests/ray/test_conformance_on_ray.py checks the Ray column.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[1]
SUITE_DIR = ROOT / "workloads" / "conformance"
INEXPRESSIBLE = SUITE_DIR / "inexpressible.yaml"
TABLE = ROOT / "docs" / "conformance.md"

AGREES = "agrees"
DIFFERS = "differs"
NOT_RUN = "not run"
_HEAD = re.compile(r"^\s*(?P<cls>[A-Z]\w*Test)\.(?P<method>\w+):\s*(?P<rule>.+)$", re.S)
_DIFFERS = ("Differs on purpose:", "Not modelled yet:")
_ON_RAY = "On Ray:"


class SuiteError(ValueError):
    """A suite file that does not follow the format above."""


@dataclass(frozen=True)
class Case:
    name: str  # the scenario's name (its file's stem)
    path: Path
    kafka_class: str
    kafka_test: str
    rule: str  # one sentence
    difference: str | None  # why kraftlab differs ("Differs on purpose: ..." or "Not modelled yet: ..."), or None
    ray_note: str | None = None  # why the case cannot pass on Ray's real time ("On Ray: ..."), or None

    @property
    def kafka_name(self) -> str:
        return f"{self.kafka_class}.{self.kafka_test}"

    @property
    def expected(self) -> str:
        """The result the case should have: a documented difference fails on purpose."""
        return DIFFERS if self.difference else AGREES

    @property
    def expected_on_ray(self) -> str:
        return DIFFERS if self.difference or self.ray_note else AGREES


def read_case(path: Path) -> Case:
    doc = yaml.safe_load(path.read_text()) or {}
    text = str(doc.get("description", "")).strip()
    # Paragraphs: a folded description (`>-`) keeps one newline between them, a literal one (`|`) a blank line.
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n" if re.search(r"\n\s*\n", text) else r"\n", text)]
    head = _HEAD.match(paragraphs[0]) if paragraphs[0] else None
    if head is None:
        raise SuiteError(f"{path}: description: expected `KafkaTestClass.testMethod: the rule.` first, got {paragraphs[0][:80]!r}")
    if doc.get("name") != path.stem:
        raise SuiteError(f"{path}: name: expected {path.stem!r} (the file's stem), got {doc.get('name')!r}")
    rule = head.group("rule").strip()
    difference = next((p for p in paragraphs[1:] if p.startswith(_DIFFERS)), None)
    ray_note = next((p for p in paragraphs[1:] if p.startswith(_ON_RAY)), None)
    return Case(path.stem, path, head.group("cls"), head.group("method"), rule, difference, ray_note)


def cases(suite_dir: Path = SUITE_DIR) -> list[Case]:
    """Every case of the suite, ordered by Kafka test class, then file name."""
    found = [read_case(p) for p in sorted(suite_dir.glob("*.yaml")) if p != suite_dir / INEXPRESSIBLE.name]
    return sorted(found, key=lambda c: (c.kafka_class, c.name))


# The case of each Kafka test class that `make test` runs on Ray: among those that agree with Kafka
# there, one of the shortest in simulated time (a Ray run takes that much real time) that needs
# more than a single voter or broker where the class has such a case. For the two Raft classes,
# cases whose setup never lets every voter talk at once: on a loaded machine, the real time
# between a `heal: all` and the next `partition` step is enough for an election the simulator's
# instant steps never allow.
RAY_SAMPLE = (
    "bhm-calculate-next-broker-state",
    "ccm-reject-min-isr-change-when-elr-enabled",
    "prevote-handle-pre-vote-request-as-follower",
    "raft-follower-log-reconciliation",
    "ldf-io-exception-during-checkpoint",
    "pcb-elect-leader",
    "pcb-can-complete-reassignment-all-new-replicas",
    "pcb-some-removing",
    "partition-is-under-min-isr",
    "qc-balance-partition-leaders",
    "rcm-delete-topics",
    "rm-replicas-are-stopped-while-in-controlled-shutdown",
)


def ray_sample(all_cases: list[Case]) -> list[Case]:
    """The cases CI runs on Ray (RAY_SAMPLE), in the table's order."""
    return [c for c in all_cases if c.name in RAY_SAMPLE]


def inexpressible(path: Path = INEXPRESSIBLE) -> list[dict[str, str]]:
    """The Kafka test cases no scenario can express yet: [{test, missing}]."""
    if not path.exists():
        return []
    return list(yaml.safe_load(path.read_text()) or [])


class CaseResult(NamedTuple):
    result: str  # AGREES or DIFFERS
    why: str  # the first failure or violation, if any
    trace_hash: str | None  # the simulator's (tests/trace_hashes.py); None on Ray


def run_case(case: Case, runtime: str, out_root: Path) -> CaseResult:
    """Run a case: whether it agrees with Kafka's test, why not, and the run's trace hash."""
    from kraftlab.runner import run_scenario
    from workloads.scenario.loading import load_scenario

    scenario, _ = load_scenario(str(case.path), runtime=runtime)
    summary = run_scenario(scenario, source=str(case.path), out_dir=out_root / f"{case.name}-{runtime}").summary
    trace_hash = summary["stats"]["trace_hash"]
    if summary["ok"]:
        return CaseResult(AGREES, "", trace_hash)
    if summary["failures"]:
        f = summary["failures"][0]
        return CaseResult(DIFFERS, f"step {f['step']} ({f['kind']}): {f['detail']}", trace_hash)
    names = sorted({v["invariant"] for v in summary["violations"] + summary["epilogue_violations"]})
    return CaseResult(DIFFERS, f"violations {names}, expected {summary['expect_violations']}", trace_hash)


def recorded_results(table: Path = TABLE) -> dict[str, dict[str, str]]:
    """The results the table holds: {scenario: {"sim": ..., "ray": ...}}."""
    out: dict[str, dict[str, str]] = {}
    if not table.exists():
        return out
    for line in table.read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 5 and re.fullmatch(r"`[\w-]+`", cells[2]):
            out[cells[2].strip("`")] = {"sim": cells[3], "ray": cells[4]}
    return out


def render(all_cases: Iterable[Case], results: dict[str, dict[str, str]], missing: list[dict[str, str]]) -> str:
    """docs/conformance.md: the table, the differences on purpose and the inexpressible cases."""
    all_cases = list(all_cases)
    sim = [results.get(c.name, {}).get("sim", NOT_RUN) for c in all_cases]
    ray = [results.get(c.name, {}).get("ray", NOT_RUN) for c in all_cases]
    lines = [
        "# Conformance: Kafka's own tests",
        "",
        "<!-- Generated by `make conformance` (python -m kraftlab.conformance) from workloads/conformance/. Do not edit. -->",
        "",
        "Each row is a test case of Apache Kafka's test suite, translated into a scenario file of",
        "`workloads/conformance/`: its steps reach the test's starting state, its expectations are what",
        "Kafka's test asserts. *agrees*: the scenario passes (kraftlab does what Kafka's test asserts);",
        "*differs*: it does not. Every case that differs is explained below: a difference on purpose, or",
        "what kraftlab does not model yet.",
        "Run one with `kraftlab run workloads/conformance/NAME.yaml`.",
        "",
        f"{len(all_cases)} cases: in the simulator {sim.count(AGREES)} agree and {sim.count(DIFFERS)} differ; "
        f"on Ray {ray.count(AGREES)} agree and {ray.count(DIFFERS)} differ"
        + (f" ({ray.count(NOT_RUN)} not run)." if NOT_RUN in ray else "."),
        "",
        "| Kafka test | Rule | Scenario | Simulator | Ray |",
        "|---|---|---|---|---|",
    ]
    for c, s, r in zip(all_cases, sim, ray, strict=True):
        rule = c.rule.replace("|", "\\|")
        lines.append(f"| `{c.kafka_name}` | {rule} | `{c.name}` | {s} | {r} |")
    lines += ["", "## Differences", ""]
    differing = [c for c in all_cases if c.difference or c.ray_note]
    lines += [f"- `{c.kafka_name}` (`{c.name}`): {c.difference or c.ray_note}" for c in differing] or ["None."]
    lines += ["", "## Test cases that cannot be expressed yet", ""]
    lines += [f"- `{m['test']}`: {m['missing']}" for m in missing] or ["None."]
    return "\n".join(lines) + "\n"


def generate(run_ray: bool, progress: Callable[[str], None] = lambda _: None, parallel: int = 3,
             only: Iterable[str] = ()) -> str:
    """The table's text: every case run anew in the simulator, and on Ray with `run_ray` (on one
    embedded local Ray, `parallel` at a time; only the cases named in `only`, if any), else the
    Ray column as the table has it."""
    all_cases = cases()
    on_ray = [c for c in all_cases if not only or c.name in set(only)]
    kept = recorded_results()
    results: dict[str, dict[str, str]] = {c.name: {"ray": kept.get(c.name, {}).get("ray", NOT_RUN)} for c in all_cases}
    with tempfile.TemporaryDirectory(prefix="kraftlab-conformance-") as tmp:
        for case in all_cases:
            results[case.name]["sim"], why, _ = run_case(case, "sim", Path(tmp))
            progress(f"{case.name}: sim {results[case.name]['sim']} {why}")
        if run_ray:
            from actors.runtime.ray import adapter

            adapter.connect(None)
            try:
                with ThreadPoolExecutor(parallel) as pool:
                    futures = {c.name: pool.submit(run_case, c, "ray", Path(tmp)) for c in on_ray}
                    for name, future in futures.items():
                        results[name]["ray"], why, _ = future.result()
                        progress(f"{name}: ray {results[name]['ray']} {why}")
            finally:
                adapter.shutdown()
    return render(all_cases, results, inexpressible())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kraftlab.conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ray", action="store_true", help="also run every case on an embedded local Ray (slow)")
    parser.add_argument("--only", nargs="+", default=(), metavar="NAME", help="with --ray: run only these cases on Ray, keep the others' results")
    args = parser.parse_args(argv)
    text = generate(args.ray, progress=lambda line: print(line, file=sys.stderr), only=args.only)
    TABLE.write_text(text)
    print(f"wrote {TABLE.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
