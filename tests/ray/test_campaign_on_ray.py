"""`kraftlab campaign` as a user runs it: simulator runs as Ray tasks on the embedded local Ray, a
bounded window of them in flight, killed with SIGKILL mid-way and started again with the same
`--out`: every run is there exactly once, and none finished before the kill ran again.

The campaign runs in a subprocess of its own session, so the kill takes its embedded Ray down with
it, as a user's kill -9 of the command would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
KRAFTLAB = [sys.executable, "-c", "from kraftlab.cli import main; main()"]

CAMPAIGN = """
name: resumable
scenario: random-faults
seeds: 8
matrix:
  cluster.protocol.elr: [true, false]
faults:
  kinds: [crash_os, crash_process, isolate, partition]
  mean_interval_ms: 2000
  duration_ms: 8000
  converge_ms: 20000
load: {producers: 1, consumers: 1, rate_per_s: 40, acks: all}
"""


def log_lines(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]


def test_a_campaign_killed_mid_way_resumes_and_every_run_is_there_once(tmp_path):
    campaign, out = tmp_path / "c.yaml", tmp_path / "out"
    campaign.write_text(CAMPAIGN)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen([*KRAFTLAB, "campaign", str(campaign), "--out", str(out)], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while len(log_lines(out)) < 4 and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before = {row["run"]: row for row in log_lines(out)}
    assert 4 <= len(before) < 16, f"killed after {len(before)} runs; stderr: {first.stderr.read().decode()[-2000:]}"

    # Resumed keeping the histories of failing runs only: the runs done now that found nothing
    # keep their scenario and summary (Ray tasks pack what is left on their node).
    second = subprocess.run([*KRAFTLAB, "campaign", str(campaign), "--out", str(out), "--keep-runs", "failures"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=600)
    # No `expect` block: exit 1 when some run found a violation (elr off may), else 0.
    assert second.returncode in (0, 1), second.stdout[-3000:] + second.stderr[-3000:]
    assert f"resuming: {len(before)} runs already done" in second.stdout
    after = log_lines(out)
    runs = [row["run"] for row in after]
    assert sorted(runs) == sorted(f"c{c}-s{s}" for c in (0, 1) for s in range(8))  # each exactly once
    # The runs finished before the kill kept their lines: the first lines of the log, unchanged.
    assert {row["run"]: row for row in after[:len(before)]} == before
    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == 16 and sorted(table.column("run").to_pylist()) == sorted(runs)
    assert set(table.column("cluster.protocol.elr").to_pylist()) == {True, False}
    # Every run directory is complete; no half-written one is left.
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(runs)
    assert all((out / "runs" / run / "summary.json").is_file() for run in runs)
    for row in after:
        kept = row["run"] in before or row["status"] != "ok"
        assert row["history_kept"] == kept and (out / "runs" / row["run"] / "events").is_dir() == kept, row["run"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["done"] == 16 and [c["runs"] for c in summary["cells"]] == [8, 8]
    assert summary["errors"] == 0 and (second.returncode == 1) == (summary["unexpected"] > 0)


def test_a_campaign_of_ray_runtime_runs_two_clusters_at_once(tmp_path):
    """`runtime: ray` runs are clusters of actors on the embedded Ray, `--parallel` of them at once."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        "name: on-ray\nscenario: random-faults\nseeds: 2\nset: {runtime: ray}\n"
        "faults: {kinds: [crash_process, isolate], mean_interval_ms: 1500, duration_ms: 3000, converge_ms: 30000}\n"
        "load: {producers: 1, consumers: 1, rate_per_s: 20, acks: all}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*KRAFTLAB, "campaign", str(campaign), "--out", str(tmp_path / "out"), "--parallel", "2", "--keep-runs", "failures"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    assert sorted(r["run"] for r in rows) == ["c0-s0", "c0-s1"] and {r["status"] for r in rows} == {"ok"}
    summaries = [json.loads((tmp_path / "out" / "runs" / r["run"] / "summary.json").read_text()) for r in rows]
    assert {s["runtime"] for s in summaries} == {"ray"} and all(s["stats"]["acked"] > 0 for s in summaries)
    assert all(r["replay"].endswith("--runtime ray") for r in rows)
    # Both found nothing: their history, metrics and Ray logs were removed, their scenario kept.
    assert [r["history_kept"] for r in rows] == [False, False]
    assert all(sorted(p.name for p in (tmp_path / "out" / "runs" / r["run"]).iterdir()) == ["scenario.yaml", "summary.json"] for r in rows)


def test_hunt_as_ray_tasks_gives_each_run_the_verdict_it_gets_in_the_command_s_process(tmp_path):
    """`kraftlab campaign hunt` (faults from a swarm mix drawn per seed): its simulator runs as Ray
    tasks on the embedded Ray, and the same seeds one after another in the command's own process
    (`--parallel 0`), give each run the same verdict and trace: a run depends on its seed alone."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    verdicts = []
    for out, parallel in ((tmp_path / "ray", []), (tmp_path / "here", ["--parallel", "0"])):
        done = subprocess.run([*KRAFTLAB, "campaign", "hunt", "--seeds", "3", "--first-seed", "100000", "--out", str(out),
                               "--minimize-budget", "0", *parallel], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
        rows = pq.read_table(out / "results.parquet").to_pylist()
        verdicts.append({r["run"]: (r["status"], r["signature"], r["stats.trace_hash"]) for r in rows})
    assert len(verdicts[0]) == 3 and verdicts[0] == verdicts[1]
