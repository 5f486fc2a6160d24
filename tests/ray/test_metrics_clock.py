"""metrics.om on Ray is stamped with the wall clock (docs/reference/metrics.md): its samples are
`time_ms` after the run's clock started, and that clock starts once Ray is up. Before, the file's
base was taken before Ray started while `time_ms` counted from after: every sample was stamped
early by Ray's start-up (5-7 s here), so the file disagreed with live scrapes and Ray's own logs."""

import time

import pytest

from actors.runtime.ray import adapter
from kraftlab.runner import run_scenario
from workloads.scenario.loading import validate

pytestmark = pytest.mark.ray

RAY_START_UP_S = 2.0


def scenario():
    return validate(
        {
            "name": "metrics-clock",
            "runtime": "ray",
            "cluster": {"brokers": 1, "controllers": 1, "storage": "page_cache"},
            "topics": [{"name": "t", "replication_factor": 1}],
            "steps": [{"wait": 500}],
        },
        "test_metrics_clock.py",
    )


def test_metrics_om_is_stamped_from_the_moment_ray_is_up(local_ray, tmp_path, monkeypatch):
    real_connect = adapter.connect
    calls = []

    def connect_after_start_up(*args, **kwargs):
        # The module's Ray is already up, so a command's first connect would return at once: make
        # it take as long as starting Ray does. Later calls return at once, as on a real start.
        if not calls:
            time.sleep(RAY_START_UP_S)
        calls.append(args)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(adapter, "connect", connect_after_start_up)
    before = time.time()
    result = run_scenario(scenario(), source="test", out_dir=tmp_path / "run")
    after = time.time()
    assert result.ok, result.summary["failures"]
    stamps = [float(line.split()[-1]) for line in (result.run_dir / "metrics.om").read_text().splitlines()
              if line and not line.startswith("#")]
    assert before + RAY_START_UP_S <= min(stamps)  # the first sample: time_ms 0, once Ray was up
    assert max(stamps) <= after  # and none stamped in the future
