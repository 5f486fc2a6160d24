"""The documentation's pictures, made anew from real runs (`make docs-images`):

- docs/report-last-replica-standing-load-no-elr.png: `kraftlab analyze`'s report.html of the
  Last Replica Standing under load without ELR, drawn by headless Chromium;
- docs/dashboard-{cluster,partitions,clients,faults}.png: the Grafana dashboards' main panels,
  drawn by `kraftlab dashboards render` from a real Prometheus holding the runs with ELR on and off.

Both runs are simulated (seed 0): the same runs as `kraftlab demo --runtime sim`, whose figures the
README shows beside the report's picture. The pictures change only when the code does. Needs Chromium
and Prometheus (Debian's `chromium` and `prometheus` packages) on this machine's PATH.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUNS = {"elr": "last-replica-standing-load", "no-elr": "last-replica-standing-load-no-elr"}
REPORT_RUN = "no-elr"
REPORT_SIZE = (1100, 1900)  # the screenshot's window: the report's head, tables and first plot


def main() -> int:
    missing = [tool for tool in ("chromium", "prometheus", "promtool") if shutil.which(tool) is None]
    if missing:
        print(f"make docs-images needs {', '.join(missing)} on PATH (Debian: apt-get install chromium prometheus)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kraftlab-docs-images-") as tmp:
        root = Path(tmp) / "campaign"
        summaries = run_both(root)
        report = analyze(root / "runs" / REPORT_RUN)
        screenshot(report, DOCS / f"report-{RUNS[REPORT_RUN]}.png", Path(tmp) / "chromium-profile")
        end_s = max(s["stats"]["sim_ms"] for s in summaries.values()) / 1000
        render_dashboards(root, Path(tmp) / "tsdb", end_s)
    return 0


def run_both(root: Path) -> dict[str, dict]:
    from kraftlab.runner import run_scenario
    from workloads.scenario.loading import load_scenario

    summaries = {}
    for run, name in RUNS.items():
        scenario, _ = load_scenario(name)
        summaries[run] = run_scenario(scenario, source=name, out_dir=root / "runs" / run).summary
        print(f"ran {name}: ok={summaries[run]['ok']}, acked_lost={summaries[run]['stats']['acked_lost']}")
    return summaries


def analyze(run_dir: Path) -> Path:
    from kraftlab.cli import main as cli

    result = CliRunner().invoke(cli, ["analyze", str(run_dir), "--engine", "local"])
    if result.exit_code not in (0, 1):  # 1: the history is invalid, which is this run's point
        raise SystemExit(f"kraftlab analyze failed ({result.exit_code}):\n{result.output}")
    return run_dir / "analysis" / "report.html"


def screenshot(page: Path, shot: Path, profile: Path) -> None:
    width, height = REPORT_SIZE
    # No network, no background services: the page renders from the files beside it alone.
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", f"--screenshot={shot}", f"--window-size={width},{height}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    print(f"wrote {shot.relative_to(ROOT)}")


def render_dashboards(campaign: Path, tsdb: Path, end_s: float) -> None:
    from kraftlab.cli import main as cli
    from observability.metrics.openmetrics import SIM_EPOCH_S
    from observability.metrics.tsdb import served_tsdb

    loaded = CliRunner().invoke(cli, ["metrics", "load", str(campaign), "--tsdb", str(tsdb)])
    if loaded.exit_code != 0:
        raise SystemExit(f"kraftlab metrics load failed:\n{loaded.output}")
    with served_tsdb(tsdb, ROOT / "infra/prometheus/empty.yml") as base:
        drawn = CliRunner().invoke(cli, ["dashboards", "render", "--prometheus", base, "--end", str(SIM_EPOCH_S + end_s),
                                         "--out", str(DOCS)])
    if drawn.exit_code != 0:
        raise SystemExit(f"kraftlab dashboards render failed:\n{drawn.output}")
    print(drawn.output.strip())

if __name__ == "__main__":
    sys.exit(main())
