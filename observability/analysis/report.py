"""`report.html` and its PNG plots, written beside checks.json (docs/reference/analysis.md).

Reads only what `kraftlab analyze` wrote (checks.json, windows.parquet) and, for a single run, the
partition_change and fault rows of its events (report_data.py): no Spark. Each file is written
under a temporary name and renamed into place, the PNGs before the page that shows them.

A campaign analyzed as one dataset (checks.json has `cells`) gets the per-cell table and a
heatmap instead of the time plots: its runs each start their clock at 0, so a per-second figure
summed across runs would mix unrelated moments."""

from __future__ import annotations

import functools
import operator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import plots, report_html
from .output import write_bytes_atomically
from .report_data import FaultSpan, fault_spans, partition_states, read_checks, read_windows
from .report_html import Image

MAX_PARTITIONS_PLOTTED = 8  # more lines than this in one panel cannot be told apart
MEMBERSHIP = (("ISR", "isr_size"), ("ELR", "elr_size"), ("LastKnownELR", "last_known_elr_size"))
PERCENTILES = (("p50", "latency_p50_ms"), ("p99", "latency_p99_ms"), ("p99.9", "latency_p999_ms"), ("max", "latency_max_ms"))


def write_report(out_dir: Path, run_dir: Path | None) -> Path:
    """Write out_dir/report.html and its PNGs from out_dir/checks.json and out_dir/windows.parquet
    (and, when `run_dir` is given, the run's events); return the page's path."""
    out_dir = Path(out_dir)
    checks = read_checks(out_dir)
    windows = read_windows(out_dir)
    title = f"kraftlab analysis: {(Path(run_dir) if run_dir is not None else out_dir.parent).name}"
    sections = [("", report_html.verdict_html(checks))]
    cells = checks.get("cells")
    if cells:
        sections += campaign_sections(out_dir, cells, checks)
    sections += [("Anomalies", report_html.anomalies_html(checks.get("anomalies") or {})),
                 ("Invariants", report_html.invariants_html(checks.get("invariants") or {},
                                                            (checks.get("stats") or {}).get("invariants_source"))),
                 ("Figures", report_html.stats_html(checks.get("stats") or {}))]
    if cells:
        sections.append(("Over time", '<p class="muted">Not drawn for a campaign: each run starts its clock at 0, '
                                      "so per-second figures of different runs do not line up. "
                                      "Analyze a single run for its latency, rate and ISR plots.</p>"))
    else:
        images = run_images(out_dir, windows, run_dir)
        sections.append(("Over time", "".join(report_html.figure_html(i) for i in images)))
    path = out_dir / "report.html"
    write_bytes_atomically(path, report_html.page(title, sections).encode("utf-8"))
    return path


def _write_png(out_dir: Path, name: str, png: bytes, caption: str) -> Image:
    write_bytes_atomically(out_dir / name, png)
    return Image(name, caption)


