"""A campaign directory analyzed as one dataset (observability/analysis/loading.py): results per
run (runs.parquet), per matrix cell (checks.json `cells`), a run listed but missing, and a
campaign with nothing readable (bad input)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from observability.analysis.analyze import analyze_run

from .histories import History, clean, produced
from .test_cli import analyze_cli, assert_input_error, truncated_history

ELR = "cluster.protocol.elr"


def lost_one() -> History:
    """Five records acknowledged, the final read holds four: one lost write."""
    return produced().final(0, range(4)).final_done()


def campaign(root) -> None:
    for run, history in (("elr-on-1", clean()), ("elr-on-2", clean()), ("elr-off-1", lost_one())):
        history.write(root / "runs" / run)
    rows = [{"run": "elr-on-1", "seed": 1, ELR: True, "status": "ok"},
            {"run": "elr-on-2", "seed": 2, ELR: True, "status": "ok"},
            {"run": "elr-off-1", "seed": 1, ELR: False, "status": "violation"},
            {"run": "elr-off-2", "seed": 2, ELR: False, "status": "ok"}]  # listed, never written
    pq.write_table(pa.Table.from_pylist(rows), root / "results.parquet")


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign")
    campaign(root)
    checks, _ = analyze_run(root, engine="local", spark=spark)
    assert json.loads((root / "analysis" / "checks.json").read_text()) == checks
    return root, checks


def test_the_verdict_covers_every_run(analyzed):
    _, checks = analyzed
    assert checks["runs"] == 3 and checks["valid"] is False  # one run lost a write
    assert checks["anomalies"]["lost-write"] == {
        "count": 1, "runs": 1,
        "examples": [{"run": "elr-off-1", "producer": "p1", "sequence": 4, "topic": "t", "partition": 0, "offset": 4, "acks": "all"}]}
    assert checks["stats"]["acked"] == 15 and checks["stats"]["runs_valid"] == 2 and checks["stats"]["runs_invalid"] == 1
    assert checks["stats"]["runs_missing"] == 1
    assert "elr-off-2" in checks["missing_runs"] and "no run directory" in checks["missing_runs"]["elr-off-2"]


def test_results_per_matrix_cell(analyzed):
    _, checks = analyzed
    by_cell = {c["cell"][ELR]: c for c in checks["cells"]}
    assert set(by_cell) == {True, False}
    on, off = by_cell[True], by_cell[False]
    assert (on["runs"], on["valid"], on["invalid"], on["unknown"]) == (2, 2, 0, 0)
    assert (off["runs"], off["valid"], off["invalid"]) == (1, 0, 1)
    assert on["anomalies"]["lost-write"] == 0 and off["anomalies"]["lost-write"] == 1 and off["lost_writes"] == 1
    assert on["acked"] == 10 and off["acked"] == 5


def test_one_row_per_run_and_windows_per_run(analyzed):
    root, _ = analyzed
    rows = {r["run"]: r for r in pq.read_table(root / "analysis" / "runs.parquet").to_pylist()}
    assert set(rows) == {"elr-on-1", "elr-on-2", "elr-off-1"}
    assert rows["elr-off-1"][ELR] is False and rows["elr-off-1"]["seed"] == 1
    assert rows["elr-off-1"]["valid"] == "false" and rows["elr-off-1"]["lost-write"] == 1 and rows["elr-off-1"]["lost_acks_all"] == 1
    assert rows["elr-on-1"]["valid"] == "true" and rows["elr-on-1"]["acked"] == 5
    windows = pq.read_table(root / "analysis" / "windows.parquet").to_pylist()
    assert {w["run"] for w in windows} == set(rows)
    assert sum(w["acked"] for w in windows if w["run"] == "elr-on-2") == 5


def test_a_campaign_with_no_readable_run_is_bad_input(tmp_path):
    truncated_history(tmp_path / "runs" / "r1")
    result = analyze_cli(tmp_path)
    assert_input_error(result, tmp_path, "a campaign directory with no run to analyze")
    assert "not a readable Parquet file" in " ".join(result.stderr.split())


def test_a_directory_written_by_kraftlab_campaign(spark, tmp_path):
    """What `kraftlab campaign` writes (issue 15) is what `kraftlab analyze` reads: its runs, their
    variant as the cell, and per run the same lost writes as the campaign's own verdicts."""
    from click.testing import CliRunner

    from kraftlab.cli import main

    campaign_file = tmp_path / "c.yaml"
    campaign_file.write_text(
        "name: to-analyze\nscenario: random-faults\nseeds: 2\n"
        "variants: {all-on: {}, truncation-off: {cluster.protocol.leader_epoch_truncation: false}}\n"
        "faults: {kinds: [crash_os, crash_process, isolate, partition], mean_interval_ms: 3000, duration_ms: 12000, converge_ms: 30000}\n"
        "load: {producers: 1, consumers: 1, rate_per_s: 40, acks: all}\n")
    out = tmp_path / "out"
    done = CliRunner().invoke(main, ["campaign", str(campaign_file), "--out", str(out), "--parallel", "0", "--minimize-budget", "0"],
                              catch_exceptions=False)
    # No `expect` block: exit 1 when truncation off found something (it may), never 2.
    assert done.exit_code in (0, 1), done.output
    assert json.loads((out / "summary.json").read_text())["errors"] == 0
    checks, _ = analyze_run(out, engine="local", spark=spark)
    assert checks["runs"] == 4 and not checks.get("missing_runs")
    assert sorted(c["cell"]["variant"] for c in checks["cells"]) == ["all-on", "truncation-off"]
    results = {r["run"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    spark_runs = {r["run"]: r for r in pq.read_table(out / "analysis" / "runs.parquet").to_pylist()}
    assert set(spark_runs) == set(results)
    for run, row in results.items():
        assert (spark_runs[run]["lost_acks_all"] > 0) == (row["stats.acked_lost"] > 0), run


def test_runs_whose_history_was_not_kept_are_counted_apart_not_missing(spark, tmp_path):
    """`kraftlab campaign --keep-runs failures` removes the history of runs that found nothing
    (results.parquet `history_kept` false): the analysis leaves them out without calling the
    campaign incomplete, and says how many."""
    clean().write(tmp_path / "runs" / "r1")
    (tmp_path / "runs" / "r2").mkdir(parents=True)
    (tmp_path / "runs" / "r2" / "summary.json").write_text("{}")
    rows = [{"run": "r1", "seed": 1, "status": "ok", "history_kept": True},
            {"run": "r2", "seed": 2, "status": "ok", "history_kept": False},
            {"run": "r3", "seed": 3, "status": "ok", "history_kept": False}]  # its folder gone too
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "results.parquet")
    checks, _ = analyze_run(tmp_path, engine="local", spark=spark)
    assert checks["valid"] is True and checks["runs"] == 1
    assert checks["stats"]["runs_not_kept"] == 2 and checks["stats"]["runs_missing"] == 0
    # A run kept after all (a resume with --keep-runs all ran it again) is analyzed.
    clean().write(tmp_path / "runs" / "r2")
    checks, _ = analyze_run(tmp_path, out_dir=tmp_path / "again", engine="local", spark=spark)
    assert checks["runs"] == 2 and checks["stats"]["runs_not_kept"] == 1


def test_a_results_parquet_without_a_run_column_is_bad_input_naming_it(tmp_path):
    from observability.analysis.errors import AnalysisInputError
    from observability.analysis.loading import discover

    clean().write(tmp_path / "runs" / "r1")
    pq.write_table(pa.Table.from_pylist([{"seed": 1, "status": "ok"}]), tmp_path / "results.parquet")
    with pytest.raises(AnalysisInputError, match=r"results\.parquet: no `run` column"):
        discover(tmp_path)
    (tmp_path / "results.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(AnalysisInputError, match=r"results\.parquet: not a readable Parquet file"):
        discover(tmp_path)


def test_latency_is_reported_with_count_0_when_nothing_was_acknowledged(spark, tmp_path):
    """As summary.json's `produce_latency_ms`: the key is there, with null percentiles."""
    History().final_done(hwm=0).write(tmp_path / "run")
    checks, _ = analyze_run(tmp_path / "run", engine="local", spark=spark)
    assert checks["stats"]["latency_ms"] == {"count": 0, "p50": None, "p99": None, "p999": None, "max": None,
                                             "method": checks["stats"]["latency_ms"]["method"]}
