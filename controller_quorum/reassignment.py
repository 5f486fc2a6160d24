"""Partition reassignment as replication-correctness.md §6.7 describes it: grow, catch up, shrink.

1. Grow: the replica set becomes target + the replicas being removed; the new replicas start as
   followers with empty logs. The ISR is untouched: a reassignment never adds a replica to the ISR
   (rule 2): only the leader does, through AlterPartition, once the new replica has caught up.
2. Catch up: ordinary replication; the leader expands the ISR under §6.5.3-6.5.4.
3. Shrink: once every replica of the target is in the ISR (Kafka's
   PartitionReassignmentReplicas.maybeCompleteReassignment: "newTargetIsr.containsAll(
   newTargetReplicas)", not only the added ones: a kept replica that fell out of the ISR holds
   the reassignment too), the replica set becomes the target, the ISR keeps its members in the
   target, and leadership moves if the leader is being removed. The ISR is then the whole target,
   so the reassignment never leaves it below the target's MinISR (rule 1). Removing replicas
   starts a new leader epoch, as in Kafka.

Pure functions of the partition record and the broker registrations.
"""

from __future__ import annotations

from dataclasses import replace

from .metadata import BrokerRegistration, PartitionRecord


class ReassignmentError(ValueError):
    pass


def start_reassignment(part: PartitionRecord, target: tuple[int, ...], brokers: dict[int, BrokerRegistration]) -> PartitionRecord | None:
    """The grown partition (step 1), or None when the target is the current replica set."""
    if len(set(target)) != len(target):
        raise ReassignmentError(f"replicas {list(target)} name a broker twice")
    unknown = [b for b in target if b not in brokers]
    if unknown:
        raise ReassignmentError(f"brokers {unknown} are not registered")
    if part.adding_replicas or part.removing_replicas:
        raise ReassignmentError(f"{part.topic}-{part.partition} is already being reassigned")
    if tuple(target) == part.replicas:
        return None
    adding = tuple(b for b in target if b not in part.replicas)
    removing = tuple(b for b in part.replicas if b not in target)
    return replace(
        part,
        replicas=tuple(target) + removing,
        adding_replicas=adding,
        removing_replicas=removing,
        partition_epoch=part.partition_epoch + 1,
        reason="reassignment_grow",
        election=None,
    )


def target_of(part: PartitionRecord) -> tuple[int, ...]:
    return tuple(b for b in part.replicas if b not in part.removing_replicas)


def maybe_complete_reassignment(part: PartitionRecord, brokers: dict[int, BrokerRegistration]) -> PartitionRecord | None:
    """The shrunk partition (step 3) once every target replica is in the ISR, else None."""
    if not part.adding_replicas and not part.removing_replicas:
        return None
    target = target_of(part)
    if not set(target) <= set(part.isr):
        return None  # step 2 is not over: a target replica (added or kept) is not in the ISR
    isr = tuple(b for b in part.isr if b in target)

    def active(b: int) -> bool:
        reg = brokers.get(b)
        return reg is not None and reg.active

    leader = part.leader
    if leader not in isr:
        leader = next((b for b in target if b in isr and active(b)), None)
    return replace(
        part,
        replicas=target,
        isr=isr,
        elr=tuple(b for b in part.elr if b in target),
        last_known_elr=tuple(b for b in part.last_known_elr if b in target),
        leader=leader,
        # A new leader epoch whenever replicas leave, even under the same leader (Kafka's
        # PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded): a removed
        # replica still fetching is fenced by the epoch, and the leader starts over its followers.
        leader_epoch=part.leader_epoch + (1 if leader != part.leader or part.removing_replicas else 0),
        partition_epoch=part.partition_epoch + 1,
        adding_replicas=(),
        removing_replicas=(),
        reason="reassignment_complete",
        election="clean" if leader != part.leader and leader is not None else None,
    )
