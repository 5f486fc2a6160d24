"""report.html's markup: plain HTML with one inline style sheet, no script and nothing fetched from
the network, so the page opens from disk anywhere. Every value from checks.json goes through
`html.escape` (`_e`): record identities and invariant details are data, not markup."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px 32px; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; margin-bottom: 4px; } h2 { font-size: 1.15em; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.hit td { background: #fdecea; } .muted { color: #666; } code { font-size: 0.95em; }
.verdict { display: inline-block; padding: 4px 12px; border-radius: 4px; font-weight: bold; color: white; }
.valid { background: #2e7d32; } .invalid { background: #c62828; } .unknown { background: #ef6c00; }
figure { margin: 16px 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; max-width: 1100px; }
"""


@dataclass(frozen=True)
class Image:
    file: str  # a PNG in the same folder as report.html
    caption: str


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _e(_json_like(value))
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return _e(value)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, hits: Sequence[bool] | None = None) -> str:
    """`rows` are already escaped cells (`<td>` content); `hits` marks rows to highlight."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cls = ' class="hit"' if hits is not None and hits[i] else ""
        body.append(f"<tr{cls}>" + "".join(row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _td(text: str, numeric: bool = False) -> str:
    return f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>"


def verdict_html(checks: dict[str, Any]) -> str:
    valid = checks.get("valid")
    word, cls = {True: ("valid", "valid"), False: ("INVALID", "invalid")}.get(valid, ("unknown", "unknown"))
    reason = f' <span class="muted">why unknown: {_e(checks["reason"])}</span>' if "reason" in checks else ""
    counts = f'<p class="muted">engine {_e(checks.get("engine"))}, {_number(checks.get("runs"))} run(s), {_number(checks.get("events"))} events</p>'
    return f'<p><span class="verdict {cls}">{word}</span>{reason}</p>{counts}'


def _flatten(stats: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested figures as dotted names (`latency_ms.p99`), in checks.json's order."""
    out = []
    for key, value in stats.items():
        if isinstance(value, dict):
            out.extend(_flatten(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def stats_html(stats: dict[str, Any]) -> str:
    rows = [(_td(f"<code>{_e(k)}</code>"), _td(_number(v), numeric=isinstance(v, (int, float))))
            for k, v in _flatten(stats)]
    return _table(["figure", "value"], rows)


def _example(example: Any) -> str:
    """One example as key=value pairs; a nested value (the offsets a duplicate sits at) as JSON."""
    if isinstance(example, dict):
        return " ".join(f"{_e(k)}=<code>{_e(_json_like(v))}</code>" for k, v in example.items())
    return f"<code>{_e(_json_like(example))}</code>"


def anomalies_html(anomalies: dict[str, Any]) -> str:
    if not anomalies:
        return '<p class="muted">none reported</p>'
    rows, hits = [], []
    for name, a in anomalies.items():
        examples = "<br>".join(_example(x) for x in a.get("examples") or [])
        rows.append((_td(f"<code>{_e(name)}</code>"), _td(_number(a.get("count", 0)), numeric=True), _td(examples)))
        hits.append(bool(a.get("count")))
    return _table(["anomaly", "count", "examples (record identity, offsets)"], rows, hits=hits)


def invariants_html(invariants: dict[str, Any], default_source: str | None = None) -> str:
    """`default_source`: where entries without their own `source` come from (stats.invariants_source)."""
    if not invariants:
        return '<p class="muted">no invariant violation reported</p>'
    rows = []
    for name, inv in invariants.items():
        examples = "<br>".join(_invariant_example(x) if isinstance(x, dict) else _e(x) for x in inv.get("examples") or [])
        rows.append((_td(f"<code>{_e(name)}</code>"), _td(_number(inv.get("count", 0)), numeric=True),
                     _td(_e(inv.get("source") or default_source or "")), _td(examples)))
    return _table(["invariant", "count", "source", "examples"], rows, hits=[True] * len(rows))


def _invariant_example(x: dict[str, Any]) -> str:
    run = f"run {_e(x['run'])}, " if x.get("run") else ""  # a campaign's examples name their run
    return f"{run}at {_number(x.get('at_ms'))} ms: {_e(x.get('detail'))}"


def cell_label(cell: dict[str, Any]) -> str:
    """A campaign cell named by its matrix values: `cluster.protocol.elr=true, cluster.storage=fsync`."""
    return ", ".join(f"{k}={_json_like(v)}" for k, v in cell.items())


def _json_like(value: Any) -> str:
    """Values as checks.json and the campaign file write them: true, null, [{"offset": 3}], not
    Python's True, None and {'offset': 3}."""
    return str(value) if isinstance(value, str) else json.dumps(value)


def cells_html(cells: Sequence[dict[str, Any]]) -> str:
    headers = ["cell", "runs", "valid", "invalid", "unknown", "anomalies (runs)", "invariants (runs)",
               "acked", "records/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms"]
    rows, hits = [], []
    for c in cells:
        def showing(found: dict[str, Any]) -> str:
            return "<br>".join(f"<code>{_e(n)}</code> {_number(k)}" for n, k in found.items() if k) or '<span class="muted">none</span>'
        latency = c.get("latency_ms") or {}
        rows.append([_td(_e(cell_label(c.get("cell") or {})))]
                    + [_td(_number(c.get(k)), numeric=True) for k in ("runs", "valid", "invalid", "unknown")]
                    + [_td(showing(c.get("anomalies") or {})), _td(showing(c.get("invariants") or {}))]
                    + [_td(_number(c.get(k)), numeric=True) for k in ("acked", "throughput_rec_s")]
                    + [_td(_number(latency.get(k)), numeric=True) for k in ("p50", "p99", "p999", "max")])
        hits.append(bool(c.get("invalid")))
    return _table(headers, rows, hits=hits)


def figure_html(image: Image) -> str:
    return (f'<figure><img src="{_e(image.file)}" alt="{_e(image.caption)}">'
            f"<figcaption>{_e(image.caption)}</figcaption></figure>")


def page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """The whole document: `sections` are (heading, body HTML already escaped)."""
    body = "".join(f"<h2>{_e(h)}</h2>{b}" if h else b for h, b in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{_e(title)}</h1>{body}</body></html>\n")
