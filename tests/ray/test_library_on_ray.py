"""Library scenarios on a local Ray, run a few at a time (each cluster is a dozen mostly idle
actors; the machine has 2 cores). The same files as in the simulator, unchanged: conditions are
polled until they hold, never replaced by sleeps."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kraftlab.runner import run_scenario
from kraftlab.scenario.loading import load_scenario

pytestmark = pytest.mark.ray

# The scenarios of the CI tier: OS crashes with page-cache loss, faults in the send path (isolate,
# one-way links, partitions), a quorum under Pre-Vote, and expected violations found by the checks
# running on polled copies of the roles. (placement-and-controlled-shutdown is left out: its consume
# step read nothing once on a loaded machine; see the issue notes.)
CI_SCENARIOS = [
    "hwm-timeline",
    "last-replica-standing-elr",
    "raft-fsync-off",
    "maximal-isr-off",
    "page-cache-recovery",
    "prevote",
]
PARALLEL = 3


@pytest.fixture(scope="module")
def runs(local_ray, tmp_path_factory):
    root = tmp_path_factory.mktemp("ray-library")

    def one(name):
        sc, _ = load_scenario(name, runtime="ray")
        return run_scenario(sc, source=name, out_dir=Path(root) / name)

    pool = ThreadPoolExecutor(PARALLEL)
    futures = {name: pool.submit(one, name) for name in CI_SCENARIOS}
    yield futures
    pool.shutdown(wait=True)


@pytest.mark.parametrize("name", CI_SCENARIOS)
def test_library_scenario_passes_on_ray(runs, name):
    result = runs[name].result()
    s = result.summary
    assert s["runtime"] == "ray"
    assert s["ok"], f"{name} on Ray: failures {s['failures']}, violations {[v['invariant'] for v in s['violations']]}, expected {s['expect_violations']}"
    assert set(s["stats"]["placement"]) >= {"b1", "c1", "producer"}
    assert s["stats"]["trace_hash"] is None  # real time: no replay hash is claimed
