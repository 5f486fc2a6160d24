"""The library scenarios on a local Ray, a few at a time (each cluster is a dozen mostly idle
actors; the machine has 2 cores). The same files as in the simulator, unchanged: conditions are
polled until they hold, never replaced by sleeps. The two demo scenarios run in test_demo_on_ray.py
(through `kraftlab demo` itself).

A Ray run costs real time and CPU (about 15 s to start a cluster's processes here, then the
scenario's own timeouts at wall-clock speed): the whole library is about 20 minutes on this 2-core
machine. So `make test` runs one scenario of each family on Ray, and `KRAFTLAB_LIBRARY_RAY=all`
(`make test-ray-all`) runs every one. The simulator runs every scenario in every tier
(tests/scenario/test_library.py); what Ray adds (real processes, files, clocks and crashes) is the
same within a family, whose members differ by one setting (FULL_TIER_ONLY says which)."""

from concurrent.futures import ThreadPoolExecutor
import os
from pathlib import Path

import pyarrow.compute as pc
import pytest

from kraftlab import conformance
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
    "unclean-leader-election-disabled",
    "kip-966-eight-steps",
    "config-rf4-minisr2-acks-all",
]
# Run on Ray only with KRAFTLAB_LIBRARY_RAY=all: each has a twin that runs on Ray in every tier,
# the same cluster and steps with one setting changed, or is run on Ray by another test.
FULL_TIER_ONLY = {
    # A protocol switch turned off (their twins run with it on).
    "stale-broker-epoch-off", "maximal-isr-off", "prevote-off", "raft-fsync-off",
    "last-replica-standing-no-elr", "unclean-leader-election-disabled",
    # Other sizes of the same cluster (tolerance-rf3-minisr2 runs; the config-rf4-* family is the
    # same cluster of four brokers at other MinISR and acks settings).
    "config-rf4-minisr1-acks-all", "config-rf4-minisr2-acks-1", "config-rf4-minisr3-acks-all",
    "config-rf4-minisr2-acks-all", "tolerance-rf5-minisr3", "tolerance-rf6-minisr4",
    # Other recovery strategies (unclean-recovery-aggressive runs).
    "unclean-recovery-balanced", "unclean-recovery-manual",
    # Run on Ray by other tests of this tier: the demo runs the Last Replica Standing with ELR
    # under load, kip-966-eight-steps the ELR's controller rules, random-faults the fault schedules,
    # and the conformance sample (conformance.RAY_SAMPLE) a log directory's failure, Pre-Vote and
    # a topic's deletion.
    "last-replica-standing-elr", "elr-controller-steps", "sim-faults-smoke",
    "log-dir-failure", "prevote", "delete-topic",
}
ALL = os.environ.get("KRAFTLAB_LIBRARY_RAY") == "all"
CHOSEN = set(library_scenarios()) - DEMO_SCENARIOS - (set() if ALL else FULL_TIER_ONLY)
SCENARIOS = [n for n in LONGEST if n in CHOSEN] + sorted(CHOSEN - set(LONGEST))
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


def test_every_library_scenario_is_run_or_has_its_family_run():
    assert FULL_TIER_ONLY <= set(library_scenarios())  # no stale name hides a scenario from the tier
    assert set(SCENARIOS) | DEMO_SCENARIOS | (set() if ALL else FULL_TIER_ONLY) == set(library_scenarios())
    assert ALL or {"stale-broker-epoch", "maximal-isr", "raft-fsync", "kip-966-eight-steps", "random-faults",
                   "unclean-leader-election-enabled", "tolerance-rf3-minisr2", "unclean-recovery-aggressive"} <= set(SCENARIOS)
    # What the conformance sample runs on Ray in place of log-dir-failure, prevote and delete-topic.
    assert {"ldf-io-exception-during-checkpoint", "prevote-handle-pre-vote-request-as-follower",
            "rcm-delete-topics"} <= set(conformance.RAY_SAMPLE)


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
