"""`metrics.om`: the run's series over time, OpenMetrics text with timestamps (docs/reference,
"`metrics.om`"), loadable with `promtool tsdb create-blocks-from openmetrics`.

OpenMetrics wants each family's samples together (one `# TYPE` line, then every sample of every
series of the family), within a family each series' samples together ("Metrics MUST NOT be
interleaved": all of `{node="c1"}`'s seconds, then all of `{node="c2"}`'s), each series'
timestamps increasing, and the file to end with `# EOF`. Samples come in time order, one second
after the other, so each family's lines are spooled to a temporary file of their own, tagged with
their series; at the end each family's spool is sorted by series (a stable sort keeps each series'
time order; in runs of `SORT_CHUNK_LINES` merged from disk, so memory stays bounded whatever the
run's length) and the families are concatenated. A histogram's series is its labels but `le`: its
buckets, count and sum of one second stay together, one MetricPoint per second. Timestamps are
seconds (Prometheus' OpenMetrics parser reads seconds, not the milliseconds of its own text
format), written with millisecond precision.

`MetricsRecorder` drives it: an event sink that, before applying an event, samples every series at
each whole second of run time the event's time passed (the state as of that second), and at the
end samples up to the run's end and once more at the end itself. Simulated runs are stamped from `SIM_EPOCH_S`, a fixed base, so
that two runs of one seed give the same file; Ray runs from their wall-clock start.
"""

from __future__ import annotations

import heapq
import os
import shutil
import tempfile
from itertools import islice
from pathlib import Path
from typing import IO

from observability.events import EventRecord

from .model import FAMILIES, Labels, MetricsModel

SIM_EPOCH_S = 1_700_000_000.0  # 2023-11-14T22:13:20Z: the simulator's time 0 in metrics.om
INTERVAL_MS = 1000.0
SORT_CHUNK_LINES = 200_000  # spool lines sorted in memory at once (tens of MB)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _value(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


class OpenMetricsFile:
    """Samples spooled per family under `spool`, assembled into `path` by `close`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._spool = Path(tempfile.mkdtemp(prefix=".metrics-", dir=self.path.parent))
        self._files: dict[str, IO[str]] = {}

    def write(self, at_s: float, samples) -> None:
        stamp = f"{at_s:.3f}"
        for family, (name, labels, value) in samples:
            f = self._files.get(family)
            if f is None:
                f = self._files[family] = open(self._spool / family, "w")
            series = _labels(tuple((k, v) for k, v in labels if k != "le"))
            f.write(f"{series}\t{name}{_labels(labels)} {_value(value)} {stamp}\n")

    def close(self) -> None:
        """Write `path` (renamed into place when complete) and drop the spool."""
        for f in self._files.values():
            f.close()
        tmp = self.path.with_name(f".{self.path.name}.partial")
        try:
            with open(tmp, "w") as out:
                # Every family, those with no sample too (no fault in the run, no topic): a reader
                # finds each name docs/reference lists, declared with its type.
                for family in sorted(FAMILIES):
                    spec = FAMILIES[family]
                    out.write(f"# TYPE {family} {spec.type}\n# HELP {family} {spec.help}\n")
                    if family in self._files:
                        out.writelines(line.split("\t", 1)[1] for line in _by_series(self._spool / family))
                out.write("# EOF\n")
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
            shutil.rmtree(self._spool, ignore_errors=True)


def _series(line: str) -> str:
    return line.split("\t", 1)[0]


def _by_series(spool: Path):
    """A family's spooled lines, ordered by series, each series' lines in the order written (time
    order): sorted runs of SORT_CHUNK_LINES lines, merged (earlier runs first on equal series)."""
    runs: list[Path] = []
    with open(spool) as f:
        while chunk := list(islice(f, SORT_CHUNK_LINES)):
            chunk.sort(key=_series)  # stable
            run = spool.with_name(f"{spool.name}.run{len(runs)}")
            run.write_text("".join(chunk))
            runs.append(run)
    files = [open(r) for r in runs]
    try:
        # heapq.merge takes equal keys from the earlier input first: time order across runs.
        yield from heapq.merge(*files, key=_series)
    finally:
        for f in files:
            f.close()


class MetricsRecorder:
    """An event sink writing `metrics.om`: one sample of every series every second of run time."""

    def __init__(self, path: Path, model: MetricsModel, base_s: float) -> None:
        self.model = model
        self.base_s = base_s
        self.file = OpenMetricsFile(path)
        self.next_ms = 0.0  # the next second to sample at (run time)

    def __call__(self, rec: EventRecord) -> None:
        if rec.time_ms >= self.next_ms:
            self._sample_until(rec.time_ms)
        self.model(rec)

    def _sample_until(self, time_ms: float) -> None:
        """Sample at every whole second up to `time_ms` included: the state before any later event."""
        while self.next_ms <= time_ms:
            self.file.write(self.base_s + self.next_ms / 1000.0, self.model.samples())
            self.next_ms += INTERVAL_MS

    def close(self, end_ms: float) -> None:
        """Sample every second up to the run's end, then at the end itself (the final state, with
        what the last part-second changed), and write the file."""
        self._sample_until(end_ms)
        last_ms = self.next_ms - INTERVAL_MS
        if end_ms > last_ms:
            self.file.write(self.base_s + end_ms / 1000.0, self.model.samples())
        self.file.close()


def recorder_for(path: Path, voters: tuple[str, ...], brokers: int, base_s: float) -> MetricsRecorder:
    return MetricsRecorder(path, MetricsModel(voters, brokers), base_s)
