"""A randomized whole-cluster run with the data plane under load, for sweeps (issue 4): 3 voters,
3 brokers, a topic of 2 partitions with RF 3 and MinISR 2 on page-cache storage; an acks=all
producer and a following consumer run throughout; random OS and process crashes, isolations,
partitions and slow or lossy links hit brokers and voters (or brokers only) for SAFETY_MS; then every fault heals.

After every event the simulator checks the partition and KRaft invariants of protocol-facts.md and
the quorum disruption checks; `run_seed` returns the cluster and whether it recovered (every
partition led, the producer acknowledged records again) within BOUND_MS of healing.
"""

from __future__ import annotations

from dataclasses import replace

import yaml

from actors.runtime.sim.cluster import SimCluster
from actors.runtime.sim.faults import heal_everything, schedule_faults
from observability.checks import QuorumDisruption
from workloads.drivers import run_settings
from workloads.faults import FaultProfile, FaultSchedule
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import LoadArgs
from workloads.steps import protocol_command

SAFETY_MS = 30_000
BOUND_MS = 30_000
# Links may also become slow (up to 15 s: longer than a broker session, so a message can outlive
# the sender's broker epoch, as in §6.5.1 case 3) or lossy.
PROFILE = FaultProfile(
    kinds=("crash_os", "crash_process", "isolate", "partition", "link"),
    mean_interval_ms=4_000,
    duration_ms=SAFETY_MS,
    link_drop=(0.0, 0.3),
    link_delay_ms=(0.0, 15_000.0),
)
SCENARIO = """
name: data-sweep
cluster:
  brokers: 3
  controllers: 3
  storage: page_cache
  config: {min.insync.replicas: 2, replica.lag.time.max.ms: 5000, broker.heartbeat.interval.ms: 1000, broker.session.timeout.ms: 3000}
  disk: {dirty_expire_ms: 10000}
topics: [{name: t, partitions: 2, replication_factor: 3}]
"""
SWITCHES = ("elr", "maximal_isr", "strict_min_isr", "broker_epoch_in_alter_partition", "leader_epoch_truncation", "prevote", "check_quorum", "raft_fsync")


# A profile that favours the §6.5.1 case 3 race: slow links (a fetch outliving its sender's broker
# epoch), lossy OS crashes, and a light load (so that the HWM does not move past the stale fetch).
SLOW_LINKS = replace(PROFILE, kinds=("crash_os", "link", "link", "isolate"), mean_interval_ms=2_000)


def run_seed(
    seed: int, *, safety_ms: float = SAFETY_MS, profile: FaultProfile = PROFILE, rate_per_s: float = 50, brokers_only: bool = False,
    cluster_class: type[SimCluster] = SimCluster, **protocol
):
    raw = yaml.safe_load(SCENARIO)
    raw["seed"] = seed
    raw["cluster"]["protocol"] = protocol
    cluster = cluster_class(run_settings(validate(raw, "data-sweep.yaml")))
    sim = cluster.sim
    sim.add_invariant_set(QuorumDisruption(cluster.checks.quorum, lambda: sim.now_ms).check)
    cluster.clients.load(protocol_command("load", LoadArgs(producers=1, consumers=1, rate_per_s=rate_per_s, acks="all")), {"t": 2})
    nodes = tuple(n for n in sim.nodes if n[0] in ("b" if brokers_only else "bc") and n[1:].isdigit())
    profile = replace(profile, duration_ms=safety_ms)
    start = sim.now_ms
    schedule_faults(sim, FaultSchedule.draw(seed, nodes, profile).actions, start_ms=start)
    sim.run_until(start + safety_ms)
    heal_everything(sim, tuple(n for n in sim.nodes if n[0] in "bc" and n[1:].isdigit()))
    healed = sim.now_ms
    acked_at_heal = cluster.view().acked()

    def recovered() -> bool:
        parts = cluster.view().partitions()
        return all(p.leader is not None for p in parts.values()) and cluster.view().acked() > acked_at_heal + rate_per_s

    ok = sim.run_until(healed + BOUND_MS, stop=recovered)
    return cluster, ok, sim.now_ms - healed
