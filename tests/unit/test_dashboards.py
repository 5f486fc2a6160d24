"""The Grafana dashboards as code (observability/metrics/dashboards.py): the committed JSON is what
`kraftlab dashboards generate` writes now, it parses into the typed models of Grafana's dashboard
schema that grafana-foundation-sdk is generated from, and `kraftlab dashboards push` uploads it
with grafana-client (to a stand-in Grafana HTTP server: Grafana cannot be installed here). The
queries run against a real Prometheus in tests/prometheus/test_dashboards.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import dashboard as md

from kraftlab.cli import main
from observability.metrics.dashboards import DASHBOARDS, generate, panel_queries

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "infra/grafana/dashboards"
# Fields of a Prometheus annotation query the SDK's generic AnnotationQuery does not model.
ANNOTATION_EXTRAS = {"step", "titleFormat", "textFormat", "tagKeys", "useValueForTime"}


def test_committed_json_is_what_generate_writes_now(tmp_path):
    result = CliRunner().invoke(main, ["dashboards", "generate", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    generated = generate()
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(generated)
    for name, text in generated.items():
        assert (tmp_path / name).read_text() == text
        assert (DIR / name).is_file(), f"{DIR / name}: missing; run `kraftlab dashboards generate`"
        assert (DIR / name).read_text() == text, f"{DIR / name} is stale; run `kraftlab dashboards generate`"


@pytest.mark.parametrize("name", [spec.name for spec in DASHBOARDS])
def test_json_round_trips_through_grafanas_schema_models(name):
    """Parsed into the SDK's typed models (generated from Grafana 11.6's dashboard schema, with the
    panel and query plugins registered) and written back, the JSON is unchanged but for the
    annotation fields the SDK does not model."""
    register_default_plugins()
    data = json.loads((DIR / f"{name}.json").read_text())
    model = md.Dashboard.from_json(data)
    assert model.schema_version >= 39 and model.uid == f"kraftlab-{name}"
    assert all(type(t).__module__.endswith(".prometheus") for p in model.panels for t in p.targets)
    back = json.loads(json.dumps(model, cls=JSONEncoder, sort_keys=True))
    for a in data["annotations"]["list"]:
        for key in ANNOTATION_EXTRAS:
            a.pop(key, None)
    assert back == data


def test_panels_variables_and_layout():
    uids = set()
    for text in generate().values():
        model = json.loads(text)
        uids.add(model["uid"])
        variables = {v["name"]: v for v in model["templating"]["list"]}
        assert set(variables) == {"datasource", "run", "topic", "partition"}
        for name in ("run", "topic", "partition"):
            assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
        for panel in model["panels"]:
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert 0 <= panel["gridPos"]["x"] and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
            refs = [t["refId"] for t in panel["targets"]]
            assert refs and len(refs) == len(set(refs))
        for _, target in panel_queries(model):
            assert 'run=~"$run"' in target["expr"]  # every query follows the run variable
    assert len(uids) == len(DASHBOARDS)


class _FakeGrafana(BaseHTTPRequestHandler):
    """The few endpoints of Grafana's HTTP API that push uses; records what it was sent."""

    requests: list[tuple[str, str, str | None, dict | None]] = []
    folders: set[str] = set()

    def _answer(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.requests.append((self.command, self.path, self.headers.get("Authorization"), body))
        return body

    def do_GET(self):
        self._record()
        uid = self.path.rsplit("/", 1)[-1]
        if self.path.startswith("/api/folders/") and uid in self.folders:
            self._answer(200, {"uid": uid, "title": "kraftlab"})
        else:
            self._answer(404, {"message": "folder not found"})

    def do_POST(self):
        body = self._record()
        if self.path == "/api/folders":
            self.folders.add(body["uid"])
            self._answer(200, {"uid": body["uid"], "title": body["title"]})
        elif self.path == "/api/dashboards/db":
            self._answer(200, {"status": "success", "uid": body["dashboard"]["uid"], "version": 1})
        else:
            self._answer(404, {"message": "not found"})

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_grafana():
    _FakeGrafana.requests = []
    _FakeGrafana.folders = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGrafana)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _FakeGrafana
    finally:
        server.shutdown()
        server.server_close()


def test_push_uploads_every_dashboard_into_the_kraftlab_folder_with_the_token(fake_grafana, monkeypatch):
    url, grafana = fake_grafana
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_test")
    for _ in range(2):  # the second push finds the folder and overwrites
        result = CliRunner().invoke(main, ["dashboards", "push", "--url", url, "--from", str(DIR)])
        assert result.exit_code == 0, result.output
    assert {auth for _, _, auth, _ in grafana.requests} == {"Bearer glsa_test"}
    assert [m for m, p, _, _ in grafana.requests if p == "/api/folders"] == ["POST"]  # created once
    posted = [body for m, p, _, body in grafana.requests if p == "/api/dashboards/db"]
    assert len(posted) == 2 * len(DASHBOARDS)
    assert {b["dashboard"]["uid"] for b in posted} == {f"kraftlab-{s.name}" for s in DASHBOARDS}
    assert all(b["folderUid"] == "kraftlab" and b["overwrite"] and b["dashboard"]["id"] is None for b in posted)


def test_push_without_token_or_url_is_bad_input(monkeypatch):
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["dashboards", "push", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "GRAFANA_TOKEN" in result.output
    monkeypatch.setenv("GRAFANA_TOKEN", "t")
    result = CliRunner().invoke(main, ["dashboards", "push"])
    assert result.exit_code == 2 and "--url" in result.output
    result = CliRunner().invoke(main, ["dashboards", "push", "--url", "http://127.0.0.1:9", "--token", "t"])
    assert result.exit_code == 2  # no such option: the token never comes from the command line


def test_provisioning_names_the_dashboards_datasource_and_folder():
    import yaml

    from kraftlab.dashboards import FOLDER_UID
    from observability.metrics.dashboards import DATASOURCE_UID

    provisioning = ROOT / "infra/grafana/provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())["datasources"]
    assert source["uid"] == DATASOURCE_UID and source["type"] == "prometheus"
    (provider,) = yaml.safe_load((provisioning / "dashboards/kraftlab.yml").read_text())["providers"]
    assert provider["folderUid"] == FOLDER_UID and provider["type"] == "file"
    for text in generate().values():
        datasource = next(v for v in json.loads(text)["templating"]["list"] if v["name"] == "datasource")
        assert datasource["current"]["value"] == DATASOURCE_UID and datasource["query"] == "prometheus"
