"""The fake multi-node tier: a Ray cluster of 3 nodes on this machine, started as a user would
(`RAY_FAKE_CLUSTER=1 ray start --head --autoscaling-config=infra/ray/fake/multinode.yaml`: the
head's autoscaler starts the 2 workers), and kraftlab's commands run against it through the CLI,
in subprocesses, with `--address`:

- `kraftlab run --address auto` (the cluster found through RAY_TMPDIR) places the 3 brokers on 3
  distinct Ray nodes, as Ray's state API sees the actors, and a scenario with an OS crash of a
  broker's host passes;
- `kraftlab campaign --address HOST:PORT` runs its simulator runs as Ray tasks on more than one node.

This process never joins the cluster (no `ray.init`): it reads the cluster through the dashboard's
state API, so the embedded Ray of other modules in the same pytest run is untouched. The cluster's
processes all have its temp dir on their command line; teardown kills those and their children,
never `ray stop` (which would stop every Ray of the user on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
import yaml
from ray.util.state import list_actors, list_nodes, list_tasks

from actors.runtime.ray import adapter

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_FILE = ROOT / "infra" / "ray" / "fake" / "multinode.yaml"
KRAFTLAB = [sys.executable, "-c", "from kraftlab.cli import main; main()"]
NODES = 3
START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_command() -> str:
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else shutil.which("ray") or "ray"


def cluster_processes(temp_dir: str) -> set[psutil.Process]:
    """This user's processes with the cluster's temp dir (`temp_dir`/ray/) on their command line,
    and their children (Ray's workers rename themselves `ray::...`, but die with their raylet
    anyway). Never this process or its parents, whatever their command line."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    marker = os.path.join(temp_dir, "ray", "")
    found = set()
    for p in psutil.process_iter(["cmdline", "uids"]):
        try:
            if p.pid not in mine and p.info["uids"].real == os.getuid() and any(marker in arg for arg in p.info["cmdline"] or []):
                found.add(p)
                found.update(c for c in p.children(recursive=True) if c.pid not in mine)
        except (psutil.Error, TypeError):
            continue
    return found


def stop_cluster(temp_dir: str) -> None:
    processes = cluster_processes(temp_dir)
    for p in processes:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(list(processes), timeout=3)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture(scope="module")
