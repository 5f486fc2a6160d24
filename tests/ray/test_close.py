"""The end of a Ray run: `RayCluster.close()` stops every process of the run before it removes
the data, and each host's folder is removed by its own host agent (on a multi-node cluster the
folder lives on that agent's machine, out of the driver's reach)."""

import os
import shutil
import time

import pytest

from actors.runtime.ray import adapter
from workloads.drivers import ray_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import ProduceArgs
from workloads.steps import protocol_command

from tests.ray.on_hosts import on_every_ray_node, on_ray_node

pytestmark = pytest.mark.ray


def scenario():
    return validate(
        {
            "name": "close",
            "runtime": "ray",
            "cluster": {"brokers": 1, "controllers": 1, "storage": "page_cache"},
            "topics": [{"name": "t", "replication_factor": 1}],
        },
        "test_close.py",
    )


def test_close_stops_every_process_before_the_agents_remove_their_folders(local_ray, monkeypatch):
    pids = {}  # node -> its process
    cluster = ray_cluster(scenario(), event_sinks=[lambda record: pids.update({record.node: record.event.pid}) if record.kind == "process_start" else None])
    data_root = cluster.data_root
    left_for_the_driver = []
    real_rmtree = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        if path == data_root:
            left_for_the_driver.extend(sorted(p.name for p in data_root.iterdir()))
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    try:
        cluster.protocol_step("produce", protocol_command("produce", ProduceArgs(topic="t", count=10, acks="all", expect="acked")))
    finally:
        cluster.close()
    assert {"b1", "c1"} < set(pids)  # and the clients
    # Each process looked for on its own host (clients run on the head's).
    where = {node: cluster.placement.get(node, cluster.head_node) for node in pids}
    assert [node for node, pid in pids.items() if on_ray_node(where[node], adapter.process_is_running, pid)] == []
    assert left_for_the_driver == ["clients"]  # b1's and c1's folders: removed by their agents
    assert not data_root.exists()
    time.sleep(1.0)
    # No writer left to bring a folder back, here or on any host.
    assert not data_root.exists() and not any(on_every_ray_node(os.path.exists, str(data_root)))
