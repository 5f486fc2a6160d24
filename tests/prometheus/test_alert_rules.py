"""infra/prometheus/alerts.yml: valid rules (`promtool check rules`) that fire when and only when
their unit tests say (`promtool test rules infra/prometheus/alerts_test.yml`: offline partitions,
under-MinISR, an ELR shrinking to 0 while offline, acknowledged records lost, no active
controller)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "infra" / "prometheus"
pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (.ci/run installs it)")


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=RULES, capture_output=True, text=True, timeout=60)


def test_the_rules_are_valid():
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0 and "5 rules found" in result.stdout, result.stdout + result.stderr


def test_the_rules_pass_their_unit_tests():
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_the_shipped_prometheus_configs_are_valid():
    # prometheus.yml: kraftlab's live series, Ray's through its service-discovery file, the alerts.
    for config in ("prometheus.yml", "empty.yml"):
        result = promtool("check", "config", config)
        assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr
    assert "1 rule files found" in promtool("check", "config", "prometheus.yml").stdout
