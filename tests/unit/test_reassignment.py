"""Partition reassignment (the protocol description §6.7) in the form of Kafka's controller: a
reassignment starts, merges, completes and reverts through the same partition change
(PartitionChangeBuilder), one record each. The reassignment never adds a replica to the ISR, and
completes only with its whole target in the ISR (so never below MinISR)."""

import pytest

from controller_quorum.metadata import BrokerRegistration, PartitionRecord
from controller_quorum.partition_change import ChangePolicy, change_partition
from controller_quorum.reassignment import Assignment, ReassignmentError, complete_if_ready, reassignment_to, revert

BROKERS = {b: BrokerRegistration(b, 10 + b, None, False) for b in (0, 1, 2, 3, 4, 5)}
POLICY = ChangePolicy(min_isr=2, elr_enabled=True, unclean_leader_election=False)


def part(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, adding=(), removing=()):
    return PartitionRecord("t", 0, replicas, isr, (), (), leader, 5, 7, adding_replicas=adding, removing_replicas=removing)


def reassign(p, target):
    return change_partition(p, BROKERS, POLICY, reason="reassignment", assignment=reassignment_to(p, tuple(target), BROKERS))


def expand(p, isr):
    return change_partition(p, BROKERS, POLICY, reason="alter_partition", target_isr=tuple(isr))


def test_grow_adds_the_new_replicas_but_not_to_the_isr():
    grown = reassign(part(), (4, 2, 3))
    assert grown.replicas == (4, 2, 3, 1)
    assert grown.isr == (1, 2, 3)  # rule 2
    assert (grown.adding_replicas, grown.removing_replicas) == ((4,), (1,))
    assert (grown.leader, grown.leader_epoch, grown.partition_epoch) == (1, 5, 8)


def test_the_isr_expansion_that_covers_the_target_completes_it_in_the_same_record():
    # PartitionChangeBuilderTest.testIsrEnlargementCompletesReassignment: one record, no state
    # with the ISR [1, 2, 3, 4] under leader 1 is ever committed.
    grown = reassign(part(), (4, 2, 3))
    done = expand(grown, (1, 2, 3, 4))
    assert done.replicas == (4, 2, 3) and set(done.isr) == {2, 3, 4}
    assert done.leader == 4 and done.leader_epoch == grown.leader_epoch + 1  # the first of the target in the ISR
    assert done.partition_epoch == grown.partition_epoch + 1
    assert (done.adding_replicas, done.removing_replicas) == ((), ())


def test_a_reassignment_that_only_removes_replicas_is_one_record():
    # PartitionChangeBuilderTest.testRemovingReplicaReassignment
    done = reassign(part(), (1, 2))
    assert done.replicas == (1, 2) and done.isr == (1, 2)
    assert (done.leader, done.leader_epoch, done.partition_epoch) == (1, 6, 8)
    assert (done.adding_replicas, done.removing_replicas) == ((), ())


def test_removing_a_follower_starts_a_new_leader_epoch_under_the_same_leader():
    # Kafka's PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: the
    # removed replica, still fetching, is fenced by the new epoch.
    grown = reassign(part(), (1, 2, 4))
    done = expand(grown, (1, 2, 3, 4))
    assert done.replicas == (1, 2, 4) and done.leader == 1
    assert done.leader_epoch == grown.leader_epoch + 1 and done.election is None


def test_adding_a_replica_only_keeps_the_leader_epoch():
    grown = reassign(part(), (1, 2, 3, 4))
    done = expand(grown, (1, 2, 3, 4))
    assert done.replicas == (1, 2, 3, 4) and (done.leader, done.leader_epoch) == (1, grown.leader_epoch)


def test_completion_waits_until_every_target_replica_is_in_the_isr():
    # Moving to [4, 5, 3]: the added replicas and the kept one (3) alike (rule 1; Kafka before
    # KAFKA-19975).
    grown = Assignment((4, 5, 3, 1, 2), adding=(4, 5), removing=(1, 2))
    assert complete_if_ready(grown, (1, 2, 3, 4)) is None  # 5 not in the ISR yet
    assert complete_if_ready(grown, (1, 2, 4, 5)) is None  # 3, kept, fell out of the ISR
    assert complete_if_ready(grown, (1, 2, 3, 4, 5)) == (Assignment((4, 5, 3)), (3, 4, 5))


def test_a_new_reassignment_merges_with_the_one_in_progress():
    # ReplicationControlManagerTest.testReassignPartitionsHandlesNewReassignmentThatRemovesPreviouslyAddingReplicas
    first = reassign(part(replicas=(0, 1), isr=(0, 1), leader=0), (2, 3))
    assert (first.replicas, first.removing_replicas, first.adding_replicas) == ((2, 3, 0, 1), (0, 1), (2, 3))
    with_2 = expand(first, (0, 1, 2))
    led_by_2 = change_partition(with_2, BROKERS, POLICY, reason="elect_preferred", election="preferred")
    assert led_by_2.leader == 2
    second = reassign(led_by_2, (4, 5))
    assert (second.replicas, second.removing_replicas, second.adding_replicas) == ((4, 5, 0, 1, 2, 3), (0, 1, 2, 3), (4, 5))
    assert second.leader == 2
    done = expand(second, (0, 1, 2, 3, 4, 5))
    assert (done.replicas, done.leader, done.adding_replicas, done.removing_replicas) == ((4, 5), 4, (), ())


def test_cancelling_goes_back_to_the_original_replicas():
    grown = reassign(part(), (4, 2, 3))
    back = revert(grown)
    assert back.assignment == Assignment((2, 3, 1)) and back.isr == (1, 2, 3) and not back.unclean
    with_4 = part(replicas=(4, 2, 3, 1), isr=(4,), leader=4, adding=(4,), removing=(1,))
    assert revert(with_4).isr == (2,) and revert(with_4).unclean  # only added replicas in the ISR
    with pytest.raises(ReassignmentError) as refused:
        revert(part())
    assert refused.value.error == "NO_REASSIGNMENT_IN_PROGRESS"


def test_a_reassignment_to_the_same_replicas_does_nothing_and_bad_targets_are_refused():
    assert reassign(part(), (1, 2, 3)) is None
    for target, words in (((4, 4, 3), "twice"), ((9, 2, 3), "not registered"), ((), "empty")):
        with pytest.raises(ReassignmentError, match=words) as refused:
            reassignment_to(part(), target, BROKERS)
        assert refused.value.error == "INVALID_REPLICA_ASSIGNMENT"
