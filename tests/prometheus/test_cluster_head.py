"""The Prometheus a `ray up` head runs: `infra/ray/node.sh start-monitoring`, in a home laid out
as on a node (~/kraftlab/infra), starts a real Prometheus with infra/prometheus/prometheus.yml on
127.0.0.1:9090, its alert rules loaded and both scrape jobs there; started again (a second
`ray up`), it replaces the first. Grafana is not installed here: node.sh skips it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = "http://127.0.0.1:9090"


def get(path: str) -> dict:
    answer = json.load(urllib.request.urlopen(f"{BASE}{path}", timeout=5))
    assert answer["status"] == "success", answer
    return answer["data"]


def wait_ready(timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{BASE}/-/ready", timeout=1).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("Prometheus did not become ready")


def active_targets(timeout_s: float = 30.0) -> dict[str, dict]:
    """job -> a target of it, once the scrape manager has listed any (a moment after ready)."""
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = {t["labels"]["job"]: t for t in get("/api/v1/targets")["activeTargets"]}
        if jobs or time.monotonic() > deadline:
            return jobs
        time.sleep(0.2)


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture()
def node_home(tmp_path):
    if shutil.which("prometheus") is None:
        pytest.skip("Prometheus not installed (Debian: apt-get install prometheus; .ci/run does)")
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 9090)) == 0:
            pytest.skip("127.0.0.1:9090, the port a head's Prometheus uses, is taken on this machine")
    (tmp_path / "kraftlab").mkdir()
    (tmp_path / "kraftlab/infra").symlink_to(ROOT / "infra")
    yield tmp_path
    pid = (tmp_path / "prometheus.pid").read_text().strip() if (tmp_path / "prometheus.pid").exists() else ""
    if pid and running(int(pid)):
        os.kill(int(pid), 15)
        for _ in range(100):
            if not running(int(pid)):
                break
            time.sleep(0.1)


def start_monitoring(home: Path) -> int:
    subprocess.run(["bash", str(ROOT / "infra/ray/node.sh"), "start-monitoring"], env={**os.environ, "HOME": str(home)},
                   check=True, timeout=60)
    wait_ready()
    return int((home / "prometheus.pid").read_text())


def test_head_prometheus_starts_with_the_repositorys_config(node_home):
    first = start_monitoring(node_home)
    flags = get("/api/v1/status/flags")
    assert flags["web.listen-address"] == "127.0.0.1:9090"
    assert flags["config.file"] == str(node_home / "kraftlab/infra/prometheus/prometheus.yml")
    rules = {rule["name"] for group in get("/api/v1/rules")["groups"] for rule in group["rules"]}
    assert {"OfflinePartitions", "AcknowledgedRecordsLost", "NoActiveController"} <= rules
    assert active_targets()["kraftlab"]["scrapeUrl"] == "http://127.0.0.1:9400/metrics"
    # The `ray` job's targets come from Ray's service-discovery file: none unless a Ray runs here.
    config = get("/api/v1/status/config")["yaml"]
    assert "/tmp/ray/prom_metrics_service_discovery.json" in config

    second = start_monitoring(node_home)  # what a second `ray up` does
    assert second != first and not running(first)
    assert get("/api/v1/status/flags")["web.listen-address"] == "127.0.0.1:9090"
