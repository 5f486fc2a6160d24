"""Ctrl-C and SIGTERM as a user sends them (to the command's process group, as a terminal, or
systemd, does): `kraftlab run` stops with exit 130 or 143 and keeps what the run recorded, in
its folder with `interrupted.txt` and no summary; a campaign keeps its finished runs, leaves no
half run, and the same command resumes it. (On Ray: tests/ray/test_interrupted_on_ray.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from workloads.campaign.generate import plan_run
from workloads.campaign.spec import load_campaign

ROOT = Path(__file__).resolve().parents[2]
KRAFTLAB = [sys.executable, "-c", "from kraftlab.cli import main; main()"]
# A run of several seconds: 60 s simulated under load and random faults (the standard campaign's).
LONG = """
name: long
scenario: random-faults
seeds: 3
faults: {kinds: [crash_os, crash_process, isolate, partition, link], mean_interval_ms: 5000, duration_ms: 55000, converge_ms: 30000}
load: {producers: 2, consumers: 1, rate_per_s: 300, acks: all}
"""


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([*KRAFTLAB, *args], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def signal_when(proc: subprocess.Popen, ready, sig: int, timeout_s: float = 120) -> tuple[int, str]:
    deadline = time.monotonic() + timeout_s
    while not ready() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the command ended before the signal: " + proc.stderr.read()[-2000:]
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (user + system): how far a simulated run got, whatever
    else the machine is doing (a wall-clock wait records less on a loaded machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def after_cpu_seconds(proc: subprocess.Popen, started, seconds: float):
    """A readiness test: `started()` held, and the process has used `seconds` of CPU since."""
    since: list[float] = []

    def ready() -> bool:
        if not since:
            if not started():
                return False
            since.append(cpu_seconds(proc.pid))
        return cpu_seconds(proc.pid) >= since[0] + seconds

    return ready


def long_scenario(tmp_path: Path) -> Path:
    (tmp_path / "c.yaml").write_text(LONG)
    campaign = load_campaign(str(tmp_path / "c.yaml"))
    scenario = plan_run(campaign, campaign.spec.cells()[0], 0).scenario()
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(scenario.model_dump(by_alias=True), sort_keys=False))
    return path


def test_an_interrupted_run_keeps_what_it_recorded_and_exits_130_or_143(tmp_path):
    scenario = long_scenario(tmp_path)
    for sig, code, said in ((signal.SIGINT, 130, "interrupted (Ctrl-C)"), (signal.SIGTERM, 143, "terminated (SIGTERM)")):
        out = tmp_path / f"run-{sig.name}"
        proc = start(["run", str(scenario), "--out", str(out)], tmp_path)
        events = lambda: any(p.name.startswith(f".{out.name}.partial-") for p in tmp_path.iterdir())  # noqa: E731
        code_seen, err = signal_when(proc, after_cpu_seconds(proc, events, 1.0), sig)
        assert code_seen == code, err
        assert said in err and f"is in {out}" in err and "Traceback" not in err
        assert sorted(p.name for p in out.iterdir()) == ["events", "interrupted.txt", "metrics.om", "scenario.yaml"]
        assert "at step" in (out / "interrupted.txt").read_text()
        rows = pq.read_table(out / "events").num_rows
        assert rows > 1000  # what the run recorded until the signal, flushed
        assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_an_interrupted_campaign_keeps_its_finished_runs_and_resumes(tmp_path):
    (tmp_path / "c.yaml").write_text(LONG)
    out = tmp_path / "out"
    args = ["campaign", str(tmp_path / "c.yaml"), "--out", str(out), "--parallel", "0", "--minimize-budget", "0"]
    log = out / "results.jsonl"
    proc = start(args, tmp_path)
    code, err = signal_when(proc, lambda: log.is_file() and log.read_bytes().count(b"\n") >= 1, signal.SIGINT)
    assert code == 130, err
    done = [json.loads(line)["run"] for line in log.read_text().splitlines()]
    assert 1 <= len(done) < 3
    # The run in flight left nothing: neither a half folder nor an interrupted one.
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(done)
    assert pq.read_table(out / "results.parquet").num_rows == len(done)  # rebuilt on the way out
    again = subprocess.run([*KRAFTLAB, *args], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode in (0, 1), again.stderr[-3000:]
    assert f"resuming: {len(done)} runs already done" in again.stdout
    assert sorted(json.loads(line)["run"] for line in log.read_text().splitlines()) == ["c0-s0", "c0-s1", "c0-s2"]


def test_an_interrupted_demo_says_where_its_two_runs_are(tmp_path):
    """Ctrl-C while `kraftlab demo`'s two runs go on, each in a thread of its own that the signal
    does not reach: the command abandons them and says where they are, whatever moment the signal
    lands. A run already past its epilogue when the signal came ends complete; every other one is
    kept interrupted. (That the runs stop between steps, not at their end, is shown without a
    signal's timing below.)"""
    out = tmp_path / "demo"
    proc = start(["demo", "--runtime", "sim", "--no-analyze", "--out", str(out)], tmp_path)
    # Both runs under way, each with its folder being written (kraftlab/runner.py's `.partial-`).
    partial = lambda: len([p for p in out.iterdir() if ".partial-" in p.name]) == 2 if out.is_dir() else False  # noqa: E731
    code, err = signal_when(proc, partial, signal.SIGINT)
    assert code == 130, err
    assert f"stopped; what the two runs recorded until then is in {out}" in err and "Traceback" not in err, err
    for name in ("last-replica-standing-load", "last-replica-standing-load-no-elr"):
        kept = {p.name for p in (out / name).iterdir()}
        assert {"events", "scenario.yaml"} <= kept, (name, kept)
        assert ("interrupted.txt" in kept) != ("summary.json" in kept), (name, kept)  # interrupted or complete, never both
    assert not [p for p in out.iterdir() if ".partial-" in p.name]


def test_abandoned_demo_runs_stop_before_their_next_step(tmp_path, monkeypatch):
    """What the demo does on Ctrl-C, at a moment chosen by the test: both runs are held at step 3
    until both are there, then abandoned (`interrupts.abandon_runs`, the demo's answer to the
    signal). Each runs step 3, stops before step 4 and keeps its folder with `interrupted.txt`, no summary."""
    from actors.runtime import interrupts
    from kraftlab import demo

    monkeypatch.setattr(interrupts, "_abandon", type(interrupts._abandon)())
    both_at_step_3 = threading.Barrier(2, action=interrupts.abandon_runs)

    def on_progress(variant: str, index: int, steps: int, kind: str) -> None:
        if index == 3:
            both_at_step_3.wait(timeout=120)

    with pytest.raises(interrupts.Abandoned):
        demo.run_demo(runtime="sim", out_root=tmp_path, on_progress=on_progress)
    for _, name in demo.VARIANTS:
        kept = {p.name for p in (tmp_path / name).iterdir()}
        assert {"events", "interrupted.txt", "scenario.yaml"} <= kept and "summary.json" not in kept, (name, kept)
        assert "at step 4," in (tmp_path / name / "interrupted.txt").read_text()  # step 3 ran; 4 never began
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]
