"""The README's demo figures are one run's: its comparison table and its Spark table agree as
`kraftlab demo` itself checks them (kraftlab/demo.py, DemoRow.analysis_problems)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from kraftlab.demo import VARIANTS, DemoRow

README = Path(__file__).resolve().parents[2] / "README.md"


def demo_section(text: str) -> str:
    start = text.index("## The demo")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def table_rows(block: str) -> dict[str, list[str]]:
    """A rich table's body rows by their first cell; a row wrapped over several lines (first cell
    empty) is joined to the row above, cell by cell."""
    rows: dict[str, list[str]] = {}
    last = None
    for line in block.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0]:
            last = cells[0]
            rows[last] = cells[1:]
        elif last is not None:
            rows[last] = [" ".join(p for p in (a, b) if p) for a, b in zip(rows[last], cells[1:], strict=True)]
    return rows


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def demo_rows(text: str) -> list[DemoRow]:
    """The demo's rows as the README shows them: the comparison table's figures, and Spark's
    verdict and anomaly counts (the load writes with acks=all only, so every lost write Spark
    finds is an acks=all one)."""
    blocks = re.findall(r"```text\n(.*?)```", demo_section(text), re.S)
    comparison = next(table_rows(b) for b in blocks if "offline s" in b)
    history = next(table_rows(b) for b in blocks if "history (Spark)" in b)
    rows = []
    for variant, scenario in VARIANTS:
        acked, lost, offline, unavailable, rate, p99, as_expected = comparison[variant]
        valid, found = history[variant]
        anomalies = {} if found == "none" else {
            name: {"count": _count(n)} for name, n in (a.rsplit(" ", 1) for a in found.split(", "))}
        row = DemoRow(variant, scenario, as_expected == "yes", _count(acked), _count(lost), float(offline),
                      float(unavailable), float(_count(rate)), float(_count(p99)), Path(scenario))
        lost_writes = anomalies.get("lost-write", {"count": 0})["count"]
        analysis = {"valid": {"valid": True, "INVALID": False}.get(valid, "unknown"), "anomalies": anomalies,
                    "stats": {"lost_by_acks": {"all": lost_writes} if lost_writes else {}}}
        rows.append(replace(row, analysis=analysis))
    return rows


def disagreements(text: str) -> list[str]:
    out = []
    for row in demo_rows(text):
        out += [f"{row.variant}: {p}" for p in row.analysis_problems()]
        # Each scenario's own expectation: ELR on loses nothing, ELR off loses records.
        lost_as_expected = row.acked_lost == 0 if row.scenario == VARIANTS[0][1] else row.acked_lost > 0
        if row.ok != lost_as_expected:
            out.append(f"{row.variant}: 'as expected' is {row.ok} with {row.acked_lost:,} lost")
    return out


def test_the_readme_shows_the_demo_s_two_tables():
    rows = demo_rows(README.read_text())
    assert [r.variant for r in rows] == [v for v, _ in VARIANTS]
    assert all(r.analysis["anomalies"] or r.acked_lost == 0 for r in rows)


def test_the_readme_s_demo_tables_agree_as_the_demo_checks_them():
    assert disagreements(README.read_text()) == []


def test_the_check_finds_tables_of_two_runs():
    """The tables of two different runs (a Ray run's loss beside a simulated run's Spark table)
    disagree, and a loss marked as expected with ELR on is caught too."""
    text = README.read_text()
    comparison = re.search(r"│ ELR off │ [\d,]+ │ ([\d,]+) ", text)
    assert comparison is not None
    two_runs = text[:comparison.start(1)] + "6,371" + text[comparison.end(1):]
    assert any("Spark found 6,481 acknowledged acks=all records lost, the run's checker 6,371" in d
               for d in disagreements(two_runs))
    on = re.search(r"│ ELR on  │ [\d,]+ │ (0    ) ", text)
    assert on is not None
    lossy_on = text[:on.start(1)] + "5    " + text[on.end(1):]
    assert disagreements(lossy_on) != []


@pytest.mark.parametrize("found, anomalies", [
    ("none", {}),
    ("lost-write 6,481, inconsistent-offsets 12,962", {"lost-write": 6481, "inconsistent-offsets": 12962}),
])
def test_anomalies_are_read_as_the_demo_prints_them(found, anomalies):
    block = ("│ ELR on  │ 1 │ 0 │ 0.0 │ 0.0 │ 1 │ 1 │ yes │\n│ ELR off │ 1 │ 1 │ 0.0 │ 0.0 │ 1 │ 1 │ yes │\n")
    split = found.split(", ")
    history = (f"│ ELR on  │ valid │ none │\n│ ELR off │ INVALID │ {split[0]}{',' if len(split) > 1 else ''} │\n"
               + (f"│         │         │ {split[1]} │\n" if len(split) > 1 else ""))
    text = f"## The demo\n```text\noffline s\n{block}```\n```text\nhistory (Spark)\n{history}```\n## Next\n"
    rows = demo_rows(text)
    assert {n: a["count"] for n, a in rows[1].analysis["anomalies"].items()} == anomalies
