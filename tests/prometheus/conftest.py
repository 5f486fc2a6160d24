"""A real Prometheus (Debian's package: `prometheus` and `promtool`, which .ci/run installs) on
loopback, on a TSDB loaded with `kraftlab metrics load` from two library runs in the simulator,
Last Replica Standing with ELR on and off, as one campaign directory (runs/elr, runs/no-elr)."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftlab.cli import main
from kraftlab.runner import run_scenario
from observability.metrics.openmetrics import SIM_EPOCH_S
from observability.metrics.tsdb import served_tsdb
from workloads.scenario.loading import load_scenario

ROOT = Path(__file__).resolve().parents[2]
RUNS = {"elr": "last-replica-standing-load", "no-elr": "last-replica-standing-load-no-elr"}


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:<port>
    summaries: dict[str, dict]  # run -> summary.json
    end: float  # the runs' last simulated second (SIM_EPOCH_S + the longest run)

    def get(self, path: str, **args) -> dict:
        answer = json.load(urllib.request.urlopen(f"{self.base}{path}?{urllib.parse.urlencode(args, doseq=True)}", timeout=10))
        assert answer["status"] == "success", answer
        return answer["data"]

    def query_range(self, expr: str, seconds: float = 120) -> list[dict]:
        return self.get("/api/v1/query_range", query=expr, start=SIM_EPOCH_S, end=SIM_EPOCH_S + seconds, step=1)["result"]


@pytest.fixture(scope="session")
def served_prometheus(tmp_path_factory):
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Prometheus not installed (Debian: apt-get install prometheus; .ci/run does)")
    root = tmp_path_factory.mktemp("campaign")
    summaries = {}
    for run, name in RUNS.items():
        scenario, _ = load_scenario(name)
        summaries[run] = run_scenario(scenario, source=name, out_dir=root / "runs" / run).summary
    tsdb = root / "tsdb"
    result = CliRunner().invoke(main, ["metrics", "load", str(root), "--tsdb", str(tsdb)])
    assert result.exit_code == 0, result.output
    with served_tsdb(tsdb, ROOT / "infra/prometheus/empty.yml") as base:
        end = SIM_EPOCH_S + max(s["stats"]["sim_ms"] for s in summaries.values()) / 1000
        yield Served(base, summaries, end)


@pytest.fixture(scope="module")
def prometheus(served_prometheus):
    """(query_range, the runs' summaries)."""
    return served_prometheus.query_range, served_prometheus.summaries
