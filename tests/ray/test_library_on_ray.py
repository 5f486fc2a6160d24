"""Every library scenario on a local Ray, a few at a time (each cluster is a dozen mostly idle
actors; the machine has 2 cores). The same files as in the simulator, unchanged: conditions are
polled until they hold, never replaced by sleeps. The two demo scenarios run in test_demo_on_ray.py
(through `kraftlab demo` itself)."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.compute as pc
import pytest

from kraftlab.demo import VARIANTS
from kraftlab.runner import run_scenario
from observability.history import read_history
from workloads.scenario.loading import library_scenarios, load_scenario

pytestmark = pytest.mark.ray

DEMO_SCENARIOS = {name for _, name in VARIANTS}
# The longest first (70 s and more of wall time each here), so that the pool ends together.
LONGEST = [
    "stale-broker-epoch",
    "stale-broker-epoch-off",
    "config-rf4-minisr2-acks-1",
    "config-rf4-minisr1-acks-all",
    "tolerance-rf6-minisr4",
    "tolerance-rf5-minisr3",
]
SCENARIOS = [n for n in LONGEST if n in library_scenarios()] + sorted(set(library_scenarios()) - set(LONGEST) - DEMO_SCENARIOS)
PARALLEL = 3


@pytest.fixture(scope="module")
def runs(local_ray, tmp_path_factory):
    root = tmp_path_factory.mktemp("ray-library")

    def one(name):
        sc, _ = load_scenario(name, runtime="ray")
        return run_scenario(sc, source=name, out_dir=Path(root) / name)

    pool = ThreadPoolExecutor(PARALLEL)
    futures = {name: pool.submit(one, name) for name in SCENARIOS}
    yield futures
    pool.shutdown(wait=True)


def test_every_library_scenario_is_run():
    assert set(SCENARIOS) | DEMO_SCENARIOS == set(library_scenarios())


@pytest.mark.parametrize("name", SCENARIOS)
def test_library_scenario_passes_on_ray(runs, name):
    result = runs[name].result()
    s = result.summary
    assert s["runtime"] == "ray"
    # `ok` counts every violation, those first found after the last step included (docs/reference).
    late = [v["invariant"] for v in s["epilogue_violations"]]
    assert s["ok"], f"{name} on Ray: failures {s['failures']}, violations {[v['invariant'] for v in s['violations']]}, after the last step {late}, expected {s['expect_violations']}"
    assert set(late) <= set(s["expect_violations"])
    assert set(s["stats"]["placement"]) >= {"b1", "c1", "producer"}
    assert s["stats"]["trace_hash"] is None  # real time: no replay hash is claimed
    faults = read_history(result.run_dir / "events").filter(pc.equal(pc.field("kind"), "fault"))
    assert set(faults.column("backend").to_pylist()) <= {"emulated"}  # kraftlab's send path and process kills
