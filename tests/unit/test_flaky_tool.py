"""`make test-flaky` (tests/flaky.py): a test that fails in one pass of several is in its table."""

from __future__ import annotations

import json

from tests import flaky

# Fails in its second pass only: a counter file beside it counts the passes.
SOMETIMES = """
from pathlib import Path

def test_steady():
    assert True

def test_sometimes():
    counter = Path(__file__).with_name("passes")
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    assert n != 2, "late in pass 2"
"""


def test_a_test_that_fails_once_in_three_passes_is_listed_with_its_pass_and_message(tmp_path):
    (tmp_path / "test_sometimes.py").write_text(SOMETIMES)
    out = tmp_path / "out"
    assert flaky.main(["--runs", "3", "--out", str(out), "--", str(tmp_path / "test_sometimes.py")]) == 1
    report = json.loads((out / "flaky.json").read_text())
    assert [p["tests"] for p in report["passes"]] == [2, 2, 2]
    [row] = report["failed"]
    assert row["test"].endswith("test_sometimes.py::test_sometimes")
    assert (row["runs"], row["failed"], row["passes"]) == (3, 1, [2])
    assert "late in pass 2" in row["first"]


def test_every_pass_green_exits_0(tmp_path):
    (tmp_path / "test_green.py").write_text("def test_green():\n    assert 1 + 1 == 2\n")
    assert flaky.main(["--runs", "2", "--out", str(tmp_path / "out"), "--", str(tmp_path / "test_green.py")]) == 0
    assert json.loads((tmp_path / "out" / "flaky.json").read_text())["failed"] == []
