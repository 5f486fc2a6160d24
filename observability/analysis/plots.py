"""The report's figures as PNG bytes (matplotlib, drawn off-screen: `Figure` with its default Agg
canvas, no pyplot, so nothing needs a display and no global figure state is shared).

Modelled on Jepsen's latency-raw and rate plots: time on the x axis in seconds of run time, fault
spans shaded behind the data and named, so that a latency spike or a drop in throughput can be
read against what the nemesis was doing."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from .report_data import FaultSpan

DPI = 100
WIDTH_IN = 11
FAULT_COLOURS = {"crash_process": "#d62728", "crash_os": "#d62728", "crash_disk": "#8c1a1a", "shutdown": "#ff7f0e",
                 "isolate": "#9467bd", "partition": "#9467bd", "link": "#bcbd22"}
MAX_FAULT_LABELS = 12  # more names than this would overprint each other: the legend says the kinds
# Percentiles of one second often coincide (one batch acknowledged at once): hollow markers of
# different shapes and sizes keep every one of them visible on top of the others.
PERCENTILE_MARKERS = ({"marker": "o", "ms": 7}, {"marker": "s", "ms": 5}, {"marker": "^", "ms": 5}, {"marker": "x", "ms": 5})
# Offline partitions are also under MinISR: the dashed line over the solid one keeps both visible.
AVAILABILITY_STYLES = ({"lw": 2.6, "color": "#222222"}, {"lw": 1.4, "color": "#ff7f0e", "ls": "--"})


@dataclass(frozen=True)
class Series:
    """One line of a plot: y values (None: no value, a gap) at the x values (seconds)."""

    label: str
    x: Sequence[float]
    y: Sequence[float | None]


def to_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _shade_faults(ax, faults: Sequence[FaultSpan], end_s: float, *, name_them: bool) -> None:
    """Each fault's span, from its start to its undoing (or the end of the run), behind the data;
    `name_them`: write each target at its start and put the kinds in the legend (once a figure)."""
    seen_kinds = set()
    for span in faults:
        start = span.start_ms / 1000.0
        stop = span.end_ms / 1000.0 if span.end_ms is not None else end_s
        colour = FAULT_COLOURS.get(span.fault, "#7f7f7f")
        # A legend entry per kind of fault, not per span: a run may apply the same fault many times.
        label = span.fault if name_them and span.fault not in seen_kinds else None
        seen_kinds.add(span.fault)
        ax.axvspan(start, max(stop, start + 0.05), color=colour, alpha=0.15, lw=0, label=label, zorder=0)
        if name_them and len(faults) <= MAX_FAULT_LABELS:
            ax.annotate(span.target, xy=(start, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -4),
                        textcoords="offset points", ha="left", va="top", fontsize=8, color=colour, rotation=90)


def _values(series: Series) -> list[float]:
    return [float("nan") if v is None else v for v in series.y]



def latency_png(percentiles: Sequence[Series], faults: Sequence[FaultSpan], end_s: float) -> bytes:
    """Per-second p50/p99/p99.9/max produce latency (ms), log y: a second with no acknowledged
    record has no point, so a gap in the lines is a second without acks."""
    fig = Figure(figsize=(WIDTH_IN, 4.2), layout="constrained")
    ax = fig.add_subplot()
    _shade_faults(ax, faults, end_s, name_them=True)
    positive = [v for s in percentiles for v in s.y if v is not None and v > 0]
    for s, style in zip(percentiles, PERCENTILE_MARKERS):
        ax.plot(s.x, _values(s), lw=0.8, mfc="none", label=s.label, **style)
    if positive:
        ax.set_yscale("log")
        lo, hi = _log_range(min(positive), max(positive))
        ax.set_ylim(lo, hi)
        if hi / lo < 1000:  # few decades: ticks at 1, 2 and 5 of each, else one tick would be all
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        # Plain numbers (5, 10, 100), not powers of ten; minor ticks unlabelled.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.text(0.5, 0.5, "no record acknowledged ok", transform=ax.transAxes, ha="center", va="center", color="#555")
    ax.set_xlim(0, max(end_s, 1.0))
    ax.set_xlabel("run time (s)")
    ax.set_ylabel("produce latency (ms)")
    ax.set_title("Produce latency per second (records acknowledged ok)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return to_png(fig)


def _log_range(lo: float, hi: float) -> tuple[float, float]:
    """Y limits spanning at least one decade around [lo, hi]: a narrower log axis has no major
    tick and matplotlib would label its minor ticks as crowded powers of ten."""
    lo, hi = lo / 1.5, hi * 1.5
    if hi / lo < 10:
        centre = (lo * hi) ** 0.5
        lo, hi = centre / 10 ** 0.5, centre * 10 ** 0.5
    return lo, hi


def rate_png(acked: Series, availability: Sequence[Series], faults: Sequence[FaultSpan], end_s: float) -> bytes:
    """Two panels sharing the time axis: acknowledged records/s, then partitions offline and under
    MinISR at each second's end."""
    fig = Figure(figsize=(WIDTH_IN, 5.2), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    for ax in (top, bottom):
        _shade_faults(ax, faults, end_s, name_them=ax is top)
        ax.grid(True, alpha=0.3)
    top.step(acked.x, _values(acked), where="post", color="#1f77b4", label=acked.label)
    top.set_ylabel("records/s")
    top.set_ylim(bottom=0)
    top.set_title("Records acknowledged ok per second")
    for s, style in zip(availability, AVAILABILITY_STYLES):
        bottom.step(s.x, _values(s), where="post", label=s.label, **style)
    bottom.set_ylabel("partitions")
    bottom.set_ylim(bottom=0, top=max([1] + [v for s in availability for v in s.y if v is not None]) * 1.15)
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.set_xlabel("run time (s)")
    bottom.set_xlim(0, max(end_s, 1.0))
    for ax in (top, bottom):
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return to_png(fig)


def membership_png(panels: Sequence[tuple[str, Sequence[Series]]], faults: Sequence[FaultSpan], end_s: float) -> bytes:
    """One panel per membership set (ISR, ELR, LastKnownELR), one step line per partition. Lines
    are nudged apart vertically (±0.1 at most) so that partitions of equal size stay visible."""
    fig = Figure(figsize=(WIDTH_IN, 1.9 * len(panels) + 0.7), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (title, series) in zip(axes, panels):
        _shade_faults(ax, faults, end_s, name_them=ax is axes[0])
        n = len(series)
        for i, s in enumerate(series):
            nudge = 0.0 if n == 1 else -0.1 + 0.2 * i / (n - 1)
            ax.step(s.x, [v + nudge for v in s.y], where="post", lw=1.4, label=s.label)
        ax.set_ylabel(f"{title} size")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.4, max([1] + [v for s in series for v in s.y]) + 0.6)
        ax.grid(True, alpha=0.3)
    axes[0].set_title("Committed ISR, ELR and LastKnownELR sizes per partition")
    if any(series for _, series in panels):
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        axes[0].text(0.5, 0.5, "no partition_change record in the history", transform=axes[0].transAxes,
                     ha="center", va="center", color="#555")
    axes[-1].set_xlabel("run time (s)")
    axes[-1].set_xlim(0, max(end_s, 1.0))
    return to_png(fig)


def heatmap_png(rows: Sequence[str], columns: Sequence[str], fractions: Sequence[Sequence[float]]) -> bytes:
    """Cells (rows) by anomaly or invariant (columns): the fraction of the cell's runs showing it,
    written in each square."""
    fig = Figure(figsize=(max(6.0, 0.75 * len(columns) + 3.5), max(2.5, 0.45 * len(rows) + 2.2)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(fractions, cmap="Reds", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(columns)), labels=columns, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), labels=rows, fontsize=8)
    for r, values in enumerate(fractions):
        for c, value in enumerate(values):
            ax.text(c, r, f"{value:.2f}".rstrip("0").rstrip(".") if value else "0", ha="center", va="center",
                    fontsize=7, color="white" if value > 0.6 else "black")
    fig.colorbar(image, ax=ax, label="fraction of the cell's runs", shrink=0.8)
    ax.set_title("Runs showing each anomaly or invariant violation, per cell")
    return to_png(fig)
