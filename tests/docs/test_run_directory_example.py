"""The example summary.json of docs/reference/run-directory.md is one a run could write: its keys are
a real summary's, and its `ok` follows the rule the page states (no failed step, and the violated
invariants exactly those expected)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kraftlab.runner import run_scenario
from workloads.scenario.loading import load_scenario

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "run-directory.md"


def example() -> dict:
    section = PAGE.read_text().split("## `summary.json`", 1)[1]
    return json.loads(re.search(r"```json\n(.*?)```", section, re.S)[1])


def ok_by_the_rule(summary: dict) -> bool:
    violated = {v["invariant"] for v in (*summary["violations"], *summary["epilogue_violations"])}
    return not summary["failures"] and violated == set(summary["expect_violations"])


def test_the_example_s_ok_follows_its_failures_and_violations():
    summary = example()
    assert summary["ok"] is ok_by_the_rule(summary)


def test_the_rule_tells_a_failed_run():
    summary = example()
    assert ok_by_the_rule({**summary, "failures": [], "violations": [], "epilogue_violations": []})
    assert not ok_by_the_rule({**summary, "failures": [], "expect_violations": []})


def test_the_example_s_keys_are_a_real_summary_s(tmp_path):
    scenario, _ = load_scenario("last-replica-standing-elr")
    real = run_scenario(scenario, source="last-replica-standing-elr", out_dir=tmp_path / "run").summary
    summary = example()
    assert set(summary) <= set(real)
    assert set(summary["stats"]) <= set(real["stats"])
    assert real["ok"] is ok_by_the_rule(real)
