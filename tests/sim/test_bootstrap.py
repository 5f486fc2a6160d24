"""Bringing a cluster up: a topic whose records did not commit (the controller that proposed them
lost the quorum's leadership first, as on a slow machine) is asked for again."""

from actors.runtime.sim.cluster import SimCluster
from workloads.drivers import run_settings
from workloads.scenario.loading import validate


class FirstCreateLost(SimCluster):
    """The first CreateTopics goes nowhere, as if its records died with a controller's leadership."""

    creates = 0

    def create_topic(self, topic, exists_ok=False):
        self.creates += 1
        if self.creates > 1:
            super().create_topic(topic, exists_ok)


def test_a_topic_that_did_not_commit_is_created_again():
    scenario = validate({"name": "boot", "topics": [{"name": "t", "partitions": 2, "replication_factor": 3}]}, "test_bootstrap.py")
    cluster = FirstCreateLost(run_settings(scenario))
    assert cluster.creates == 2
    assert all(cluster.view().partition(f"t-{p}").leader is not None for p in range(2))
