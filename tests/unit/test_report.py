"""report.html and its PNGs (observability/analysis/report.py), from hand-made checks.json,
windows.parquet and events: no Spark."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from observability.analysis.errors import AnalysisInputError
from observability.analysis.report import MAX_PARTITIONS_PLOTTED, choose_partitions, fraction_showing, write_report
from observability.analysis.report_data import FaultSpan, fault_spans, partition_states
from observability.analysis.windows import SCHEMA as WINDOWS_SCHEMA
from observability.events import Fault, PartitionChange
from tests.spark.histories import History

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ANOMALIES = ("lost-write", "duplicate", "inconsistent-offsets", "uncommitted-read", "nonmonotonic-poll", "poll-skip", "unseen")


def partition_change(h: History, node: str, topic: str, partition: int, offset: int, isr, elr=(), lke=(),
                     leader: int | None = 1, at: float | None = None) -> None:
    h.add(node, PartitionChange(topic, partition, leader, offset, offset, (1, 2, 3), tuple(isr), tuple(elr), tuple(lke),
                                offset, False, 2, "", "test"), at=at)


def history() -> History:
    """t-0 shrinks to an ISR of one with an ELR, then recovers; each record reported by two
    voters, c2 later. Faults: b3 isolated then healed, b1 crashed and never restarted."""
    h = History().produce(range(5), 0)
    for voter, delay in (("c1", 0.0), ("c2", 40.0)):
        partition_change(h, voter, "t", 0, 10, [1, 2, 3], at=100 + delay)
        partition_change(h, voter, "t", 0, 20, [1], elr=[2, 3], at=1600 + delay)
        partition_change(h, voter, "t", 0, 30, [1, 2, 3], at=3200 + delay)
    h.add("driver", Fault("isolate", "b3"), at=1500)
    h.add("driver", Fault("crash_os", "b1"), at=2500)
    h.add("driver", Fault("restart", "b2"), at=2600)  # another node's restart ends nothing of b1's
    h.add("driver", Fault("heal", "b3"), at=3500)
    return h


def checks(valid=False, **extra) -> dict:
    anomalies = {name: {"count": 0, "examples": []} for name in ANOMALIES}
    anomalies["lost-write"] = {"count": 2, "examples": [
        {"producer": "p1", "sequence": 3, "topic": "t", "partition": 0, "offset": 3, "acks": "all"},
        {"producer": "p1", "sequence": 4, "topic": "t", "partition": 0, "offset": 4, "acks": "all"}]}
    return {"valid": valid, "engine": "local", "runs": 1, "events": 42, "anomalies": anomalies,
            "invariants": {"LeaderCompleteness": {"count": 1, "source": "summary.json", "examples": [
                {"at_ms": 1234.5, "detail": "t-0: leader <b>1</b> lacks offsets 3..4"}]}},
            "stats": {"acked": 5, "throughput_rec_s": 1.25, "latency_ms": {"p50": 11.0, "p99": 14.9, "p999": 15.0, "max": 15.0},
                      "offline_s": 0, "unavailable_s": 2},
            **extra}


def window_rows(n: int = 5) -> list[dict]:
    return [{"second": s, "acked": 5 if s == 0 else 0, "acked_per_s": 5.0 if s == 0 else 0.0,
             "latency_p50_ms": 11.0 if s == 0 else None, "latency_p99_ms": 14.9 if s == 0 else None,
             "latency_p999_ms": 15.0 if s == 0 else None, "latency_max_ms": 15.0 if s == 0 else None,
             "partitions_offline": 0, "partitions_under_min_isr": 1 if s in (1, 2) else 0,
             "faults_active": 1 if s >= 1 else 0} for s in range(n)]


def write_analysis(out_dir: Path, checks_json: dict, rows: list[dict], schema: pa.Schema = WINDOWS_SCHEMA) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "checks.json").write_text(json.dumps(checks_json))
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), out_dir / "windows.parquet")
    return out_dir


@pytest.fixture
def run_dir(tmp_path) -> Path:
    run = history().write(tmp_path / "run")
    write_analysis(run / "analysis", checks(), window_rows())
    return run


def image_files(page: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', page)


def assert_real_png(path: Path) -> None:
    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_MAGIC, path
    with Image.open(path) as image:
        image.load()  # decodes the whole file: a truncated PNG fails here
        width, height = image.size
    assert width > 300 and height > 150, (path, image.size)


def test_page_shows_verdict_stats_anomalies_and_invariants(run_dir):
    page = write_report(run_dir / "analysis", run_dir).read_text()
    assert "<title>kraftlab analysis: run</title>" in page
    assert 'class="verdict invalid">INVALID<' in page
    for name in ANOMALIES:
        assert f"<code>{name}</code>" in page
    assert "sequence=<code>3</code>" in page and "sequence=<code>4</code>" in page  # every example shown
    assert "<code>LeaderCompleteness</code>" in page and "summary.json" in page and "at 1,234.50 ms" in page
    assert "<code>latency_ms.p99</code>" in page and "14.90" in page
    # Values are escaped: the invariant's detail is text, not markup.
    assert "leader &lt;b&gt;1&lt;/b&gt; lacks" in page and "<b>1</b>" not in page
    assert "<script" not in page and "http" not in page  # no script, nothing fetched


def test_an_invariant_without_its_own_source_shows_the_runs(tmp_path):
    c = checks()
    del c["invariants"]["LeaderCompleteness"]["source"]
    c["stats"]["invariants_source"] = "none: no summary.json"
    page = write_report(write_analysis(tmp_path / "a", c, window_rows()), None).read_text()
    assert "<td>none: no summary.json</td>" in page


def test_unknown_verdict_gives_the_reason(tmp_path):
    out = write_analysis(tmp_path / "a", checks(valid="unknown", reason="node_seq gap in b1 incarnation 0"), window_rows())
    page = write_report(out, None).read_text()
    assert ">unknown<" in page and "why unknown: node_seq gap in b1 incarnation 0" in page


def test_every_image_is_a_real_png_written_atomically(run_dir):
    out = run_dir / "analysis"
    page = write_report(out, run_dir).read_text()
    assert image_files(page) == ["latency.png", "rate.png", "isr_elr.png"]
    for name in image_files(page):
        assert_real_png(out / name)
    assert not list(out.glob(".*partial")), "a temporary file was left behind"


def test_partition_states_are_deduped_across_voters_keeping_the_earliest(run_dir):
    states = partition_states(run_dir).to_pylist()
    assert [(r["metadata_offset"], r["time_ms"], r["isr_size"], r["elr_size"]) for r in states] == [
        (10, 100.0, 3, 0), (20, 1600.0, 1, 2), (30, 3200.0, 3, 0)]


def test_fault_spans_follow_the_windows_matching_rule(tmp_path):
    h = History()
    for at, fault, target in ((100, "isolate", "b3"), (200, "partition", "b1,c1|b2,b3"), (300, "link", "b1->b2"),
                              (400, "crash_process", "b1"), (500, "restart", "b2"), (600, "heal", "b2"),
                              (700, "restart", "b1"), (800, "heal", "all"), (900, "shutdown", "b3")):
        h.add("driver", Fault(fault, target), at=at)
    spans = fault_spans(h.write(tmp_path / "run"))
    assert spans == [
        FaultSpan("isolate", "b3", 100.0, 800.0),  # heal b2 names another node; heal all ends it
        FaultSpan("partition", "b1,c1|b2,b3", 200.0, 600.0),  # healing any node of it
        FaultSpan("link", "b1->b2", 300.0, 600.0),  # either end of the link
        FaultSpan("crash_process", "b1", 400.0, 700.0),  # restart of b1, not of b2
        FaultSpan("shutdown", "b3", 900.0, None),  # never undone: to the end
    ]


def test_many_partitions_plot_the_busiest_few_and_say_so(tmp_path):
    h = History()
    offset = 0
    for p in range(20):
        for _ in range(1 + (p % 10 == 3) * 5 + p // 10):  # t-3 and t-13 change most, then 10..19
            offset += 1
            partition_change(h, "c1", "t", p, offset, [1, 2, 3])
    run = h.write(tmp_path / "run")
    states = partition_states(run)
    chosen, total = choose_partitions(states)
    assert total == 20 and len(chosen) == MAX_PARTITIONS_PLOTTED
    assert ("t", 3) in chosen and ("t", 13) in chosen and ("t", 0) not in chosen
    write_analysis(run / "analysis", checks(), window_rows())
    page = write_report(run / "analysis", run).read_text()
    assert f"{MAX_PARTITIONS_PLOTTED} of the run&#x27;s 20 partitions" in page


def campaign_checks() -> dict:
    cells = [
        {"cell": {"cluster.protocol.elr": True, "cluster.storage": "fsync"}, "runs": 10, "valid": 7, "invalid": 2, "unknown": 1,
         "anomalies": {name: (2 if name == "lost-write" else 0) for name in ANOMALIES},
         "invariants": {"LeaderCompleteness": 1}, "acked": 12345, "throughput_rec_s": 480.2,
         "latency_ms": {"p50": 3.1, "p99": 40.2, "p999": 90.0, "max": 120.5}},
        {"cell": {"cluster.protocol.elr": False, "cluster.storage": "page_cache"}, "runs": 10, "valid": 10, "invalid": 0,
         "unknown": 0, "anomalies": {name: 0 for name in ANOMALIES}, "invariants": {}, "acked": 23456,
         "throughput_rec_s": 910.0, "latency_ms": {"p50": 2.0, "p99": 20.0, "p999": 30.0, "max": 35.5}},
    ]
    return checks(runs=20, cells=cells)


def test_campaign_shows_cells_and_heatmap_without_time_plots(tmp_path):
    rows = [{**r, "run": run} for run in ("r1", "r2") for r in window_rows(3)]
    out = write_analysis(tmp_path / "campaign" / "analysis", campaign_checks(), rows, WINDOWS_SCHEMA)
    page = write_report(out, None).read_text()
    assert "cluster.protocol.elr=true, cluster.storage=fsync" in page
    assert "cluster.protocol.elr=false, cluster.storage=page_cache" in page
    assert "<code>lost-write</code> 2" in page and "<code>LeaderCompleteness</code> 1" in page
    assert "480.20" in page and "23,456" in page
    assert "Not drawn for a campaign" in page
    assert image_files(page) == ["heatmap.png"]
    assert_real_png(out / "heatmap.png")
    assert not (out / "latency.png").exists()


def test_heatmap_values_are_fractions_of_the_cells_runs():
    cell = campaign_checks()["cells"][0]
    assert fraction_showing(cell, "lost-write") == pytest.approx(0.2)
    assert fraction_showing(cell, "LeaderCompleteness") == pytest.approx(0.1)
    assert fraction_showing(cell, "duplicate") == 0.0
    assert fraction_showing({"runs": 0, "anomalies": {"lost-write": 0}}, "lost-write") == 0.0


@pytest.mark.parametrize("missing", ["checks.json", "windows.parquet"])
def test_missing_input_names_the_path(tmp_path, missing):
    out = write_analysis(tmp_path / "analysis", checks(), window_rows())
    (out / missing).unlink()
    with pytest.raises(AnalysisInputError, match=re.escape(str(out / missing))):
        write_report(out, None)
    assert not (out / "report.html").exists()


def test_a_history_without_acks_partitions_or_faults_still_gets_every_plot(tmp_path):
    run = History().add("driver", Fault("heal", "all"), at=10).write(tmp_path / "run")  # a heal undoes nothing
    out = write_analysis(run / "analysis", checks(valid=True), [])
    page = write_report(out, run).read_text()
    for name in image_files(page):
        assert_real_png(out / name)
    assert "No fault was applied." in page and "no partition: the history has no partition_change record" in page
