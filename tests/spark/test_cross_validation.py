"""Cross-validation: the whole scenario library, run in the simulator, then analyzed by Spark as
one campaign directory. On every scenario, Spark's verdicts equal the online checker's
(summary.json), for what both judge:

- the invariants Spark re-checks in full (observability/analysis/invariants.py) are found by Spark
  exactly where the online checker found them; the two it checks only at ELR elections, and
  LeaderCompleteness, which it checks only where a follower cuts records it knew committed
  (observability/analysis/truncations.py), are found by Spark only where the online checker found
  them too (Spark's check is the narrower one);
- the records acknowledged with acks=all that the final read lacks (Spark's `lost-write`, for
  acks=all) are the summary's `acked_lost`;
- the counts of acknowledged and not acknowledged records agree;
- the campaigns' count of the history anomalies in plain Python (observability/history_anomalies.py)
  equals Spark's, anomaly by anomaly.

No library scenario breaks one of the invariants Spark re-checks in full or at ELR elections (the
online checker finds none of them there), so for those the library shows that Spark raises no false
alarm on 32 real histories, healthy ones and protocol variants that lose data. LeaderCompleteness's
truncation part does find something in the library: the Last Replica Standing without ELR, where
followers cut committed records to match a leader elected cleanly without them; and it excuses what
the protocol allows there, such as broker 1 cutting the ten records it knew committed after the
unclean election of unclean-leader-election-enabled. tests/spark/test_invariants.py shows each
re-check finding what it must on a history built to break it.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from kraftlab.runner import run_scenario
from observability.analysis.analyze import analyze_run
from observability.anomaly_names import ANOMALY_NAMES
from observability.history_anomalies import count_anomalies
from workloads.scenario.loading import library_scenarios, load_scenario

FULL = ("ElectionSafety", "MonotonicEpochs", "IsrElrShape")  # Spark's statement is the online one
# Spark judges the ELR elections only, and LeaderCompleteness only through followers' truncations.
NARROWER = ("NoFencedInIsr", "UncleanExclusion", "LeaderCompleteness")
# The library scenarios where a follower cuts records it knew committed, with no unclean election
# or breach of tolerance to excuse it: an incomplete leader, elected cleanly from a lone ISR member
# back from an unclean shutdown with an empty log.
COMMITTED_RECORDS_CUT = ("last-replica-standing-no-elr", "last-replica-standing-load-no-elr")


@pytest.fixture(scope="module")
def library(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("library")
    summaries = {}
    for name in sorted(library_scenarios()):
        scenario, _ = load_scenario(name)
        summaries[name] = run_scenario(scenario, source=name, out_dir=root / "runs" / name).summary
    checks, _ = analyze_run(root, engine="local", spark=spark)
    rows = {r["run"]: r for r in pq.read_table(root / "analysis" / "runs.parquet").to_pylist()}
    return summaries, checks, rows, root


def test_every_scenario_of_the_library_was_analyzed(library):
    summaries, checks, rows, _ = library
    assert checks["runs"] == len(summaries) == len(rows) >= 30
    assert "missing_runs" not in checks


@pytest.mark.parametrize("name", sorted(library_scenarios()))
def test_spark_and_the_online_checker_agree(library, name, tmp_path):
    summaries, _, rows, _ = library
    summary, row = summaries[name], rows[name]
    # Every violation the online checker found, after the last step too (checks.json copies both).
    online = {v["invariant"] for v in summary["violations"] + summary["epilogue_violations"]}
    spark_found = set(row["spark_invariants"])
    assert spark_found & set(FULL) == online & set(FULL)
    assert spark_found & set(NARROWER) <= online
    assert spark_found <= set(FULL) | set(NARROWER)
    assert set(row["invariants"]) == spark_found | online  # checks.json reports both
    assert row["lost_acks_all"] == summary["stats"]["acked_lost"]
    # `failed` is every outcome but ok in both; the history tells "fail" from "info".
    assert row["acked"] == summary["stats"]["acked"]
    assert (row["failed"], row["indeterminate"]) == (summary["stats"]["failed"], summary["stats"]["indeterminate"])
    assert row["valid"] in ("true", "false")  # every library run has a complete history


def test_the_truncation_part_finds_exactly_the_cuts_the_protocol_does_not_allow(library):
    _, _, rows, _ = library
    found = {name for name, row in rows.items() if "LeaderCompleteness" in row["spark_invariants"]}
    assert found == set(COMMITTED_RECORDS_CUT)


@pytest.mark.parametrize("name", sorted(library_scenarios()))
def test_the_campaigns_anomaly_counts_equal_sparks(library, name):
    _, _, rows, root = library
    assert count_anomalies(root / "runs" / name / "events") == {a: rows[name][a] for a in ANOMALY_NAMES}


def test_the_library_shows_history_anomalies_for_the_comparison_to_judge(library):
    # Not only zeros compared: the scenarios without ELR lose, re-read and rewind.
    _, _, rows, _ = library
    found = {a for row in rows.values() for a in ANOMALY_NAMES if row[a]}
    assert {"lost-write", "uncommitted-read", "inconsistent-offsets", "nonmonotonic-poll"} <= found
