"""`kraftlab demo`, the README's main command, on the embedded local Ray (or on the cluster
RAY_ADDRESS names, as the testbed tier runs it): Last Replica Standing under load with ELR on and
off, side by side.

It runs as a user runs it, in a process of its own that starts its own Ray, so that the test sees
the whole console: two runs of ~15 actors each on a small machine make the raylet warn about the
number of worker processes, and those warnings belong in the run directories, not on the console.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.history_checks import assert_complete_history, lost_writes

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
RAY_CONSOLE_MARKS = ("(raylet)", "(pid=", "worker processes have been started", "WARNING")


def test_demo_compares_elr_on_and_off_on_ray(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # RAY_ADDRESS, if set, names the cluster the tier runs on
    proc = subprocess.run([sys.executable, "-m", "kraftlab.cli", "demo", "--out", str(tmp_path / "demo"), "--metrics-port", "0"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    # Nothing of Ray's on the console; the embedded Ray's logs in each run directory instead (a
    # cluster joined keeps its logs on its nodes).
    assert [line for line in output.splitlines() if any(mark in line for mark in RAY_CONSOLE_MARKS)] == []
    for name in ("last-replica-standing-load", "last-replica-standing-load-no-elr"):
        logs = tmp_path / "demo" / name / "ray"
        assert "RAY_ADDRESS" in os.environ or ((logs / "raylet.out").is_file() and list(logs.glob("python-core-worker-*.log"))), name
    on = json.loads((tmp_path / "demo" / "last-replica-standing-load" / "summary.json").read_text())
    off = json.loads((tmp_path / "demo" / "last-replica-standing-load-no-elr" / "summary.json").read_text())
    assert on["runtime"] == off["runtime"] == "ray"
    assert on["ok"], (on["failures"], [v["invariant"] for v in on["violations"]])
    # Without ELR: every violation the scenario expects, and nothing else (the loss was caught).
    assert off["failures"] == [], output
    assert {v["invariant"] for v in off["violations"]} == set(off["expect_violations"]), output
    assert off["ok"]
    # ELR: nothing acknowledged lost, at the price of waiting offline for broker 2.
    assert on["stats"]["acked_lost"] == 0 < off["stats"]["acked_lost"]
    assert on["stats"]["availability"]["t-0"]["offline_ms"] > off["stats"]["availability"]["t-0"]["offline_ms"]
    assert on["stats"]["load"]["acked"] > 0 and on["stats"]["produce_latency_ms"]["p99"] is not None
    for text in ("ELR on", "ELR off", "p99 ms"):
        assert text in proc.stdout
    # Both histories are complete (load, crashes and restarts on real actors: no event lost, no
    # node_seq gap) and tell the same loss as the summaries.
    for name, summary in (("last-replica-standing-load", on), ("last-replica-standing-load-no-elr", off)):
        rows = assert_complete_history(tmp_path / "demo" / name, summary)
        assert len(lost_writes(rows)) == summary["stats"]["acked_lost"], name
        # The demo ended with Spark on Ray (RayDP) analyzing the same history: the same loss.
        checks = json.loads((tmp_path / "demo" / name / "analysis" / "checks.json").read_text())
        assert checks["engine"] == "raydp" and checks["valid"] in (True, False), name
        assert checks["stats"]["lost_by_acks"].get("all", 0) == summary["stats"]["acked_lost"], name
        assert (tmp_path / "demo" / name / "analysis" / "report.html").is_file()
    assert "history (Spark)" in proc.stdout
    assert "metrics (ELR on): http://127.0.0.1:" in proc.stdout and "metrics (ELR off): http://127.0.0.1:" in proc.stdout
