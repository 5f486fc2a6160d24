"""Assertions every run's history must satisfy, whatever ran it (the simulator or Ray): what an
outside checker (Jepsen-style analysis, docs/reference/events.md) relies on."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from observability.history import read_rows


def assert_complete_history(run_dir: Path, summary: dict[str, Any]) -> list[dict]:
    """No `node_seq` gap; one `produce_ack` per `produce_send`; the outcomes add up to the
    summary's counters; every partition read in full at the end. Returns the rows."""
    rows = read_rows(Path(run_dir) / "events")
    assert len(rows) == summary["stats"]["events"]
    seqs: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in rows:
        seqs[(r["node"], r["incarnation"])].append(r["node_seq"])
    gaps = {k: v for k, v in seqs.items() if sorted(v) != list(range(len(v)))}
    assert not gaps, f"node_seq gaps: {sorted(gaps)}"
    sent = Counter((r["producer"], r["sequence"]) for r in rows if r["kind"] == "produce_send")
    acked = Counter((r["producer"], r["sequence"]) for r in rows if r["kind"] == "produce_ack")
    assert max(sent.values(), default=1) == 1 and max(acked.values(), default=1) == 1
    assert set(sent) == set(acked), f"{len(set(sent) - set(acked))} records without an outcome"
    outcomes = Counter(r["outcome"] for r in rows if r["kind"] == "produce_ack")
    assert outcomes["ok"] == summary["stats"]["acked"]
    assert outcomes["fail"] + outcomes["info"] == summary["stats"]["failed"]
    assert sum(1 for r in rows if r["kind"] == "consume") == summary["stats"]["consumed"]
    if sent:
        done = [r for r in rows if r["kind"] == "final_read_done"]
        assert done and all(r["complete"] for r in done), done
    return rows


def lost_writes(rows: list[dict]) -> set[tuple[str, int]]:
    """Records acknowledged with acks=all that the final read does not hold."""
    ok = {(r["producer"], r["sequence"]) for r in rows if r["kind"] == "produce_ack" and r["outcome"] == "ok" and r["acks"] == "all"}
    return ok - {(r["producer"], r["sequence"]) for r in rows if r["kind"] == "final_read"}