def fake_cluster():
    adapter.shutdown()  # this process holds no Ray of its own while the fake cluster lives
    # A short folder of its own (Ray's socket paths must stay under 108 bytes): its `ray`
    # subfolder is the cluster's temp dir, where `--address auto` finds the cluster.
    tmp = tempfile.mkdtemp(prefix="kfake-")
    gcs_port, dashboard_port = free_port(), free_port()
    config = yaml.safe_load(CLUSTER_FILE.read_text())
    config["provider"]["gcs_address"] = f"127.0.0.1:{gcs_port}"
    config_path = Path(tmp) / "cluster.yaml"
    config_path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # RAY_AUTH_MODE: `ray start` turns token authentication on when ~/.ray/auth_token exists, and
    # the state API's HTTP client here would then need the token: the same mode whatever the home
    # folder holds. PYTHONPATH: the workers import this checkout's kraftlab.
    env.update(RAY_TMPDIR=tmp, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled")
    start = subprocess.run(
        [ray_command(), "start", "--head", f"--port={gcs_port}", "--num-cpus=1", f"--autoscaling-config={config_path}",
         f"--dashboard-port={dashboard_port}", f"--ray-client-server-port={free_port()}", "--disable-usage-stats"],
        env={**env, "RAY_FAKE_CLUSTER": "1"}, capture_output=True, text=True, timeout=START_TIMEOUT_S,
    )
    dashboard = f"http://127.0.0.1:{dashboard_port}"
    try:
        assert start.returncode == 0, start.stderr[-3000:]
        deadline = time.monotonic() + START_TIMEOUT_S
        alive = []
        while time.monotonic() < deadline:
            try:
                alive = [n for n in list_nodes(address=dashboard) if n.state == "ALIVE"]
            except Exception:  # noqa: BLE001 - the dashboard is still starting
                alive = []
            if len(alive) == NODES:
                break
            time.sleep(1)
        assert len(alive) == NODES, f"{len(alive)} of {NODES} Ray nodes alive after {START_TIMEOUT_S} s"
        yield {"address": f"127.0.0.1:{gcs_port}", "dashboard": dashboard, "env": env, "tmp": tmp,
               "nodes": {n.node_id for n in alive}}
    finally:
        stop_cluster(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def kraftlab(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*KRAFTLAB, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def test_three_nodes_of_one_cpu(fake_cluster):
    nodes = list_nodes(address=fake_cluster["dashboard"], detail=True)
    alive = [n for n in nodes if n.state == "ALIVE"]
    assert len(alive) == NODES
    assert [n.resources_total.get("CPU") for n in alive] == [1.0] * NODES
    assert sum(n.is_head_node for n in alive) == 1


def test_run_places_brokers_on_distinct_nodes_and_survives_a_host_crash(fake_cluster, tmp_path):
    """page-cache-recovery: broker 1's host has an OS crash (every process of the host killed, its
    files cut to what was flushed), restarts and catches up; nothing acknowledged is lost."""
    out = tmp_path / "run"
    env = {**fake_cluster["env"], "RAY_ADDRESS": ""}  # `auto`: the cluster recorded in RAY_TMPDIR
    done = kraftlab(["run", "page-cache-recovery", "--runtime", "ray", "--address", "auto", "--out", str(out)], env, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is True and summary["failures"] == [] and summary["violations"] == []
    assert summary["stats"]["acked"] == 3 and summary["stats"]["acked_lost"] == 0

    # Where Ray ran each broker's process: its state API, not kraftlab's own report.
    actors = list_actors(address=fake_cluster["dashboard"], filters=[("class_name", "=", "NodeActor")], detail=True, limit=1000)
    where: dict[str, set[str]] = {}
    for actor in actors:
        where.setdefault(actor.repr_name, set()).add(actor.node_id)
    brokers = [f"NodeActor(b{i})" for i in (1, 2, 3)]
    assert all(len(where.get(b, ())) == 1 for b in brokers), where
    broker_nodes = [next(iter(where[b])) for b in brokers]
    assert len(set(broker_nodes)) == NODES and set(broker_nodes) == fake_cluster["nodes"]
    # The crash killed b1's process and the restart made another one (same host: same node).
    assert len([a for a in actors if a.repr_name == "NodeActor(b1)"]) == 2
    assert {f"b{i}": n for i, n in zip((1, 2, 3), broker_nodes)} == {b: summary["stats"]["placement"][b] for b in ("b1", "b2", "b3")}


# Six simulator runs of a second or so each.
CAMPAIGN = """
name: spread
scenario: random-faults
seeds: 6
faults: {kinds: [crash_os, isolate], mean_interval_ms: 1500, duration_ms: 6000, converge_ms: 20000}
load: {producers: 1, consumers: 1, rate_per_s: 20, acks: all}
"""


def test_campaign_spreads_its_runs_over_the_nodes(fake_cluster, tmp_path):
    campaign, out = tmp_path / "campaign.yaml", tmp_path / "out"
    campaign.write_text(CAMPAIGN)
    done = kraftlab(["campaign", str(campaign), "--out", str(out), "--address", fake_cluster["address"], "--minimize-budget", "0"],
                    fake_cluster["env"], tmp_path)
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert len(rows) == 6 and all(row["status"] != "error" for row in rows), done.stdout[-3000:] + done.stderr[-3000:]
    assert all((out / "runs" / row["run"] / "summary.json").is_file() for row in rows)  # shipped back from their nodes

    tasks = list_tasks(address=fake_cluster["dashboard"], filters=[("func_or_class_name", "=", "execute_and_pack")], detail=True, limit=1000)
    finished = [t for t in tasks if t.state == "FINISHED"]
    assert len(finished) == 6
    assert len({t.node_id for t in finished}) > 1, [t.node_id for t in finished]
    assert {t.node_id for t in finished} <= fake_cluster["nodes"]
    # Each row names the node that ran it, as Ray does.
    assert sorted(row["ray_node"] for row in rows) == sorted(t.node_id for t in finished)
