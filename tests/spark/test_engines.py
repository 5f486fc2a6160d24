"""Both engines give the same checks.json on the same input (only `engine` differs).

Each engine runs in its own `kraftlab analyze` process: RayDP builds its session with
`getOrCreate`, which in a process that already has a local session (this folder's fixture)
would quietly return that one."""

from __future__ import annotations

import json

import pytest

from kraftlab.runner import run_scenario
from workloads.scenario.loading import load_scenario

from .test_cli import analyze_cli


@pytest.mark.ray
def test_raydp_and_local_give_the_same_checks(tmp_path):
    scenario, _ = load_scenario("last-replica-standing-no-elr")
    run_dir = run_scenario(scenario, source=scenario.name, out_dir=tmp_path / "run").run_dir
    checks = {}
    for engine in ("local", "raydp"):
        out = tmp_path / engine
        result = analyze_cli(run_dir, "--out", str(out), engine=engine)
        assert result.returncode == 1, result.stdout + result.stderr  # the run lost records: invalid
        assert "Traceback" not in result.stderr and "WARN" not in result.stdout + result.stderr
        checks[engine] = json.loads((out / "checks.json").read_text())
        assert checks[engine].pop("engine") == engine
    assert checks["raydp"] == checks["local"]
    assert checks["local"]["anomalies"]["lost-write"]["count"] > 0
