"""The fake multi-node tier: a Ray cluster of 3 nodes on this machine, started as a user would
(`RAY_FAKE_CLUSTER=1 ray start --head --autoscaling-config=infra/ray/fake/multinode.yaml`: the
head's autoscaler starts the 2 workers), and kraftlab's commands run against it through the CLI,
in subprocesses, with `--address`:

- `kraftlab run --address auto` (the cluster found through RAY_TMPDIR) places the 3 brokers on 3
  distinct Ray nodes, as Ray's state API sees the actors, and a scenario passes in which the test
  removes broker 2's Ray node (a host crash: kraftlab moves the host to a surviving node);
- `kraftlab campaign --address HOST:PORT` runs its simulator runs as Ray tasks on more than one node
  (on the 2 nodes left after the run's host crash).

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
import urllib.request
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
    # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: Ray's single-machine mode, every fake node (all of them
    # processes of this machine) and every driver on 127.0.0.1, as kraftlab's embedded Ray.
    env.update(RAY_TMPDIR=tmp, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    dashboard = f"http://127.0.0.1:{dashboard_port}"
    try:
        start = subprocess.run(
            [ray_command(), "start", "--head", f"--port={gcs_port}", "--num-cpus=1", f"--autoscaling-config={config_path}",
             f"--dashboard-port={dashboard_port}", f"--ray-client-server-port={free_port()}", "--disable-usage-stats"],
            env={**env, "RAY_FAKE_CLUSTER": "1"}, capture_output=True, text=True, timeout=START_TIMEOUT_S,
        )
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
        assert {n.node_ip for n in alive} == {"127.0.0.1"}
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


# The test removes broker 2's Ray node (its raylet and every process under it killed) while the
# run waits for it: a host crash, which kraftlab turns into an OS crash of every host on that node.
NODE_LOSS = """
name: fake-node-loss
runtime: ray
cluster:
  brokers: 3
  controllers: 3
  storage: page_cache
  config: {min.insync.replicas: 2, replica.lag.time.max.ms: 5000}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - produce: {topic: t, count: 10, acks: all, expect: acked}
  - wait_for: {broker: 2, alive: false, timeout_ms: 120000}
  - wait_for: {partition: t-0, isr: [1, 3], timeout_ms: 30000}
  - produce: {topic: t, count: 10, acks: all, expect: acked}
  - restart: b2
  - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
  - expect: {acked: 20, acked_lost: 0}
"""


def node_actors(dashboard: str) -> list:
    """Every node actor Ray knows of, dead ones too, each named by its `__repr__` (`NodeActor(b2)`)."""
    return list_actors(address=dashboard, filters=[("class_name", "=", "NodeActor")], detail=True, limit=1000)


def remove_node(node_id: str) -> int:
    """Kill the raylet of Ray node `node_id` and every process under it (its workers: the actors of
    the hosts placed there), as a machine that loses power would. Returns how many were killed."""
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmdline = p.info["cmdline"] or []
            if cmdline and cmdline[0].endswith("raylet") and f"--node_id={node_id}" in cmdline:
                processes = [p, *p.children(recursive=True)]
                for q in processes:
                    q.kill()
                return len(processes)
        except psutil.Error:
            continue
    return 0


def acked(metrics_port: int) -> float:
    """Records acknowledged so far, from the run's live metrics (`kraftlab_records_total`)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except OSError:  # not serving yet
        return 0.0
    lines = [line for line in text.splitlines() if line.startswith("kraftlab_records_total{") and 'outcome="ok"' in line]
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


def test_run_places_brokers_on_distinct_nodes_and_survives_a_host_crash(fake_cluster, tmp_path):
    scenario, out, metrics_port = tmp_path / "node-loss.yaml", tmp_path / "run", free_port()
    scenario.write_text(NODE_LOSS)
    env = {**fake_cluster["env"], "RAY_ADDRESS": ""}  # `auto`: the cluster recorded in RAY_TMPDIR
    run = subprocess.Popen([*KRAFTLAB, "run", str(scenario), "--address", "auto", "--out", str(out), "--metrics-port", str(metrics_port)],
                           env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The node goes once the cluster is up and the first 10 records are acknowledged.
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while acked(metrics_port) < 10 and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.5)
        # Where Ray runs each broker's process: its state API, not kraftlab's own report.
        brokers = [f"NodeActor(b{i})" for i in (1, 2, 3)]
        where = {a.repr_name: a.node_id for a in node_actors(fake_cluster["dashboard"]) if a.state == "ALIVE" and a.repr_name in brokers}
        assert len(where) == 3, f"brokers alive: {where}"
        assert len(set(where.values())) == NODES and set(where.values()) == fake_cluster["nodes"]
        lost = where["NodeActor(b2)"]
        assert remove_node(lost) > 1  # the raylet and at least b2's worker
        output, _ = run.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is True and summary["failures"] == [] and summary["violations"] == []
    assert summary["stats"]["acked"] == 20 and summary["stats"]["acked_lost"] == 0

    assert [n.node_id for n in list_nodes(address=fake_cluster["dashboard"]) if n.state == "DEAD"] == [lost]
    b2 = [a for a in node_actors(fake_cluster["dashboard"]) if a.repr_name == "NodeActor(b2)"]
    # b2's first process died with its node; the restart made another on a surviving node.
    assert len(b2) == 2 and [a.node_id for a in b2].count(lost) == 1
    assert {a.node_id for a in b2} - {lost} == {summary["stats"]["placement"]["b2"]}
    assert summary["stats"]["placement"]["b1"] == where["NodeActor(b1)"] and summary["stats"]["placement"]["b3"] == where["NodeActor(b3)"]


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
