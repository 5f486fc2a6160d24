"""The demo's report (kraftlab/demo.py)."""

from kraftlab.demo import problems


def test_the_demo_says_why_a_run_did_not_go_as_expected():
    summary = {
        "failures": [{"step": 15, "kind": "wait_for", "detail": "timed out"}],
        "violations": [{"invariant": "LeaderCompleteness"}, {"invariant": "ElrCompleteness"}],
        "expect_violations": ["LeaderCompleteness", "LogMatching"],
    }
    assert problems(summary) == [
        "step 15 (wait_for): timed out",
        "expected violations not seen: LogMatching",
        "violations not expected: ElrCompleteness",
    ]
    assert problems({"failures": [], "violations": [{"invariant": "LogMatching"}], "expect_violations": ["LogMatching"]}) == []


def test_the_demo_says_where_spark_disagrees_with_the_run():
    from dataclasses import replace
    from pathlib import Path

    from kraftlab.demo import DemoRow

    row = DemoRow("ELR on", "s", True, 10, 0, 0.0, 0.0, 1.0, None, Path("/x"))
    assert row.analysis_problems() == []  # not analyzed
    analysis = {"valid": False, "stats": {"lost_by_acks": {"all": 2}}, "anomalies": {"lost-write": {"count": 2}, "duplicate": {"count": 0}}}
    assert replace(row, analysis=analysis).analysis_problems() == [
        "Spark found 2 acknowledged acks=all records lost, the run's checker 0",
        "Spark: the history is False (lost-write 2)",
    ]
    agreeing = {"valid": False, "stats": {"lost_by_acks": {"all": 2}}, "anomalies": {"lost-write": {"count": 2}}}
    assert replace(row, acked_lost=2, analysis=agreeing).analysis_problems() == []
