"""Randomized sweeps of whole clusters (3 voters, 3 brokers, one RF 3 topic): random process and OS
crashes, isolations and partitions on every node, then heal. The KRaft invariants and the
controller's partition invariants hold, and after healing the quorum has a leader and every broker
is registered and unfenced within a bound."""

import pytest
import yaml

from actors.runtime.sim.faults import heal_everything, schedule_faults
from workloads.drivers import sim_cluster
from workloads.faults import FaultProfile, FaultSchedule
from workloads.scenario.loading import validate

from .seed_pool import in_seed_order

SAFETY_MS = 60_000
BOUND_MS = 30_000
PROFILE = FaultProfile(kinds=("crash_os", "crash_process", "isolate", "partition"), mean_interval_ms=4_000, duration_ms=SAFETY_MS)
SCENARIO = """
name: sweep
cluster: {brokers: 3, controllers: 3, config: {min.insync.replicas: 2}}
topics: [{name: t, partitions: 3, replication_factor: 3}]
"""


def run_seed(seed: int, **protocol):
    raw = yaml.safe_load(SCENARIO)
    raw["seed"] = seed
    raw["cluster"]["protocol"] = protocol
    cluster = sim_cluster(validate(raw, "sweep.yaml"))
    sim = cluster.sim
    nodes = tuple(n for n in sim.nodes if n[0] in "bc" and n[1:].isdigit())
    start = sim.now_ms
    schedule_faults(sim, FaultSchedule.draw(seed, nodes, PROFILE).actions, start_ms=start)
    sim.run_until(start + SAFETY_MS)
    heal_everything(sim, nodes)
    healed = sim.now_ms

    def recovered() -> bool:
        view = cluster.view()
        return view.quorum().leader is not None and all(b.fenced is False for b in view.brokers().values())

    ok = sim.run_until(healed + BOUND_MS, stop=recovered)
    return cluster, ok, sim.now_ms - healed


def seed_outcome(seed: int) -> tuple[int, dict[str, str], bool, float]:
    cluster, ok, took = run_seed(seed)
    return seed, {name: v.detail for name, v in cluster.sim.violations.items()}, ok, took


@pytest.mark.slow
def test_200_cluster_seeds_keep_every_invariant_and_recover():
    worst = 0.0
    for seed, violations, ok, took in in_seed_order(seed_outcome, range(200)):
        assert violations == {}, f"seed {seed}: {violations}"
        assert ok, f"seed {seed}: not recovered {BOUND_MS} ms after healing"
        worst = max(worst, took)
    print(f"\ncluster recovered (quorum leader, every broker unfenced) at most {worst:.0f} ms after healing")
