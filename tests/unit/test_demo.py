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
