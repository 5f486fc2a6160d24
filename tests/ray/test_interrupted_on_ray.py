"""Ctrl-C and SIGTERM of `kraftlab run --runtime ray`, sent to the command's process group as a
terminal (or systemd) sends them, so Ray's own processes get it too: exit 130 or 143, what the run
recorded kept in its folder, and nothing left behind: no exit 1 or 134 with Ray's C++ stack dump,
no `.partial-` folder, no data root left in the temporary folder."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from tests.ray.on_hosts import left_on_cluster_hosts
from tests.scenario.test_interrupted import start
from workloads.scenario.loading import load_scenario

pytestmark = pytest.mark.ray


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_ray_run_keeps_its_history_and_leaves_nothing_behind(tmp_path, monkeypatch, sig, code):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # where the run's data root goes
    monkeypatch.setenv("RAY_TMPDIR", "/tmp")  # Ray's sockets' paths must stay short
    out = tmp_path / "run"
    proc = start(["run", "last-replica-standing-load", "--runtime", "ray", "--out", str(out)], tmp_path)
    deadline = time.monotonic() + 180
    # Signalled once the cluster is up and the load runs: its data root is there.
    while not any(p.name.startswith("kraftlab-data-") for p in temp.iterdir()) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(8.0)
    assert proc.poll() is None, proc.stderr.read()[-3000:]
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-3000:]
    assert "stopped; what the run recorded until then is in" in err and "SIGTERM received" not in err
    assert {"events", "interrupted.txt", "metrics.om", "scenario.yaml"} <= {p.name for p in out.iterdir()}
    assert not (out / "summary.json").exists()
    assert not [p.name for p in temp.iterdir() if p.name.startswith("kraftlab-data-")]
    assert left_on_cluster_hosts(temp, "kraftlab-data-") == []  # nor on the cluster's other hosts
    assert not [p.name for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_an_interrupted_demo_stops_both_runs_at_once_and_keeps_them(tmp_path, monkeypatch):
    """Before: Ctrl-C reached the demo's main thread while both runs went on in theirs, and the
    command waited for every step of both (about 30 s more) before saying "interrupted"."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setenv("RAY_TMPDIR", "/tmp")
    out = tmp_path / "demo"
    proc = start(["demo", "--no-analyze", "--out", str(out)], tmp_path)
    deadline = time.monotonic() + 180
    # Both clusters up (a data root each) and the load running.
    while len([p for p in temp.iterdir() if p.name.startswith("kraftlab-data-")]) < 2 and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(5.0)
    assert proc.poll() is None, proc.stderr.read()[-3000:]
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert f"stopped; what the two runs recorded until then is in {out}" in err, err[-3000:]
    for name in ("last-replica-standing-load", "last-replica-standing-load-no-elr"):
        assert {"events", "interrupted.txt", "scenario.yaml"} <= {p.name for p in (out / name).iterdir()}, name
        assert not (out / name / "summary.json").exists()
        # Stopped at the next poll, not at the end of its steps.
        at_step = int(re.search(r"at step (-?\d+),", (out / name / "interrupted.txt").read_text()).group(1))  # -1: still starting
        assert at_step < len(load_scenario(name)[0].steps), at_step
    assert not [p.name for p in temp.iterdir() if p.name.startswith("kraftlab-data-")]
    assert left_on_cluster_hosts(temp, "kraftlab-data-") == []
