"""A campaign's results folded as runs finish (kraftlab/campaign/report.py, `CampaignTally`) and
results.parquet written from the log a batch at a time (results_log.py): what a campaign of
100,000 runs holds is counts and a few examples, not its rows, and the report is the same whatever
order the runs finished in."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pyarrow.parquet as pq

from kraftlab.campaign import results_log
from kraftlab.campaign.report import EXAMPLES, KEEP_SEEDS, CampaignTally, cell_reports, check_expect
from kraftlab.campaign.results_log import LogRows, iter_log, write_parquet
from workloads.campaign.generate import run_id
from workloads.campaign.spec import load_campaign

CAMPAIGN = """
name: tally
scenario: random-faults
seeds: 300
matrix:
  cluster.storage: [page_cache, fsync]
faults: {kinds: [crash_os], mean_interval_ms: 1500, duration_ms: 6000, converge_ms: 20000}
expect:
  - when: {cluster.storage: page_cache}
    catch: [lost-write]
  - when: {cluster.storage: fsync}
    clean: true
"""


def campaign(tmp_path: Path):
    path = tmp_path / "campaign.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    return load_campaign(str(path))


def rows_of(c) -> list[dict]:
    """Every run's row: on page cache every seventh seed loses a write, every 50th raises."""
    rows = []
    for cell in c.spec.cells():
        for seed in c.spec.seed_list():
            row = {"run": run_id(cell, seed), "cell": cell.index, "seed": seed, "status": "ok", "violations": [],
                   "excused": [], "signature": "", "replay": f"kraftlab run {seed}", "stats.acked": 100, "stats.acked_lost": 0}
            if cell.index == 0 and seed % 7 == 3:
                row |= {"status": "violation", "violations": ["lost-write"], "signature": "lost-write", "stats.acked_lost": 2,
                        "first_violation_ms": float(seed)}
            elif seed % 50 == 49:
                row |= {"status": "error", "signature": "error-RuntimeError"}
            rows.append(row)
    return rows


def fold(c, rows) -> CampaignTally:
    tally = CampaignTally(c)
    for row in rows:
        tally.add(row)
    return tally


def test_the_report_is_the_same_whatever_order_the_runs_finished_in(tmp_path):
    c = campaign(tmp_path)
    rows = rows_of(c)
    in_order = fold(c, rows)
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    out_of_order = fold(c, shuffled)
    assert [r.as_dict() for r in in_order.reports()] == [r.as_dict() for r in out_of_order.reports()]
    assert check_expect(c, in_order.reports()) == check_expect(c, out_of_order.reports())
    # The minimizer starts from each signature's first run in (cell, seed) order, not the first to finish.
    assert in_order.first_failing == out_of_order.first_failing
    assert in_order.first_failing["lost-write"]["run"] == run_id(c.spec.cells()[0], 3)
    # Examples to replay are the first to finish: the log's order.
    assert [e["seed"] for e in out_of_order.signatures()["lost-write"]["examples"]] == \
        [r["seed"] for r in shuffled if r["signature"] == "lost-write"][:EXAMPLES]


def test_the_tally_keeps_counts_and_the_first_seeds_not_the_rows(tmp_path):
    c = campaign(tmp_path)
    tally = fold(c, rows_of(c))
    page_cache, fsync = tally.reports()
    lost = page_cache.findings["lost-write"]
    expected = [s for s in range(300) if s % 7 == 3]
    assert lost.count == len(expected) == 43
    assert lost.seeds == expected[:KEEP_SEEDS]
    # Seeds 49, 99, ... raise, but for 199, which lost a write first: 5 errors here, 6 on fsync.
    assert (page_cache.ok, page_cache.violation, page_cache.error, page_cache.missing) == (300 - 43 - 5, 43, 5, 0)
    assert (fsync.ok, fsync.violation, fsync.error) == (300 - 6, 0, 6)
    assert page_cache.acked_lost == 2 * 43 and fsync.acked == 100 * 300
    assert tally.signatures() == {
        "lost-write": {"runs": 43, "cells": [0], "examples": [{"run": run_id(c.spec.cells()[0], s), "seed": s,
                                                               "replay": f"kraftlab run {s}"} for s in expected[:EXAMPLES]]},
        "error-RuntimeError": tally.signatures()["error-RuntimeError"],
    }
    assert tally.signatures()["error-RuntimeError"]["runs"] == 11
    assert list(tally.signatures()) == ["lost-write", "error-RuntimeError"]  # the most frequent first
    verdicts = check_expect(c, tally.reports())
    assert verdicts[0]["held"] and not verdicts[1]["held"]
    assert "6 runs raised" in verdicts[1]["problems"][0]


