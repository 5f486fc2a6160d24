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


def test_a_lossy_crash_of_a_last_known_elr_member_counts_toward_the_tolerance():
    """KIP-966's unclean recovery elects from the LastKnownELR when the ISR and the ELR are empty,
    so a member of it is a leader candidate: its lossy crash counts. Found by `hunt` (seed 300616):
    an ELR member back from a process crash went to the LastKnownELR, the sole ISR member and then
    it lost what their page caches held, and the recovery elected one of them; the checks had
    counted one lossy candidate only and reported the loss as a violation. (Disk losses here: the
    records were written back long ago, so an OS crash would lose nothing.)"""
    c = cluster()
    c.crash("b2", "process")  # out of the ISR once fenced: ISR [1, 3]
    assert c.run_until(lambda: c.view().partition("t-0").isr == [1, 3], 30_000)
    c.link("b3", "b1", drop=1.0, delay_ms=0.0)  # b3 cannot fetch from the leader
    c.crash("b3", "process")  # fenced: below MinISR, it goes to the ELR
    assert c.run_until(lambda: c.view().partition("t-0").elr == [3], 30_000)
    c.restart("b3")  # back from an unclean shutdown: out of the ELR, into the LastKnownELR
    assert c.run_until(lambda: c.view().partition("t-0").last_known_elr == [3], 30_000)
    assert c.view().partition("t-0").isr == [1]
    c.crash("b1", "disk")  # the sole ISR member loses its log: one lossy candidate
    c.run_for(1_000)
    assert c.checks.partitions.beyond_tolerance == set()
    c.crash("b3", "disk")  # a LastKnownELR member loses its log: two = MinISR
    c.run_for(1_000)  # the checks run at the next event
    assert c.checks.partitions.beyond_tolerance == {("t", 0)}
