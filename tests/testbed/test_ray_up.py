"""The README's cluster walk-through on a testbed, for real: `kraftlab testbed up`, `ray up` of its
cluster file (one Ray node per host, over SSH), a scenario through `ray exec`, `ray rsync-down` of
the run directory, `ray down`, `kraftlab testbed down`.

Three hosts: the head and two workers, so that the three brokers run on three hosts that share no
/tmp, /dev/shm, home or process table, and the driver (on the head) shares none with two of them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import on_host

pytestmark = pytest.mark.testbed

NAME = "ci-rayup"
HOSTS = 3
SCENARIO = "last-replica-standing-elr"
RAY = str(Path(sys.executable).parent / "ray")
NODES_PY = ("import json, ray; ray.init(address='auto', logging_level='ERROR'); "
            "print('NODES', json.dumps(sorted([n['NodeID'], n['NodeManagerAddress']] for n in ray.nodes() if n['Alive'])))")


def log(message: str) -> None:
    print(f"[testbed ray up {time.strftime('%H:%M:%S')}] {message}", flush=True)


def ray(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([RAY, *args], text=True, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


def tail(done: subprocess.CompletedProcess, lines: int = 30) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-lines:])


def alive_nodes(cluster: str) -> list[list[str]]:
    done = ray("exec", cluster, f'python -c "{NODES_PY}"', timeout=120)
    match = re.search(r"^NODES (.*)$", done.stdout, re.MULTILINE)
    return json.loads(match.group(1)) if done.returncode == 0 and match else []


def test_ray_up_exec_rsync_down_on_the_testbed(make_testbed, tmp_path):
    tb, described = make_testbed(NAME, HOSTS)
    cluster = described["cluster_file"]
    addresses = sorted(h["address"] for h in described["hosts"])
    started = time.monotonic()
    try:
        up = ray("up", "-y", "--no-config-cache", cluster)
        log(f"ray up: exit {up.returncode} after {time.monotonic() - started:.1f} s")
        assert up.returncode == 0, tail(up)

        # The head's autoscaler starts Ray on the workers over SSH after `ray up` returns.
        nodes = alive_nodes(cluster)
        while len(nodes) < HOSTS and time.monotonic() - started < 240:
            time.sleep(3)
            nodes = alive_nodes(cluster)
        log(f"{len(nodes)} Ray nodes after {time.monotonic() - started:.1f} s: {nodes}")
        assert sorted(address for _, address in nodes) == addresses, nodes

        run = ray("exec", cluster, f"kraftlab run {SCENARIO} --runtime ray --address auto --out runs/ci", timeout=600)
        log(f"ray exec kraftlab run: exit {run.returncode} after {time.monotonic() - started:.1f} s")
        assert run.returncode == 0, tail(run)

        back = tmp_path / "back"
        synced = ray("rsync-down", cluster, "runs/ci/", f"{back}/", timeout=120)
        assert synced.returncode == 0, tail(synced)
        summary = json.loads((back / "summary.json").read_text())
        assert summary["ok"] is True and summary["runtime"] == "ray" and not summary["failures"], summary
        assert (back / "events").is_dir() and (back / "metrics.om").is_file()
        # Three hosts, three brokers: one broker on each Ray node, i.e. on each host.
        brokers = {name: node for name, node in summary["stats"]["placement"].items() if re.fullmatch(r"b\d", name)}
        assert sorted(brokers.values()) == sorted(node_id for node_id, _ in nodes), (brokers, nodes)

        # The run directory is on the head only (the driver ran there), not on the machine.
        assert on_host(NAME, "h1", "test -f runs/ci/summary.json").returncode == 0
        assert on_host(NAME, "h2", "test -e runs/ci").returncode != 0
    finally:
        down = ray("down", "-y", cluster, timeout=300)
        log(f"ray down: exit {down.returncode} after {time.monotonic() - started:.1f} s")
    assert down.returncode == 0, tail(down)
    # `ray down` stops Ray on the head: Ray's `local` provider has no way to stop its workers.
    assert on_host(NAME, "h1", "pgrep -x raylet").returncode != 0
