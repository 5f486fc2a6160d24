"""`kraftlab cluster up|status|fault|down` as a user drives it (kraftlab/cluster_command.py): a
cluster that serves Kafka clients until told to stop, a leader's host crashed by hand between two
batches of kcat's records, and the verdict `down` reports, with the hand-made faults in the
history (`source: cli`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (.ci/run installs Debian's)")]

KRAFTLAB = [sys.executable, "-m", "kraftlab.cli"]


def kraftlab(*args: str, env: dict, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run([*KRAFTLAB, *args], capture_output=True, text=True, env=env, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"kraftlab {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def produce(servers: str, lines: list[str]) -> None:
    subprocess.run(["kcat", "-b", servers, "-P", "-t", "t", "-p", "0", "-X", "acks=all", "-X", "message.timeout.ms=60000"],
                   input="\n".join(lines) + "\n", text=True, timeout=90, check=True, capture_output=True)


def test_a_cluster_up_takes_kafka_clients_and_faults_by_hand_until_down(tmp_path):
    env = {**os.environ, "KRAFTLAB_STATE_DIR": str(tmp_path / "state")}
    run_dir = tmp_path / "run"
    up = subprocess.Popen([*KRAFTLAB, "cluster", "up", "--out", str(run_dir), "--name", "t"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        state = tmp_path / "state" / "clusters" / "t.json"
        deadline = time.monotonic() + 120
        while not state.exists():
            assert up.poll() is None and time.monotonic() < deadline, f"up ended or never served: {up.stdout.read() if up.poll() is not None else ''}"
            time.sleep(1)
        servers = json.loads(state.read_text())["bootstrap_servers"]
        assert "bootstrap servers" in kraftlab("cluster", "status", "--name", "t", env=env).stdout
        produce(servers, [f"before-{i}" for i in range(50)])
        # The leader's host crashes (its page cache lost): its followers take over.
        kraftlab("cluster", "fault", "crash", "partition-leader:t-0", "--mode", "os", "--name", "t", env=env)
        produce(servers, [f"after-{i}" for i in range(30)])
        kraftlab("cluster", "fault", "restart", "b1", "--name", "t", env=env)
        refused = kraftlab("cluster", "fault", "isolate", "b9", "--name", "t", env=env, check=False)
        assert refused.returncode == 2 and "unknown node 'b9'" in refused.stderr
        down = kraftlab("cluster", "down", "--name", "t", env=env, timeout=300)
        assert "result ok" in down.stdout and "acked_lost 0" in down.stdout
        assert up.wait(timeout=120) == 0
    finally:
        if up.poll() is None:
            up.kill()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ok"] and summary["stats"]["acked"] == 80
    # b1 restarted: its listener has a new port, the others' stay.
    before, after = servers.split(","), summary["bootstrap_servers"].split(",")
    assert len(after) == 3 and before[1:] == after[1:]
    rows = pq.read_table(run_dir / "events", columns=["kind", "fault", "target", "source"]).to_pylist()
    by_hand = [(r["fault"], r["target"]) for r in rows if r["kind"] == "fault" and r["source"] == "cli"]
    assert by_hand == [("crash_os", "b1"), ("restart", "b1")]
    assert not Path(tmp_path / "state" / "clusters" / "t.sock").exists()
