"""The multi-node tier: a `ray.cluster_utils.Cluster` of 3 Ray nodes on this machine.

Hosts are failure domains placed on distinct Ray nodes; removing a Ray node is an OS crash of every
host on it (its processes and page cache are gone), and the cluster recovers as the protocol says:
the quorum keeps a leader, the lost broker leaves the ISR, acks=all writes go on with the rest, and
the restarted host (moved to a surviving node, its directory cut to what was flushed) catches up.
"""

import pytest
import ray
from ray.cluster_utils import Cluster

from actors.runtime.ray import adapter
from workloads.drivers import ray_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import ProduceArgs
from workloads.steps import protocol_command

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def three_nodes():
    adapter.shutdown()
    adapter.enter_single_machine_mode()  # every node on loopback, as an embedded Ray's
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    adapter.connect(cluster.address)
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield cluster, workers
    adapter.shutdown()  # and leaves the single-machine mode
    cluster.shutdown()


def scenario():
    return validate(
        {
            "name": "multi-node",
            "runtime": "ray",
            "cluster": {"brokers": 3, "controllers": 3, "storage": "page_cache",
                        "config": {"min.insync.replicas": 2, "replica.lag.time.max.ms": 5000}},
            "topics": [{"name": "t", "replication_factor": 3, "assignment": {0: [1, 2, 3]}}],
        },
        "test_multinode.py",
    )


def test_hosts_on_distinct_nodes_and_node_loss_is_an_os_crash(three_nodes, tmp_path):
    ray_nodes, workers = three_nodes
    cluster = ray_cluster(scenario(), data_root=tmp_path)
    try:
        where = cluster.placement_report()
        assert len({where["b1"], where["b2"], where["b3"]}) == 3  # one broker per Ray node
        cluster.protocol_step("produce", protocol_command("produce", ProduceArgs(topic="t", count=10, acks="all", expect="acked")))

        lost_node = where["b2"]
        worker = next(w for w in workers if w.node_id == lost_node)
        ray_nodes.remove_node(worker)  # b2 and c2 live there

        view = cluster.view()
        assert cluster.run_until(lambda: not cluster.sim.is_running("b2") and not cluster.sim.is_running("c2"), 30_000)
        assert cluster.run_until(lambda: view.partitions()["t-0"].isr == [1, 3] and view.quorum().leader not in (None, 2), 30_000)
        cluster.protocol_step("produce", protocol_command("produce", ProduceArgs(topic="t", count=10, acks="all", expect="acked")))

        cluster.restart("b2")  # comes back on a surviving node, from its OS-crashed directory
        assert cluster.placement_report()["b2"] != lost_node
        assert cluster.run_until(lambda: view.partitions()["t-0"].isr == [1, 2, 3], 60_000)
        assert view.acked_lost() == 0
        assert view.acked() == 20
        assert cluster.violations() == []
    finally:
        cluster.close()
