"""`kraftlab metrics load`: a run's (or a campaign's) `metrics.om` into a Prometheus TSDB folder
with `promtool tsdb create-blocks-from openmetrics`, for a Prometheus started on that folder.

A campaign's runs all start at the same simulated time, so each run's series get a `run` label
(the run's folder name) before loading: without it, the runs' samples would fall on the same
series at the same timestamps. Each run is loaded on its own (a file must hold each family once);
the blocks of different runs overlap in time, which Prometheus (>= 2.39) accepts by default.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

METRICS_FILE = "metrics.om"


class MetricsInputError(Exception):
    """The input cannot be loaded as given: the message names the path and why (exit code 2)."""

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?( .*)$")


def metrics_files(path: Path) -> dict[str, Path]:
    """The metrics.om files under a run directory ({"": file}) or a campaign directory
    ({run: file}, runs/<run>/metrics.om)."""
    path = Path(path)
    if not path.is_dir():
        raise MetricsInputError(f"{path}: no such directory (expected a run or a campaign directory)")
    own = path / METRICS_FILE
    if own.is_file():
        return {"": own}
    runs = path / "runs"
    found = {p.parent.name: p for p in sorted(runs.glob(f"*/{METRICS_FILE}"))} if runs.is_dir() else {}
    if not found:
        raise MetricsInputError(f"{own}: no metrics.om (expected a run directory written by `kraftlab run`, "
                                 f"or a campaign directory with runs/<run>/{METRICS_FILE})")
    return found


def with_run_label(source: Path, run: str, target: Path) -> None:
    """`source` with `run="<run>"` added to every sample's labels."""
    label = f'run="{run}"'
    with open(source) as f, open(target, "w") as out:
        for line in f:
            m = None if line.startswith("#") else _SAMPLE.match(line.rstrip("\n"))
            if m is None:
                out.write(line)
                continue
            name, labels, rest = m.groups()
            labels = "{" + label + ("," + labels[1:] if labels and labels != "{}" else "}")
            out.write(f"{name}{labels}{rest}\n")


def load_into_tsdb(path: Path, tsdb: Path, promtool: str | None = None) -> list[str]:
    """Load every metrics.om under `path` into `tsdb`; return promtool's reports."""
    files = metrics_files(path)
    promtool = promtool or shutil.which("promtool")
    if promtool is None:
        raise MetricsInputError("promtool: not found (install Prometheus: Debian's `apt-get install prometheus` "
                                 "brings `prometheus` and `promtool`)")
    Path(tsdb).mkdir(parents=True, exist_ok=True)
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        for run, source in files.items():
            if run:
                labelled = Path(tmp) / f"{run}.om"
                with_run_label(source, run, labelled)
                source = labelled
            result = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                why = (result.stderr or result.stdout).strip().splitlines()
                raise MetricsInputError(f"{files[run]}: promtool could not load it ({why[-1] if why else result.returncode})")
            reports.append(result.stdout)
    return reports


@contextmanager
def served_tsdb(tsdb: Path, config: Path, prometheus: str = "prometheus") -> Iterator[str]:
    """A Prometheus on loopback serving `tsdb` (a free port), ready to query: its base URL. The
    test suite's and `make docs-images`' Prometheus; stopped on the way out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([prometheus, f"--storage.tsdb.path={tsdb}", f"--config.file={config}",
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
            raise MetricsInputError(f"Prometheus on {tsdb} did not become ready")
        yield base
    finally:
        proc.terminate()
        proc.wait(10)
