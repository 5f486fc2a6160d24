"""`kraftlab demo`, the README's main command, on the embedded local Ray: Last Replica Standing
under load with ELR on and off, side by side."""

import json

import pytest
from click.testing import CliRunner

from kraftlab.cli import main

pytestmark = pytest.mark.ray


def test_demo_compares_elr_on_and_off_on_ray(local_ray, tmp_path):
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    on = json.loads((tmp_path / "demo" / "last-replica-standing-load" / "summary.json").read_text())
    off = json.loads((tmp_path / "demo" / "last-replica-standing-load-no-elr" / "summary.json").read_text())
    assert on["runtime"] == off["runtime"] == "ray"
    assert on["ok"], (on["failures"], [v["invariant"] for v in on["violations"]])
    # Without ELR: every violation the scenario expects, and nothing else (the loss was caught).
    assert off["failures"] == [], result.output
    assert {v["invariant"] for v in off["violations"]} == set(off["expect_violations"]), result.output
    assert off["ok"]
    # ELR: nothing acknowledged lost, at the price of waiting offline for broker 2.
    assert on["stats"]["acked_lost"] == 0 < off["stats"]["acked_lost"]
    assert on["stats"]["availability"]["t-0"]["offline_ms"] > off["stats"]["availability"]["t-0"]["offline_ms"]
    assert on["stats"]["load"]["acked"] > 0 and on["stats"]["produce_latency_ms"]["p99"] is not None
    for text in ("ELR on", "ELR off", "p99 ms"):
        assert text in result.output
