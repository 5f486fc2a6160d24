"""`kraftlab dashboards push` and `render`: the generated dashboards (observability/metrics/dashboards.py)
uploaded to a Grafana server with grafana-client, or drawn with matplotlib from a Prometheus
(Grafana cannot run on these machines: the pictures show what the panels would show, from the same
queries)."""

from __future__ import annotations

import json
import math
import re
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from observability.metrics.dashboards import DASHBOARDS, DashboardSpec, build, substitute

FOLDER_UID = "kraftlab"
FOLDER_TITLE = "kraftlab"
LINE_STYLES = ("-", (0, (4, 2)), ":", "-.")


class DashboardsError(Exception):
    """Bad input for push or render (exit code 2)."""


# --- push -------------------------------------------------------------------------------------------

def push(url: str, token: str, dashboards_dir: Path | None = None) -> list[str]:
    """Upload every dashboard into the folder `kraftlab` (created if missing), overwriting the
    previous version; the JSON from `dashboards_dir` if given, else built now. Returns the uids."""
    from grafana_client import GrafanaApi
    from grafana_client.client import GrafanaClientError

    if dashboards_dir is not None:
        files = sorted(Path(dashboards_dir).glob("*.json"))
        if not files:
            raise DashboardsError(f"{dashboards_dir}: no dashboard JSON (run `kraftlab dashboards generate`)")
        models = [json.loads(p.read_text()) for p in files]
    else:
        models = [build(spec) for spec in DASHBOARDS]
    api = GrafanaApi.from_url(url, credential=token)
    try:
        api.folder.get_folder(FOLDER_UID)
    except GrafanaClientError as exc:
        if exc.status_code != 404:
            raise
        api.folder.create_folder(FOLDER_TITLE, uid=FOLDER_UID)
    for model in models:
        api.dashboard.update_dashboard({"dashboard": {**model, "id": None}, "folderUid": FOLDER_UID, "overwrite": True,
                                        "message": "kraftlab dashboards push"})
    return [m["uid"] for m in models]


# --- render -----------------------------------------------------------------------------------------

def query_range(prometheus: str, expr: str, start: float, end: float, step: float = 1.0) -> list[dict[str, Any]]:
    args = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    try:
        answer = json.load(urllib.request.urlopen(f"{prometheus.rstrip('/')}/api/v1/query_range?{args}", timeout=30))
    except OSError as exc:
        raise DashboardsError(f"{prometheus}: cannot query Prometheus ({exc})") from exc
    if answer.get("status") != "success":
        raise DashboardsError(f"{expr}: {answer.get('error', answer)}")
    return answer["data"]["result"]


def legend(fmt: str, labels: dict[str, str]) -> str:
    """Grafana's legend format (`{{label}}`) applied to a series' labels."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()


def render(spec: DashboardSpec, prometheus: str, start: float, end: float, out: Path) -> Path:
    """The dashboard's main panels, one subplot each, over [start, end] (x: seconds from start)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in spec.panels if p.main]
    wide = [p.width >= 24 for p in panels]
    # Two columns; a full-width panel takes a row of its own.
    rows, places, col = 0, [], 0
    for w in wide:
        if w or col == 2:
            if col:
                rows += 1
            col = 0
        places.append((rows, col, w))
        col = 2 if w else col + 1
    rows += 1
    fig = plt.figure(figsize=(14, 3.3 * rows), layout="constrained")
    grid = fig.add_gridspec(rows, 2)
    for panel, (r, c, w) in zip(panels, places, strict=True):
        ax = fig.add_subplot(grid[r, :] if w else grid[r, c])
        series = []
        for q in panel.queries:
            for s in query_range(prometheus, substitute(q.expr), start, end):
                ts = [float(t) - start for t, _ in s["values"]]
                vs = [float(v) for _, v in s["values"]]
                series.append((legend(q.legend, s["metric"]), ts, vs, s["metric"].get("run", "")))
        series.sort(key=lambda s: s[0])
        if panel.kind == "state":
            names = [n for n, _, vs, _ in series if any(v == 1 for v in vs)] or [n for n, *_ in series]
            for i, (name, ts, vs, _) in enumerate(s for s in series if s[0] in names):
                spans = [(t, 1.0) for t, v in zip(ts, vs, strict=True) if v == 1]
                ax.broken_barh(spans, (i - 0.4, 0.8), color=f"C{i % 10}")
            ax.set_yticks(range(len(names)), names, fontsize=8)
            ax.set_ylim(-0.6, len(names) - 0.4)
        else:
            # The runs of a campaign often coincide for a while: one line style per run keeps both visible.
            runs = sorted({run for *_, run in series})
            for name, ts, vs, run in series:
                vs = [v if math.isfinite(v) else float("nan") for v in vs]
                ax.step(ts, vs, where="post", label=name, linewidth=1.4, linestyle=LINE_STYLES[runs.index(run) % len(LINE_STYLES)])
            low, high = ax.get_ylim()
            ax.set_ylim(min(low, 0), max(high, 1))  # counts from 0, a flat line not centred on itself
            if series:
                ax.legend(fontsize=7, loc="best", ncols=2 if len(series) > 4 else 1)
            if panel.unit == "s":
                ax.set_ylabel("seconds")
            elif panel.unit == "rps":
                ax.set_ylabel("records/s")
        ax.set_title(panel.title, fontsize=10, loc="left")
        ax.set_xlim(0, end - start)
        ax.grid(alpha=0.3)
        ax.set_xlabel("seconds from the run's start", fontsize=8)
    fig.suptitle(f"{spec.title} (Grafana dashboard uid kraftlab-{spec.name}, drawn from Prometheus with matplotlib)",
                 fontsize=12)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def render_all(prometheus: str, start: float, end: float, out_dir: Path) -> list[Path]:
    return [render(spec, prometheus, start, end, Path(out_dir) / f"dashboard-{spec.name}.png") for spec in DASHBOARDS]
