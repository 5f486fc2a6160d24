"""How the controller changes one partition: ISR, ELR, LastKnownELR and the leader (Kafka's
PartitionChangeBuilder). Pure functions of the current record and the broker registrations.

ELR rules (the KIP-966 article, cases A-G; where the blog and Kafka's controller
differ, protocol-facts.md says to follow the controller):
- While the target ISR has at least the effective MinISR members, the ELR and LastKnownELR are
  empty (cases D, F, G).
- Otherwise every replica that was in the ISR or ELR and is not in the target ISR enters the ELR
  (cases A, C: Kafka puts *every* replica removed while ISR < MinISR there, the fenced ex-leader
  whose removal empties the ISR included), except replicas that shut down uncleanly, which go to
  the LastKnownELR instead (KIP-966 design).
- `last_known_leader` (shipped Kafka 4.x) keeps only the last leader in the LastKnownELR: it is set
  to [the current leader] by a change that empties the ISR, ELR members left or not, and cleared
  when the partition gets or keeps a leader (`_last_known_leader`).
- Leader candidates are the ISR, then unfenced ELR members; an ELR member elected leader moves to
  the ISR (case B).
- With ELR off, the ISR never becomes empty: its last member stays even when fenced (Kafka's
  behaviour before KIP-966, the Last Replica Standing).
Election order (Kafka's PartitionChangeBuilder.electLeader): keep the current leader if still
acceptable; else the first acceptable replica in replica order, where acceptable is active and in
the ISR, or in the ELR once the ISR is empty; a preferred election tries replicas[0] first. An election from the ELR is clean but
of its own kind, "elr" (Kafka 4.1 counts it apart: ElectionFromEligibleLeaderReplicasPerSec). Unclean elections (legacy
`unclean.leader.election.enable`, or ElectLeaders type unclean) take the first acceptable replica and
mark the partition RECOVERING (KIP-704).

Log directories (KIP-858): a replica whose directory its broker reported offline is not an
acceptable leader, in any election (Kafka's ReplicationControlManager.LeaderAcceptor, which
PartitionChangeBuilder calls as isAcceptableLeader). A change keeps each replica's directory and
takes those of the replicas joining from `new_directories` (PartitionChangeBuilder.setDirectory).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .metadata import DEFAULT_DIR, RECOVERED, RECOVERING, BrokerRegistration, PartitionRecord
from .reassignment import Assignment, complete_if_ready


@dataclass(frozen=True)
class ChangePolicy:
    min_isr: int  # effective: min(min.insync.replicas, replication factor)
    elr_enabled: bool
    unclean_leader_election: bool
    last_known_leader_only: bool = False  # unclean.recovery.strategy == last_known_leader


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    return min(min_insync_replicas, replication_factor)


def topic_setting(image, defaults, topic: str, key: str, default_attr: str):
    """A topic's setting: its dynamic topic config, else the dynamic cluster config, else the
    static cluster config (`defaults`, a KafkaConfig)."""
    topic_cfg = image.topic_configs.get(topic, {})
    return topic_cfg.get(key, image.cluster_config.get(key, getattr(defaults, default_attr)))


def topic_min_isr(image, defaults, topic: str, replication_factor: int) -> int:
    """The effective MinISR of a topic's partitions: min(min.insync.replicas, RF)."""
    return effective_min_isr(topic_setting(image, defaults, topic, "min.insync.replicas", "min_insync_replicas"), replication_factor)


def change_partition(
    part: PartitionRecord,
    brokers: dict[int, BrokerRegistration],
    policy: ChangePolicy,
    *,
    reason: str,
    remove: int | None = None,
    target_isr: tuple[int, ...] | None = None,
    unclean_shutdown: frozenset[int] = frozenset(),
    election: str = "clean",  # clean (Kafka's ONLINE) | preferred | unclean: the kind of election asked for
    recovery_state: str | None = None,
    assignment: Assignment | None = None,
    new_directories: dict[int, int] | None = None,
) -> PartitionRecord | None:
    """The partition's new state, or None when nothing changes. `assignment` is a new replica set
    (a reassignment started, merged or reverted); any change whose ISR allows it completes a
    reassignment in progress, in the same record (Kafka's PartitionChangeBuilder.build: its
    completeReassignmentIfNeeded comes before the ELR and the election)."""

    directories = {**dict(zip(part.replicas, part.directories)), **(new_directories or {})}

    def acceptable(b: int) -> bool:
        """Kafka's LeaderAcceptor: active, and the replica's log directory online."""
        reg = brokers.get(b)
        return reg is not None and reg.active and reg.has_online_dir(directories.get(b, DEFAULT_DIR))

    isr = list(target_isr if target_isr is not None else part.isr)
    if remove is not None and remove in isr:
        isr.remove(remove)
        if not isr and not policy.elr_enabled:
            isr = [remove]  # the last replica standing keeps its place (pre-KIP-966 behaviour)

    assignment = assignment or Assignment.of(part)
    completed = complete_if_ready(assignment, tuple(isr))
    if completed is not None:
        assignment, completed_isr = completed
        isr = list(completed_isr)
    replicas = assignment.replicas

    elr, lkelr = _eligible_leader_replicas(part, replicas, isr, policy, unclean_shutdown)

    leader, leader_isr, leader_elr, elected = _elect(part, replicas, isr, elr, acceptable, election, policy)
    isr, elr = leader_isr, leader_elr
    lrs = recovery_state or part.leader_recovery_state
    if elected == "unclean":
        lrs = RECOVERING
        elr, lkelr = [], []
    if elected in ("clean", "elr", "preferred") and len(isr) >= policy.min_isr:
        elr, lkelr = [], []
    if policy.elr_enabled and policy.last_known_leader_only:
        lkelr = _last_known_leader(part, isr, leader)

    new = replace(
        part,
        replicas=tuple(replicas),
        adding_replicas=assignment.adding,
        removing_replicas=assignment.removing,
        isr=tuple(isr),
        elr=tuple(elr),
        last_known_elr=tuple(lkelr),
        leader=leader,
        leader_recovery_state=lrs,
        reason=reason,
        election=elected if leader != part.leader else None,
        directories=_directories_of(replicas, directories),
    )
    if _state(new) == _state(part):
        return None
    # A new leader epoch with a new leader, and whenever replicas leave the replica set, even under
    # the same leader (Kafka's PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded):
    # a removed replica still fetching is fenced by the epoch, and the leader starts over its followers.
    replicas_left = not set(part.replicas) <= set(replicas)
    return replace(
        new,
        leader_epoch=part.leader_epoch + (1 if leader != part.leader or replicas_left else 0),
        partition_epoch=part.partition_epoch + 1,
    )


