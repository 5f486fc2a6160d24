"""The series served live from a run on Ray (`kraftlab run --runtime ray --metrics-port`), scraped
every second by a real Prometheus and queried over HTTP after the run: the same model as
metrics.om, read while the driver collects the actors' events."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.skipif(shutil.which("prometheus") is None, reason="Prometheus not installed (.ci/run installs it)")]
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query_range(base: str, expr: str, start: float, end: float) -> list[float]:
    args = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 1})
    answer = json.load(urllib.request.urlopen(f"{base}/api/v1/query_range?{args}", timeout=10))
    assert answer["status"] == "success", answer
    return [float(v) for series in answer["data"]["result"] for _, v in series["values"]]


def test_prometheus_scrapes_a_ray_run_live(tmp_path):
    metrics_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s}\nscrape_configs:\n"
                      f"  - job_name: kraftlab\n    static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{prom_port}"
    try:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env["PYTHONPATH"] = str(ROOT)
        started = time.time()
        run = subprocess.run([sys.executable, "-m", "kraftlab.cli", "run", "last-replica-standing-elr", "--runtime", "ray",
                              "--metrics-port", str(metrics_port), "--out", str(tmp_path / "run")],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        ended = time.time()
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"metrics: http://127.0.0.1:{metrics_port}/metrics" in run.stdout
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        isr = query_range(base, "kraftlab_partition_isr_size", started, ended + 1)
        assert len(isr) >= 10 and max(isr) == 3  # scraped for seconds while the run went
        assert min(isr) == 0  # brokers 3 and 2 fell out, then the last one, broker 1, crashed
        # KIP-966: below MinISR the ISR's leavers wait in the ELR (for seconds here; the offline spell
        # with an ELR member, about a second on Ray, is checked on simulated runs in tests/prometheus).
        assert max(query_range(base, "kraftlab_partition_elr_size", started, ended + 1)) >= 1
        active = query_range(base, "sum(kafka_controller_kafkacontroller_activecontrollercount)", started, ended + 1)
        assert max(active) == 1
        acked = query_range(base, 'kraftlab_records_total{outcome="ok"}', started, ended + 1)
        assert 0 < max(acked) <= summary["stats"]["acked"]
        assert max(query_range(base, "kraftlab_records_lost", started, ended + 1)) == 0
    finally:
        prom.terminate()
        prom.wait(10)
