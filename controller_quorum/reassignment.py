"""Partition reassignment as the protocol description §6.7 describes it (grow, catch up, shrink),
in the form of Kafka's controller: a reassignment is a target that every partition change works
towards, and the change that makes it possible also completes it, in the same record.

1. Grow (Kafka's ReplicationControlManager.changePartitionReassignment and
   PartitionReassignmentReplicas(current, target)): the replica set becomes the target followed
   by the replicas it drops (`removing`, in broker order); the new ones (`adding`) start as
   followers with empty logs. The ISR is untouched: a reassignment never adds a replica to the
   ISR (rule 2); only the leader does, through AlterPartition, once the replica has caught up.
   A new reassignment while one is in progress is computed the same way, from the replica set as
   it is (target and removing of the first): the new target replaces the old, and replicas the
   first was adding that the new one does not keep are removed in turn
   (ReplicationControlManagerTest.testReassignPartitionsHandlesNewReassignmentThatRemovesPreviouslyAddingReplicas).
2. Catch up: ordinary replication; the leader expands the ISR under §6.5.3-6.5.4.
3. Shrink (`complete_if_ready`, Kafka's PartitionChangeBuilder.completeReassignmentIfNeeded): the
   first change whose ISR holds every replica of the target (added and kept alike) drops the
   removed replicas from the replica set and the ISR, in the same record; leadership moves in that
   record if the leader was removed. Waiting for the whole target keeps rule 1 (a reassignment
   never leaves the ISR below MinISR) and is Kafka's rule before KAFKA-19975; Kafka since then
   waits only for the added replicas (and the whole target when the replication factor shrinks).
   docs/conformance.md lists the Kafka tests of that change as a difference on purpose.

A cancellation (`revert`, Kafka's PartitionReassignmentRevert) goes back to the replicas before
the reassignment: the added replicas leave the replica set and the ISR. If that empties the ISR,
the first original replica takes it alone, which needs an unclean election.

Pure functions of the partition record and the broker registrations.
"""

from __future__ import annotations

from dataclasses import dataclass

from .metadata import BrokerRegistration, PartitionRecord
from .requests import INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS


class ReassignmentError(ValueError):
    """An AlterPartitionReassignments answer other than NONE: Kafka's error name and its message."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class Assignment:
    """A partition's replica set with its reassignment in progress, if any. Invariants: `adding`
    and `removing` are disjoint subsets of `replicas`; both empty when no reassignment is in
    progress; the target is `replicas` without `removing`."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @classmethod
    def of(cls, part: PartitionRecord) -> Assignment:
        return cls(tuple(part.replicas), tuple(part.adding_replicas), tuple(part.removing_replicas))

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)


def validate_target(target: tuple[int, ...], brokers: dict[int, BrokerRegistration]) -> None:
    """Kafka's ReplicationControlManager.validateManualPartitionAssignment."""
    if not target:
        raise ReassignmentError(INVALID_REPLICA_ASSIGNMENT, "the replica list is empty")
    if len(set(target)) != len(target):
        raise ReassignmentError(INVALID_REPLICA_ASSIGNMENT, f"replicas {list(target)} name a broker twice")
    unknown = [b for b in target if b not in brokers]
    if unknown:
        raise ReassignmentError(INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not registered")


def reassignment_to(part: PartitionRecord, target: tuple[int, ...], brokers: dict[int, BrokerRegistration]) -> Assignment:
    """The assignment a reassignment of `part` to `target` starts (step 1). With no reassignment
    in progress and the target equal to the replica set, that is the replica set itself."""
    validate_target(target, brokers)
    current = tuple(part.replicas)
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return Assignment(tuple(target) + removing, adding, removing)


def complete_if_ready(assignment: Assignment, isr: tuple[int, ...]) -> tuple[Assignment, tuple[int, ...]] | None:
    """The completed assignment and its ISR (step 3), or None while the ISR does not allow it."""
    if not assignment.in_progress:
        return None
    target = assignment.target
    new_isr = tuple(b for b in isr if b not in assignment.removing)
    if not new_isr or not target:
        return None
    if not set(target) <= set(new_isr):
        return None  # step 2 is not over: a target replica (added or kept) is not in the ISR
    return Assignment(target), new_isr


@dataclass(frozen=True)
class Revert:
    assignment: Assignment
    isr: tuple[int, ...]
    unclean: bool  # the ISR held only added replicas: its first original replica takes it alone


def revert(part: PartitionRecord) -> Revert:
    """Kafka's PartitionReassignmentRevert: the replica set and ISR a cancellation goes back to."""
    if not (part.adding_replicas or part.removing_replicas):
        raise ReassignmentError(NO_REASSIGNMENT_IN_PROGRESS, f"{part.topic}-{part.partition} has no reassignment in progress")
    replicas = tuple(b for b in part.replicas if b not in part.adding_replicas)
    isr = tuple(b for b in part.isr if b not in part.adding_replicas)
    if isr:
        return Revert(Assignment(replicas), isr, False)
    return Revert(Assignment(replicas), (replicas[0],), True)