def _state(p: PartitionRecord) -> tuple:
    return (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.elr, p.last_known_elr, p.leader, p.leader_recovery_state, p.directories)


def _directories_of(replicas, directories: dict[int, int]) -> tuple[int, ...]:
    """`PartitionRecord.directories` for `replicas`: empty when every replica is in DEFAULT_DIR."""
    dirs = tuple(directories.get(b, DEFAULT_DIR) for b in replicas)
    return dirs if any(d != DEFAULT_DIR for d in dirs) else ()


def _eligible_leader_replicas(
    part: PartitionRecord, replicas: tuple[int, ...], isr: list[int], policy: ChangePolicy, unclean_shutdown: frozenset[int]
) -> tuple[list[int], list[int]]:
    """ELR and LastKnownELR among `replicas` (the new replica set: a replica a reassignment removed
    is in neither)."""
    if not policy.elr_enabled:
        return [], []
    if len(isr) >= policy.min_isr:
        return [], []
    in_isr = set(isr)
    candidates = [b for b in replicas if b in set(part.elr) | set(part.isr)]
    elr = [b for b in candidates if b not in in_isr and b not in unclean_shutdown]
    if policy.last_known_leader_only:
        return elr, list(part.last_known_elr)  # decided after the election (_last_known_leader)
    pool = set(candidates) | set(part.last_known_elr)
    lkelr = [b for b in replicas if b in pool and b not in in_isr and b not in elr]
    return elr, lkelr


def _last_known_leader(part: PartitionRecord, isr: list[int], leader: int | None) -> list[int]:
    """The LastKnownELR under `unclean.recovery.strategy: last_known_leader`, given the leader after
    the election. Kafka's PartitionChangeBuilder.maybeUpdateLastKnownLeader, as shipped since
    Kafka 4.2 (apache/kafka commit 162db130f6, "simplify last known elr update"):

        if (record.leader() == NO_LEADER && partition.lastKnownElr.length == 0) {
            // Only update the last known leader when the first time the partition becomes leaderless.
            record.setLastKnownElr(List.of(partition.leader));
        } else if (record.leader() >= 0 && partition.lastKnownElr.length > 0) {
            record.setLastKnownElr(List.of());
        }

    The record names a leader only when it changes: so a change that leaves a led partition with no
    leader records that leader, unless the LastKnownELR already holds one; a change that elects a
    new leader clears it; anything else (the leader kept, or still none) leaves it alone. Kafka's
    other LastKnownELR rules (maybePopulateTargetElr, maybeUpdateRecordElr) are not written to the
    record in this mode. Before 4.2, the leader was recorded when a change emptied the ISR, and the
    LastKnownELR cleared while the partition kept a leader."""
    current = list(part.last_known_elr)
    if leader is None and part.leader is not None and not current:
        return [part.leader]
    if leader is not None and leader != part.leader and current:
        return []
    return current


def _elect(part, replicas, isr, elr, acceptable, election, policy):
    """(leader, isr, elr, how) where how is clean (from the ISR), elr (clean, from the ELR),
    preferred, unclean, or None (no acceptable replica). Kafka's PartitionChangeBuilder
    .electLeader: a valid leader is acceptable (`acceptable`: active, its log directory online) and
    in the ISR, or in the ELR when the ISR is empty; the
    current leader stays if valid; otherwise the first valid replica in the order of `replicas`
    (the new replica set). A preferred election tries replicas[0] first (electPreferredLeader)."""

    def valid(b: int | None) -> bool:
        return b is not None and (b in isr or (not isr and policy.elr_enabled and b in elr)) and acceptable(b)

    preferred = replicas[0] if replicas else None
    if election == "preferred":
        order = [preferred, part.leader, *replicas[1:]]
    else:
        order = [part.leader, *replicas]
    for b in order:
        if not valid(b):
            continue
        if b not in isr:
            # Case B: an unfenced ELR member leads and moves to the ISR; a clean election, of
            # kind "elr" (Kafka's "using ELR", PartitionChangeBuilder.tryElection).
            return b, [b], [x for x in elr if x != b], "elr"
        return b, isr, elr, "preferred" if election == "preferred" and b == preferred else "clean"
    # Kafka's ONLINE election of a topic that allows unclean elections is made UNCLEAN by its
    # callers (generateLeaderAndIsrUpdates); a preferred election never is (electPreferredLeader).
    if election == "unclean" or (election == "clean" and policy.unclean_leader_election):
        for b in replicas:
            if acceptable(b):
                return b, [b], [], "unclean"
    return None, isr, elr, None


def with_recovered(part: PartitionRecord) -> PartitionRecord:
    return replace(part, leader_recovery_state=RECOVERED)
