"""Running a scenario file's text through `kraftlab run`, as a user does, for the scenario tests."""

import json

from click.testing import CliRunner

from kraftlab.cli import main


def run_text(tmp_path, text: str):
    """Write `text` as a scenario file, run it; (the run's summary, the CLI result)."""
    source = tmp_path / "scenario.yaml"
    source.write_text(text)
    result = CliRunner().invoke(main, ["run", str(source), "--out", str(tmp_path / "run")])
    return json.loads((tmp_path / "run" / "summary.json").read_text()), result


def assert_ran_as_expected(summary, result) -> None:
    """No failed step, exactly the expected violations, exit code 0."""
    assert summary["failures"] == [], result.output
    assert {v["invariant"] for v in summary["violations"]} == set(summary["expect_violations"])
    assert summary["ok"] is True and result.exit_code == 0, result.output
