"""Building a driver (the simulator or Ray) from a scenario: the scenario model turned into the plain
values the drivers and the roles take (actors/runtime/api.py, actors/settings.py).

The drivers know nothing of the scenario model: what they take from a scenario arrives here as
settings, topics and timings (and the protocol steps as commands: workloads/steps.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from actors.runtime.api import RunSettings, TopicSettings
from actors.runtime.network import LatencyModel
from actors.runtime.sim.cluster import SimCluster
from actors.settings import ClusterSettings, KafkaSettings, ProtocolSettings
from storage.modes import StorageMode

from .scenario.cluster_spec import ClusterSpec, LatencySpec, TopicSpec
from .scenario.schema import Scenario

if TYPE_CHECKING:
    from actors.runtime.ray.cluster import RayCluster


def cluster_settings(spec: ClusterSpec) -> ClusterSettings:
    """The scenario's `cluster` as the roles take it (the config by field name, not Kafka's)."""
    return ClusterSettings(
        spec.brokers,
        spec.controllers,
        spec.racks,
        StorageMode(spec.storage),
        KafkaSettings(**spec.config.model_dump()),
        ProtocolSettings(**spec.protocol.model_dump()),
        spec.log_dirs,
    )


def topic_settings(topic: TopicSpec) -> TopicSettings:
    assignment = None if topic.assignment is None else {p: list(replicas) for p, replicas in topic.assignment.items()}
    config = topic.config.model_dump(by_alias=True, exclude_none=True)
    return TopicSettings(topic.name, topic.partitions, topic.replication_factor, assignment, config)


def latency_model(spec: LatencySpec) -> LatencyModel:
    return LatencyModel(spec.kind, spec.low_ms, spec.high_ms, spec.mean_ms)


def run_settings(scenario: Scenario) -> RunSettings:
    """Everything a driver takes from the scenario to build and bring up its cluster."""
    spec = scenario.cluster
    return RunSettings(
        cluster=cluster_settings(spec),
        topics=tuple(topic_settings(t) for t in scenario.topics),
        seed=scenario.seed,
        network_latency=latency_model(spec.network.latency),
        fsync_latency=latency_model(spec.disk.fsync_latency),
        background_flush_interval_ms=spec.disk.background_flush_interval_ms,
        dirty_expire_ms=spec.disk.dirty_expire_ms,
        disruption_checks=scenario.disruption_checks,
        kafka_listeners="kafka" in spec.listeners,
    )


def sim_cluster(scenario: Scenario, event_sinks: Sequence[Callable] = ()) -> SimCluster:
    return SimCluster(run_settings(scenario), event_sinks=event_sinks)


def ray_cluster(scenario: Scenario, event_sinks: Sequence[Callable] = (), **options: Any) -> RayCluster:
    """`options`: RayCluster's keywords (address, data_root, poll_interval_ms, check_invariants, fault_backend)."""
    from actors.runtime.ray.cluster import RayCluster  # Ray is only loaded when used

    return RayCluster(run_settings(scenario), event_sinks=event_sinks, **options)


def build_cluster(scenario: Scenario, event_sinks: Sequence[Callable] = (), address: str | None = None,
                  faults: str = "emulated") -> SimCluster | RayCluster:
    """The scenario's cluster on its runtime, brought up (`address`: the Ray cluster to join;
    `faults`: a Ray cluster's fault backend, emulated or kernel)."""
    if scenario.runtime == "ray":
        return ray_cluster(scenario, event_sinks, address=address, fault_backend=faults)
    return sim_cluster(scenario, event_sinks)
