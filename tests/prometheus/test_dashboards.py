"""Every PromQL query of every generated Grafana dashboard (infra/grafana/dashboards/*.json), run
against a real Prometheus holding two real runs (the `served_prometheus` fixture, conftest.py),
with Grafana's variables replaced as Grafana would at All ($run, $topic, $partition -> .*) and its
intervals given values ($__rate_interval -> 5s, $__interval -> 1s): each must parse and return at
least one series with a value. Grafana itself cannot be installed on these machines; this is the
JSON tested up to Grafana's boundary. The pictures (docs/dashboard-*.png) come from the same
queries through `kraftlab dashboards render`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraftlab.cli import main
from observability.metrics.dashboards import VARIABLES, annotation_queries, panel_queries, substitute
from observability.metrics.openmetrics import SIM_EPOCH_S

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_FILES = sorted((ROOT / "infra/grafana/dashboards").glob("*.json"))


def _queries() -> list[tuple[str, str, str]]:
    """(dashboard, what, expr) of every panel target and annotation of the committed JSON."""
    found = []
    for path in DASHBOARD_FILES:
        model = json.loads(path.read_text())
        found += [(path.stem, f"{title} [{t['refId']}]", t["expr"]) for title, t in panel_queries(model)]
        found += [(path.stem, f"annotation {name}", expr) for name, expr in annotation_queries(model)]
    return found


QUERIES = _queries()


def test_the_dashboards_have_queries():
    assert {p.stem for p in DASHBOARD_FILES} == {"cluster", "partitions", "clients", "faults"}
    assert len(QUERIES) >= 30


@pytest.mark.parametrize(("dashboard", "what", "expr"), QUERIES, ids=[f"{d}: {w}" for d, w, _ in QUERIES])
def test_every_panel_query_returns_series_from_a_real_run(served_prometheus, dashboard, what, expr):
    promql = substitute(expr)
    assert "$" not in promql.replace('"$1"', ""), f"a Grafana variable is left in {promql}"
    result = served_prometheus.get("/api/v1/query_range", query=promql, start=SIM_EPOCH_S, end=served_prometheus.end, step=1)
    series = result["result"]
    assert series, f"{dashboard}: {what}: no series for {promql}"
    assert any(math.isfinite(float(v)) for s in series for _, v in s["values"]), f"{dashboard}: {what}: only NaN"


def test_queries_at_all_match_a_single_run_without_the_run_label(served_prometheus):
    """A single run loaded on its own has no `run` label; `{run=~".*"}` (All) matches its series as a
    matcher on a label no series has does: the missing label is the empty string."""
    def count(selector: str) -> float:
        return max(float(v) for s in served_prometheus.query_range(f"count({selector})", 10) for _, v in s["values"])
    assert count('kraftlab_records_lost{absent_label=~".*"}') == count("kraftlab_records_lost") == 2


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_every_template_variable_has_values(served_prometheus, name):
    """`label_values(metric{selector}, label)`, as Grafana's Prometheus datasource asks it: the label's
    values over the series the selector matches."""
    query = substitute(VARIABLES[name])
    metric_selector, label = query[len("label_values("):-1].rsplit(",", 1)
    values = served_prometheus.get(f"/api/v1/label/{label.strip()}/values", **{"match[]": metric_selector.strip(),
                                   "start": SIM_EPOCH_S, "end": served_prometheus.end})
    assert values, f"{name}: no values for {query}"
    if name == "run":
        assert set(values) == {"elr", "no-elr"}


def test_render_draws_every_dashboard(served_prometheus, tmp_path):
    result = CliRunner().invoke(main, ["dashboards", "render", "--prometheus", served_prometheus.base,
                                       "--end", str(served_prometheus.end), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    pngs = sorted(p.name for p in tmp_path.glob("dashboard-*.png"))
    assert pngs == [f"dashboard-{p.stem}.png" for p in sorted(DASHBOARD_FILES, key=lambda p: f"dashboard-{p.stem}.png")]
    assert all((tmp_path / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