def test_a_run_counted_twice_or_not_of_the_campaign_counts_once_or_not_at_all(tmp_path):
    c = campaign(tmp_path)
    row = rows_of(c)[3]
    tally = CampaignTally(c)
    assert tally.add(row) and not tally.add(dict(row))
    assert not tally.add(dict(row, run="c9-s3", cell=9))  # no such cell
    assert not tally.add(dict(row, run="c0-s999", seed=999))  # no such seed
    assert not tally.add(dict(row, run="c1-s3"))  # the id does not name its cell and seed
    assert tally.done == {row["run"]} and sum(r.violation for r in tally.reports()) == 1
    assert sum(r.missing for r in tally.reports()) == 2 * 300 - 1


def test_cell_reports_of_rows_by_run_id_is_the_tally(tmp_path):
    c = campaign(tmp_path)
    rows = rows_of(c)
    by_id = {r["run"]: {k: v for k, v in r.items() if k not in ("run", "cell", "seed")} for r in rows}
    assert [r.as_dict() for r in cell_reports(c, by_id)] == [r.as_dict() for r in fold(c, rows).reports()]


def test_results_parquet_is_written_a_batch_at_a_time_with_one_type_per_column(tmp_path, monkeypatch):
    """A column first seen in the last batch is there; one that is int in one batch and float in
    another is float; one with ints and text is text; the rows are the log's, in its order."""
    monkeypatch.setattr(results_log, "BATCH_ROWS", 4)
    log = tmp_path / "results.jsonl"
    rows = [{"run": f"r{i}", "seed": i, "status": "ok", "violations": [], "mixed": i if i < 5 else i + 0.5,
             "label": i if i != 7 else "seven"} for i in range(10)]
    rows[9]["late"] = 3
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + json.dumps(rows[0]) + "\n")  # run r0 again: counted once
    assert [r["run"] for r in iter_log(log)] == [f"r{i}" for i in range(10)]
    assert write_parquet(LogRows(log), tmp_path / "results.parquet", ["run", "seed"]) == 10
    table = pq.read_table(tmp_path / "results.parquet")
    assert table.column_names == ["run", "seed", "status", "violations", "mixed", "label", "late"]
    types = {f.name: str(f.type) for f in table.schema}
    assert types == {"run": "string", "seed": "int64", "status": "string", "violations": "list<element: string>",
                     "mixed": "double", "label": "string", "late": "int64"}
    assert table.column("mixed").to_pylist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.5, 6.5, 7.5, 8.5, 9.5]
    assert table.column("label").to_pylist()[6:8] == ["6", "seven"]
    assert table.column("late").to_pylist() == [None] * 9 + [3]
    # A one-pass iterator is read once, into memory, and still written whole.
    assert write_parquet(iter(rows), tmp_path / "again.parquet", ["run"]) == 10


class SlowThreads:
    """An executor whose runs are threads of this process that take `seconds` (as `runtime: ray`
    runs are): they cannot be cancelled once started."""

    window = 2

    def __init__(self, seconds: float) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.seconds = seconds
        self.pool = ThreadPoolExecutor(2)

    def submit(self, plan):
        return self.pool.submit(self._run, plan)

    def _run(self, plan):
        import time

        from actors.runtime import interrupts

        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            interrupts.raise_if_abandoned()  # as the Ray cluster's poll does
            time.sleep(0.01)
        return {"run": plan.run, "seed": plan.seed, "cell": plan.cell, "status": "ok", "violations": [], "signature": "", "replay": ""}

    def row(self, result, plan):
        return result

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)


def interrupted_campaign(tmp_path, monkeypatch, second_interrupt: bool):
    import os
    import signal
    import threading

    import pytest

    from actors.runtime import interrupts
    from kraftlab.campaign.orchestrate import run_campaign

    monkeypatch.setattr(interrupts, "_abandon", threading.Event())
    c = campaign(tmp_path)
    stopping = []

    def on_stopping(running: int) -> None:
        stopping.append(running)
        if second_interrupt:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()

    # Ctrl-C while the first two runs go: a real SIGINT, which wakes the main thread's waits.
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        run_campaign(c, tmp_path / "out", lambda runs_dir: SlowThreads(2.0), on_stopping=on_stopping)
    return stopping, [json.loads(line)["run"] for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]


def test_runs_that_cannot_be_cancelled_are_waited_for_and_recorded(tmp_path, monkeypatch):
    """Ctrl-C of a campaign whose runs are threads: it says it waits, and the runs finishing
    meanwhile are logged (before, the wait was silent and its runs were thrown away)."""
    stopping, logged = interrupted_campaign(tmp_path, monkeypatch, second_interrupt=False)
    assert stopping == [2] and logged == ["c0-s0", "c0-s1"]
    assert pq.read_table(tmp_path / "out" / "results.parquet").num_rows == 2


def test_a_second_interrupt_abandons_them(tmp_path, monkeypatch):
    stopping, logged = interrupted_campaign(tmp_path, monkeypatch, second_interrupt=True)
    assert stopping == [2] and logged == []  # abandoned: the next start runs them again
