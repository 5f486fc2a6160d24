"""One load producer against a small cluster in the simulator, for the tests of the load
producers' mechanics (rounds, batching, backpressure): 3 brokers, 1 voter, topic `t` of one
partition with RF 3 and MinISR 2; the load starts at once."""

from __future__ import annotations

from collections.abc import Callable

from workloads.drivers import sim_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import LoadArgs
from workloads.steps import protocol_command


def one_partition_load(name: str, load: LoadArgs, event_sink: Callable, *, settle_ms: float = 0):
    """The cluster with `load` started; `event_sink` sees every history row as it happens.
    `settle_ms`: run the ready cluster this long before the load starts (a follower that fetched
    the new partition before its leader knew it leads backs off replica.fetch.backoff.ms, 1 s,
    and the first acks=all answer waits for it)."""
    scenario = validate({
        "name": name,
        "cluster": {"brokers": 3, "controllers": 1, "config": {"min.insync.replicas": 2}},
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}],
    }, f"tests/sim ({name})")
    c = sim_cluster(scenario, event_sinks=[event_sink])
    if settle_ms:
        c.run_for(settle_ms)
    c.clients.load(protocol_command("load", load), {"t": 1})
    return c
