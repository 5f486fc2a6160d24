"""A disk loss is a lossy unclean shutdown of every replica the broker held (it keeps nothing), so
it counts toward the protocol's tolerance as an OS crash that took data does (f = MinISR - 1
lossy unclean shutdowns of leader candidates, the protocol description §6.2). No directory
survives a disk loss, so no `replica_survived` row follows it: the checks count it from the
crash itself.

Found by a campaign with every switch on and every fault kind: two disk losses of ISR members
lost acknowledged records (the protocol's limit), and the checks reported them as violations,
not as beyond tolerance."""

from workloads.drivers import sim_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import ProduceArgs
from workloads.steps import protocol_command


def cluster():
    scenario = validate({
        "name": "disk-loss-tolerance",
        "cluster": {"brokers": 3, "controllers": 1, "storage": "page_cache", "config": {"min.insync.replicas": 2}},
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 3, "assignment": {0: [1, 2, 3]}}],
    }, "test_disk_loss_tolerance.py")
    c = sim_cluster(scenario)
    c.protocol_step("produce", protocol_command("produce", ProduceArgs(topic="t", count=5, acks="all", expect="acked")))
    assert c.view().partition("t-0").isr == [1, 2, 3]
    return c


def test_disk_losses_of_min_isr_candidates_are_beyond_tolerance():
    c = cluster()
    c.crash("b3", "disk")
    assert c.checks.partitions.beyond_tolerance == set()  # one lossy candidate: within f = 1
    c.crash("b2", "disk")  # both still in the ISR: 2 = MinISR lossy candidates
    c.run_for(1_000)  # the checks run at the next event
    assert c.checks.partitions.beyond_tolerance == {("t", 0)}


def test_a_process_crash_loses_nothing_and_counts_nothing():
    c = cluster()
    c.crash("b3", "process")
    c.crash("b2", "process")
    c.run_for(1_000)  # the checks run at the next event
    assert c.checks.partitions.beyond_tolerance == set()
