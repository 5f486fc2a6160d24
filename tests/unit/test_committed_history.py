"""A `wait_for` on a partition or a broker also holds once a committed state reported since it
began matched (observability/committed_history.py, judged by workloads/conditions.py): on Ray a
state that lasts less than a poll is otherwise missed."""

from observability.committed_history import CommittedHistory
from observability.events import BrokerChange, EventRecord, PartitionChange
from workloads.conditions import reported_from_now
from workloads.scenario.condition_spec import Condition


def reported(history: CommittedHistory, partition: str, leader, isr, elr=(), epoch=0, at_ms=0.0):
    topic, p = partition.rsplit("-", 1)
    change = PartitionChange(
        topic, int(p), leader, epoch, epoch, (1, 2, 3), tuple(isr), tuple(elr), (), 100 + epoch, len(isr) < 2, 2, "RECOVERED", "test"
    )
    history(EventRecord(at_ms, "c1", 0, 0, change))


def broker_reported(history: CommittedHistory, broker: int, epoch: int, fenced: bool, offset: int, voter="c1"):
    history(EventRecord(0.0, voter, 0, 0, BrokerChange(broker, epoch, fenced, offset)))


def cond(**keys) -> Condition:
    return Condition.model_validate({"partition": "t-0", **keys})


def broker_cond(**keys) -> Condition:
    return Condition.model_validate({"broker": 2, **keys})


def test_a_state_that_came_and_went_after_the_wait_began_satisfies_it():
    history = CommittedHistory()
    check = reported_from_now(history, cond(leader=2, isr=[2], elr=[]))
    assert not check()
    reported(history, "t-0", leader=2, isr=[2], epoch=7)  # KIP-966 step 7: elected from the ELR,
    reported(history, "t-0", leader=2, isr=[1, 2], epoch=8)  # then broker 1 caught up at once
    assert check()
    reported(history, "t-0", leader=2, isr=[1, 2, 3], epoch=9)
    assert check()  # once seen, it stays seen


def test_states_reported_before_the_wait_other_partitions_and_partial_matches_do_not_count():
    history = CommittedHistory()
    reported(history, "t-0", leader=2, isr=[2], epoch=1)
    check = reported_from_now(history, cond(leader=2, isr=[2]))
    reported(history, "t-0", leader=2, isr=[2], epoch=1)  # another voter's report of the same state
    reported(history, "t-1", leader=2, isr=[2], epoch=1)
    reported(history, "t-0", leader=2, isr=[2, 3], epoch=2)
    reported(history, "t-0", leader=None, isr=[2], epoch=3)
    assert not check()
    assert reported_from_now(history, cond(leader=None, offline=True, under_min_isr=True))() is False
    offline = reported_from_now(history, cond(leader=None, offline=True, under_min_isr=True))
    reported(history, "t-0", leader=None, isr=[], epoch=4)
    assert offline()
    assert len(history.states) == 5  # each committed state once, whichever voters reported it


def test_keys_the_controller_does_not_know_are_never_judged_from_the_history():
    history = CommittedHistory()
    check = reported_from_now(history, cond(leader=2, hwm=5))
    reported(history, "t-0", leader=2, isr=[2])
    assert not check()  # the HWM is the leader's: read from the cluster as it is


def test_a_fence_shorter_than_a_poll_satisfies_a_broker_wait():
    # §6.5.1: broker 2 came back with an empty disk; its old session expires (fenced at offset 40),
    # its registration is retried at once (epoch 15, fenced) and it is unfenced as soon as it has
    # caught up: the fenced state lasts a few tens of milliseconds.
    history = CommittedHistory()
    broker_reported(history, 2, epoch=2, fenced=False, offset=10)
    fenced = reported_from_now(history, broker_cond(fenced=True))
    unfenced = reported_from_now(history, broker_cond(fenced=False, epoch=">= 15"))
    assert not fenced() and not unfenced()
    broker_reported(history, 3, epoch=9, fenced=True, offset=30)  # another broker: does not count
    assert not fenced()
    for voter in ("c1", "c2", "c3"):
        broker_reported(history, 2, epoch=2, fenced=True, offset=40, voter=voter)
        broker_reported(history, 2, epoch=15, fenced=True, offset=41, voter=voter)
        broker_reported(history, 2, epoch=15, fenced=False, offset=43, voter=voter)
    assert fenced() and unfenced()
    assert len(history.states) == 5  # each broker record once, whichever voters reported it


def test_broker_keys_the_controller_does_not_know_are_never_judged_from_the_history():
    history = CommittedHistory()
    check = reported_from_now(history, broker_cond(fenced=False, alive=True))
    broker_reported(history, 2, epoch=15, fenced=False, offset=43)
    assert not check()  # `alive` is the process's: read from the cluster as it is
