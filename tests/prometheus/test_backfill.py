"""metrics.om of simulated runs, loaded into a real Prometheus (Debian's package: `prometheus` and
`promtool`, which .ci/run installs) with `kraftlab metrics load`, and queried over HTTP
(`/api/v1/query_range`): the series show what happened in Last Replica Standing, with ELR on and
off, as Kafka's metrics cannot (the re-election that loses records counts as clean)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftlab.cli import main
from kraftlab.runner import run_scenario
from observability.metrics.openmetrics import SIM_EPOCH_S
from workloads.scenario.loading import load_scenario

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None or shutil.which("promtool") is None,
                                reason="Prometheus not installed (Debian: apt-get install prometheus; .ci/run does)")

RUNS = {"elr": "last-replica-standing-load", "no-elr": "last-replica-standing-load-no-elr"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """Both runs as one campaign directory, loaded with `kraftlab metrics load`, served by a
    Prometheus on loopback; yields (query_range, the runs' summaries)."""
    root = tmp_path_factory.mktemp("campaign")
    summaries = {}
    for run, name in RUNS.items():
        scenario, _ = load_scenario(name)
        summaries[run] = run_scenario(scenario, source=name, out_dir=root / "runs" / run).summary
    tsdb = root / "tsdb"
    result = CliRunner().invoke(main, ["metrics", "load", str(root), "--tsdb", str(tsdb)])
    assert result.exit_code == 0, result.output
    port = free_port()
    proc = subprocess.Popen(["prometheus", f"--storage.tsdb.path={tsdb}", f"--config.file={ROOT / 'infra/prometheus/empty.yml'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if urllib.request.urlopen(f"{base}/-/ready", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("Prometheus did not become ready")

        def query_range(expr: str, seconds: float = 120) -> list[dict]:
            args = urllib.parse.urlencode({"query": expr, "start": SIM_EPOCH_S, "end": SIM_EPOCH_S + seconds, "step": 1})
            answer = json.load(urllib.request.urlopen(f"{base}/api/v1/query_range?{args}", timeout=10))
            assert answer["status"] == "success", answer
            return answer["data"]["result"]

        yield query_range, summaries
    finally:
        proc.terminate()
        proc.wait(10)


def values(result: list[dict]) -> list[float]:
    return [float(v) for series in result for _, v in series["values"]]


def test_records_lost_shows_the_loss_only_without_elr(prometheus):
    query_range, summaries = prometheus
    lost_off = values(query_range('kraftlab_records_lost{run="no-elr"}'))
    lost_on = values(query_range('kraftlab_records_lost{run="elr"}'))
    assert max(lost_off) == summaries["no-elr"]["stats"]["acked_lost"] > 0
    assert lost_on and max(lost_on) == 0


def test_kafkas_unclean_election_counter_stays_at_zero_while_records_are_lost(prometheus):
    query_range, _ = prometheus
    unclean = values(query_range('max(kafka_controller_controllerstats_uncleanleaderelections_total{run="no-elr"})'))
    assert unclean and max(unclean) == 0  # broker 1's re-election is "clean" to Kafka


def test_with_elr_the_partition_is_offline_with_an_elr_member_waiting(prometheus):
    query_range, _ = prometheus
    offline_with_elr = query_range('kraftlab_partition_elr_size{run="elr"} > 0 and on(run, topic, partition) '
                                   'kraftlab_partition_leader{run="elr"} == -1')
    assert len(values(offline_with_elr)) >= 5  # seconds: broker 2 is waited for
    offline = values(query_range('max(kafka_controller_kafkacontroller_offlinepartitionscount{run="elr"})'))
    assert max(offline) == 1


def test_acknowledged_records_and_latency_series(prometheus):
    query_range, summaries = prometheus
    acked = values(query_range('kraftlab_records_total{run="elr", outcome="ok"}'))
    assert max(acked) == summaries["elr"]["stats"]["acked"]
    count = values(query_range('kraftlab_produce_latency_seconds_count{run="elr"}'))
    assert max(count) == summaries["elr"]["stats"]["acked"]
    p99 = values(query_range('histogram_quantile(0.99, kraftlab_produce_latency_seconds_bucket{run="elr"})'))
    p99 = [v for v in p99 if v == v]  # NaN before the first acknowledgement
    assert p99 and max(p99) > 1.0  # records waited through the faults: seconds, not milliseconds
