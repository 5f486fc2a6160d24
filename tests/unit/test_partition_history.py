"""A `wait_for` on a partition also holds once a committed state reported since it began matched
(workloads/partition_history.py): on Ray a state that lasts less than a poll is otherwise missed."""

from kraftlab.scenario.schema import Condition
from workloads.partition_history import PartitionHistory


def reported(history: PartitionHistory, partition: str, leader, isr, elr=(), epoch=0, at_ms=0.0):
    fields = {
        "partition": partition, "partition_epoch": epoch, "leader": leader, "leader_epoch": epoch,
        "replicas": [1, 2, 3], "isr": list(isr), "elr": list(elr), "last_known_elr": [], "under_min_isr": len(isr) < 2,
    }
    history((at_ms, "c1", "partition_state", fields))


def cond(**keys) -> Condition:
    return Condition.model_validate({"partition": "t-0", **keys})


def test_a_state_that_came_and_went_after_the_wait_began_satisfies_it():
    history = PartitionHistory()
    check = history.reported_from_now(cond(leader=2, isr=[2], elr=[]))
    assert not check()
    reported(history, "t-0", leader=2, isr=[2], epoch=7)  # KIP-966 step 7: elected from the ELR,
    reported(history, "t-0", leader=2, isr=[1, 2], epoch=8)  # then broker 1 caught up at once
    assert check()
    reported(history, "t-0", leader=2, isr=[1, 2, 3], epoch=9)
    assert check()  # once seen, it stays seen


def test_states_reported_before_the_wait_other_partitions_and_partial_matches_do_not_count():
    history = PartitionHistory()
    reported(history, "t-0", leader=2, isr=[2], epoch=1)
    check = history.reported_from_now(cond(leader=2, isr=[2]))
    reported(history, "t-0", leader=2, isr=[2], epoch=1)  # another voter's report of the same state
    reported(history, "t-1", leader=2, isr=[2], epoch=1)
    reported(history, "t-0", leader=2, isr=[2, 3], epoch=2)
    reported(history, "t-0", leader=None, isr=[2], epoch=3)
    assert not check()
    assert history.reported_from_now(cond(leader=None, offline=True, under_min_isr=True))() is False
    offline = history.reported_from_now(cond(leader=None, offline=True, under_min_isr=True))
    reported(history, "t-0", leader=None, isr=[], epoch=4)
    assert offline()
    assert len(history.states) == 5  # each committed state once, whichever voters reported it


def test_keys_the_controller_does_not_know_are_never_judged_from_the_history():
    history = PartitionHistory()
    check = history.reported_from_now(cond(leader=2, hwm=5))
    reported(history, "t-0", leader=2, isr=[2])
    assert not check()  # the HWM is the leader's: read from the cluster as it is
