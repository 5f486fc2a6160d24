"""Partition reassignment rules of replication-correctness.md §6.7: grow, catch up, shrink; the
reassignment never adds a replica to the ISR, and completes only with its whole target in the ISR
(so never below MinISR)."""

from dataclasses import replace

import pytest

from controller_quorum.metadata import BrokerRegistration, PartitionRecord
from controller_quorum.reassignment import ReassignmentError, maybe_complete_reassignment, start_reassignment

BROKERS = {b: BrokerRegistration(b, 10 + b, None, False) for b in (1, 2, 3, 4, 5)}


def part(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1):
    return PartitionRecord("t", 0, replicas, isr, (), (), leader, 5, 7)


def test_grow_adds_the_new_replicas_but_not_to_the_isr():
    grown = start_reassignment(part(), (4, 2, 3), BROKERS)
    assert grown.replicas == (4, 2, 3, 1)
    assert grown.isr == (1, 2, 3)  # rule 2
    assert (grown.adding_replicas, grown.removing_replicas) == ((4,), (1,))
    assert (grown.leader, grown.leader_epoch, grown.partition_epoch) == (1, 5, 8)


def test_no_shrink_before_every_new_replica_caught_up_and_joined_the_isr():
    grown = start_reassignment(part(), (4, 2, 3), BROKERS)
    assert maybe_complete_reassignment(grown, BROKERS) is None


def test_shrink_after_the_leader_added_the_new_replica_moves_leadership_off_the_removed_one():
    grown = start_reassignment(part(), (4, 2, 3), BROKERS)
    caught_up = replace(grown, isr=(1, 2, 3, 4), partition_epoch=grown.partition_epoch + 1)
    done = maybe_complete_reassignment(caught_up, BROKERS)
    assert done.replicas == (4, 2, 3) and set(done.isr) == {2, 3, 4}
    assert done.leader == 4 and done.leader_epoch == caught_up.leader_epoch + 1
    assert (done.adding_replicas, done.removing_replicas) == ((), ())


def test_removing_a_follower_starts_a_new_leader_epoch_under_the_same_leader():
    # Kafka's PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: the
    # removed replica, still fetching, is fenced by the new epoch.
    grown = start_reassignment(part(), (1, 2, 4), BROKERS)
    caught_up = replace(grown, isr=(1, 2, 3, 4), partition_epoch=grown.partition_epoch + 1)
    done = maybe_complete_reassignment(caught_up, BROKERS)
    assert done.replicas == (1, 2, 4) and done.leader == 1
    assert done.leader_epoch == caught_up.leader_epoch + 1 and done.election is None


def test_adding_a_replica_only_keeps_the_leader_epoch():
    grown = start_reassignment(part(), (1, 2, 3, 4), BROKERS)
    caught_up = replace(grown, isr=(1, 2, 3, 4), partition_epoch=grown.partition_epoch + 1)
    done = maybe_complete_reassignment(caught_up, BROKERS)
    assert done.replicas == (1, 2, 3, 4) and (done.leader, done.leader_epoch) == (1, caught_up.leader_epoch)


def test_shrink_waits_until_every_target_replica_is_in_the_isr():
    # Moving to [4, 5, 3]. Kafka's PartitionReassignmentReplicas.maybeCompleteReassignment waits
    # for the whole target in the ISR: the added replicas and the kept one (3) alike.
    grown = start_reassignment(part(), (4, 5, 3), BROKERS)
    lagging = replace(grown, isr=(1, 2, 3, 4))
    assert maybe_complete_reassignment(lagging, BROKERS) is None  # 5 not in the ISR yet
    kept_one_out = replace(grown, isr=(1, 2, 4, 5))
    assert maybe_complete_reassignment(kept_one_out, BROKERS) is None  # 3, kept, fell out of the ISR
    joined = replace(grown, isr=(1, 2, 3, 4, 5))
    done = maybe_complete_reassignment(joined, BROKERS)
    assert done.replicas == (4, 5, 3) and set(done.isr) == {3, 4, 5}


def test_a_reassignment_to_the_same_replicas_does_nothing_and_bad_targets_are_refused():
    assert start_reassignment(part(), (1, 2, 3), BROKERS) is None
    with pytest.raises(ReassignmentError, match="twice"):
        start_reassignment(part(), (4, 4, 3), BROKERS)
    with pytest.raises(ReassignmentError, match="not registered"):
        start_reassignment(part(), (9, 2, 3), BROKERS)
