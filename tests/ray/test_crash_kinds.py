"""What each crash kind does on Ray, on real files (the storage table of docs/explanation/architecture.md, storage/modes.py):

| crash   | what happens here                                   | page_cache log after restart |
|---------|-----------------------------------------------------|------------------------------|
| process | the actor is killed; the files stay as written      | every record kept            |
| os      | every actor of the host killed; unflushed bytes cut | only what was flushed        |
| disk    | every actor killed; the host's directory wiped      | empty                        |
"""

from pathlib import Path

import pytest

from actors.runtime.ray.cluster import RayCluster
from workloads.drivers import ray_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import ProduceArgs
from workloads.steps import protocol_command

from tests.ray.on_hosts import on_ray_node

pytestmark = pytest.mark.ray


def one_broker_scenario(storage: str):
    return validate(
        {
            "name": f"crash-kinds-{storage}",
            "runtime": "ray",
            "cluster": {"brokers": 1, "controllers": 1, "storage": storage},
            "topics": [{"name": "t", "replication_factor": 1}],
        },
        "test_crash_kinds.py",
    )


def leo(cluster: RayCluster) -> int | None:
    replica = cluster.view().replica("t-0", 1)
    return None if replica is None else replica.leo


def has_log_files(folder: str) -> bool:
    return any(Path(folder).rglob("log"))


def restart_and_wait_for_log(cluster: RayCluster) -> int | None:
    cluster.restart("b1")
    assert cluster.run_until(lambda: cluster.view().replica("t-0", 1) is not None and cluster.view().brokers()[1].fenced is False, 30_000)
    return leo(cluster)


def test_process_os_and_disk_crashes_on_page_cache(local_ray, tmp_path):
    cluster = ray_cluster(one_broker_scenario("page_cache"), data_root=tmp_path)
    try:
        cluster.protocol_step("produce", protocol_command("produce", ProduceArgs(topic="t", count=10, acks="all", expect="acked")))
        assert leo(cluster) == 10

        cluster.crash("b1", "process")
        assert restart_and_wait_for_log(cluster) == 10  # the page cache outlived the process

        cluster.crash("b1", "os")
        assert restart_and_wait_for_log(cluster) == 0  # nothing was flushed: the OS crash lost it
    finally:
        cluster.close()


def test_fsync_survives_an_os_crash_but_not_a_disk_loss(local_ray, tmp_path):
    cluster = ray_cluster(one_broker_scenario("fsync"), data_root=tmp_path)
    try:
        cluster.protocol_step("produce", protocol_command("produce", ProduceArgs(topic="t", count=10, acks="all", expect="acked")))
        cluster.crash("b1", "os")
        assert restart_and_wait_for_log(cluster) == 10  # fsynced before each acknowledgement

        cluster.crash("b1", "disk")
        # The host's directory was wiped, on the host (b1's Ray node; on a cluster, not this one).
        assert not on_ray_node(cluster.placement["b1"], has_log_files, str(tmp_path / "b1"))
        assert restart_and_wait_for_log(cluster) == 0
    finally:
        cluster.close()