def _column(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist()


def _with_end(xs: list[float], ys: list[Any], end_s: float) -> tuple[list[float], list[Any]]:
    """A step series held to `end_s`: the last value repeated there, so the last step has a width."""
    return (xs + [end_s], ys + [ys[-1]]) if xs else (xs, ys)


def run_images(out_dir: Path, windows: pa.Table, run_dir: Path | None) -> list[Image]:
    seconds = _column(windows, "second")
    end_s = float(max(seconds) + 1) if seconds else 1.0
    faults = fault_spans(run_dir) if run_dir is not None else []
    shading = _shading_caption(faults) if run_dir is not None else "Faults are not shaded: the run's events were not read."
    centres = [s + 0.5 for s in seconds]  # a window's figure belongs to its whole second
    images = [_write_png(out_dir, "latency.png", plots.latency_png(
        [plots.Series(label, centres, _column(windows, col)) for label, col in PERCENTILES], faults, end_s),
        "Produce latency: per second of run time, the p50, p99, p99.9 and maximum latency of the records "
        f"acknowledged ok in that second (windows.parquet), log scale; a gap is a second without acks. {shading}")]
    starts = [float(s) for s in seconds]
    acked = plots.Series("acknowledged ok", *_with_end(starts, _column(windows, "acked_per_s"), end_s))
    availability = [plots.Series("offline (no leader)", *_with_end(starts, _column(windows, "partitions_offline"), end_s)),
                    plots.Series("under MinISR", *_with_end(starts, _column(windows, "partitions_under_min_isr"), end_s))]
    images.append(_write_png(out_dir, "rate.png", plots.rate_png(acked, availability, faults, end_s),
                             "Top: records acknowledged ok per second. Bottom: partitions with no leader, and partitions "
                             "whose ISR is smaller than min.insync.replicas, in the committed state at each second's end. "
                             f"{shading}"))
    if run_dir is not None:
        images.append(membership_image(out_dir, run_dir, faults, end_s))
    return images


def _shading_caption(faults: list[FaultSpan]) -> str:
    if not faults:
        return "No fault was applied."
    named = "named by its target" if len(faults) <= plots.MAX_FAULT_LABELS else "targets not written (too many to read)"
    return ("Shaded: each fault from the moment the driver applied it until the restart or heal that undid it "
            f"(or the end of the run), coloured by kind, {named} ({len(faults)} fault(s)).")


def choose_partitions(states: pa.Table, limit: int = MAX_PARTITIONS_PLOTTED) -> tuple[list[tuple[str, int]], int]:
    """The partitions to draw: all when `limit` or fewer, else the `limit` with the most committed
    changes (ties by name). Returns them, sorted, and the number of partitions in the run."""
    counts = states.group_by(["topic", "partition"]).aggregate([("metadata_offset", "count")]).to_pylist()
    busiest = sorted(counts, key=lambda r: (-r["metadata_offset_count"], r["topic"], r["partition"]))[:limit]
    return sorted((r["topic"], r["partition"]) for r in busiest), len(counts)


def _rows_of(states: pa.Table, partitions: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """The rows of the given partitions only: a thousand partitions' states stay in Arrow."""
    if not partitions:
        return []
    wanted = functools.reduce(operator.or_, [(pc.field("topic") == t) & (pc.field("partition") == p) for t, p in partitions])
    return states.filter(wanted).to_pylist()


def membership_image(out_dir: Path, run_dir: Path, faults: list[FaultSpan], end_s: float) -> Image:
    states = partition_states(run_dir)
    chosen, total = choose_partitions(states)
    by_partition: dict[tuple[str, int], list[dict[str, Any]]] = {p: [] for p in chosen}
    for r in _rows_of(states, chosen):
        by_partition[(r["topic"], r["partition"])].append(r)
    panels = []
    for title, column in MEMBERSHIP:
        series = [plots.Series(f"{topic}-{partition}", *_with_end([r["time_ms"] / 1000.0 for r in records],
                                                                   [r[column] for r in records], end_s))
                  for (topic, partition), records in by_partition.items()]
        panels.append((title, series))
    if total == 0:
        which = "no partition: the history has no partition_change record"
    elif total <= MAX_PARTITIONS_PLOTTED:
        which = f"all {total} partition(s)"
    else:
        which = (f"{len(chosen)} of the run's {total} partitions, those with the most committed partition changes "
                 "(the others are not drawn)")
    caption = (f"Sizes of the committed ISR, ELR and LastKnownELR over run time for {which}: one step line per "
               "partition, from each committed partition_change record (deduped across controller voters, earliest "
               "time kept). Lines are nudged apart by up to 0.1 so that equal sizes stay visible. "
               f"{_shading_caption(faults)}")
    return _write_png(out_dir, "isr_elr.png", plots.membership_png(panels, faults, end_s), caption)


def campaign_sections(out_dir: Path, cells: list[dict[str, Any]], checks: dict[str, Any]) -> list[tuple[str, str]]:
    """The per-cell table and the heatmap of which anomalies and invariants each cell's runs showed."""
    names = list((checks.get("anomalies") or {}).keys())
    for c in cells:
        names += [n for n in list(c.get("anomalies") or {}) + list(c.get("invariants") or {}) if n not in names]
    fractions = [[fraction_showing(c, n) for n in names] for c in cells]
    labels = [report_html.cell_label(c.get("cell") or {}) for c in cells]
    heatmap = _write_png(out_dir, "heatmap.png", plots.heatmap_png(labels, names, fractions),
                         "Per cell (rows, named by their matrix values) and anomaly or invariant (columns): the fraction "
                         "of the cell's runs that showed it.")
    return [("Cells", report_html.cells_html(cells) + report_html.figure_html(heatmap))]


def fraction_showing(cell: dict[str, Any], name: str) -> float:
    """The fraction of the cell's runs that showed `name`, an anomaly or an invariant violation
    (the cell counts runs showing each, not occurrences)."""
    runs = cell.get("runs") or 0
    showing = (cell.get("anomalies") or {}).get(name) or (cell.get("invariants") or {}).get(name) or 0
    return showing / runs if runs else 0.0
