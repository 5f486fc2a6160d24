"""The partitions' side of the active controller: ISR changes and elections, fencing and
controlled shutdown as they touch partitions, failed log directories, AlterPartition, the
automatic preferred and unclean elections, reassignments and the topic admin calls (Kafka's
ReplicationControlManager). Each operation makes its records and events in a Proposal
(proposal.py) and returns its answer; the Controller (controller.py) appends them and answers
after commit.

Rules: §6.3 (one change builds on the previous), §6.5.1 (fencing, KIP-903's broker epochs in
AlterPartition), §6.7 (reassignment), KIP-966 (ELR), KIP-704 (a recovering leader's ISR), KIP-858
(log directories); the partition's next state itself is computed by partition_change.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from actors.settings import ClusterSettings
from observability.events import (
    AlterPartitionRejected,
    ReassignmentCancelled,
    ReassignmentCompleted,
    ReassignmentStarted,
    TopicCreated,
)

from .log_dirs import DirectoryPlacer
from .metadata import (
    DEFAULT_DIR,
    RECOVERED,
    RECOVERING,
    BrokerRegistration,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataImage,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    new_topic_id,
)
from .partition_change import ChangePolicy, change_partition, topic_min_isr, topic_setting
from .placement import PlacementError, assign_replicas
from .proposal import Proposal
from .reassignment import ReassignmentError, reassignment_to, revert, validate_target
from .requests import (
    ELECTION_NOT_NEEDED,
    ELIGIBLE_LEADERS_NOT_AVAILABLE,
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    INVALID_UPDATE_VERSION,
    PREFERRED_LEADER_NOT_AVAILABLE,
    STALE_BROKER_EPOCH,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    AdminError,
    AlterPartitionRequest,
    AlterPartitionResponse,
)

# Kafka's maxElectionsPerImbalance: the most elections one automatic pass makes.
MAX_ELECTIONS_PER_PASS = 1_000


class ReplicationControl:
    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings

    def policy(self, image: MetadataImage, topic: str, replication_factor: int | None = None) -> ChangePolicy:
        """The rules for a partition of `topic` (dynamic config first, then the cluster's)."""
        cfg = self.settings.config
        unclean = topic_setting(image, cfg, topic, "unclean.leader.election.enable", "unclean_leader_election_enable")
        if replication_factor is None:
            replication_factor = next((len(p.replicas) for (t, _), p in image.partitions.items() if t == topic), 1)
        return ChangePolicy(
            min_isr=topic_min_isr(image, cfg, topic, replication_factor),
            elr_enabled=self.settings.protocol.elr,
            unclean_leader_election=bool(unclean),
            last_known_leader_only=cfg.unclean_recovery_strategy == "last_known_leader",
        )

    def _policy_of(self, image: MetadataImage, part: PartitionRecord) -> ChangePolicy:
        return self.policy(image, part.topic, replication_factor=len(part.replicas))

    # --- changes of one partition -----------------------------------------------------------------

    def change(self, p: Proposal, part: PartitionRecord, brokers: dict[int, BrokerRegistration] | None = None, **kwargs) -> PartitionRecord | None:
        """The partition's next state (partition_change.py) made in `p`, if it changes. `brokers`:
        the registrations to judge by, when an operation judges as if a record of its own that
        comes later were applied already (default: the working image's)."""
        new = change_partition(part, p.image.brokers if brokers is None else brokers, self._policy_of(p.image, part), **kwargs)
        if new is not None:
            self.propose_change(p, part, new)
        return new

    @staticmethod
    def propose_change(p: Proposal, old: PartitionRecord, new: PartitionRecord) -> int:
        """Make a partition's new state, and say when it starts, changes or ends a reassignment."""
        last = p.add(new)
        was = (old.replicas, old.adding_replicas, old.removing_replicas)
        now = (new.replicas, new.adding_replicas, new.removing_replicas)
        if now != was and (new.adding_replicas or new.removing_replicas):
            target = tuple(b for b in new.replicas if b not in new.removing_replicas)
            p.emit(ReassignmentStarted(new.topic, new.partition, target, new.adding_replicas, new.removing_replicas))
        elif (old.adding_replicas or old.removing_replicas) and not (new.adding_replicas or new.removing_replicas):
            event = ReassignmentCancelled if new.reason == "reassignment_cancelled" else ReassignmentCompleted
            p.emit(event(new.topic, new.partition, tuple(new.replicas), tuple(new.isr), new.leader))
        return last

    # --- what a broker's state does to the partitions ---------------------------------------------

    def remove_broker_everywhere(self, p: Proposal, broker: int, reason: str) -> None:
        """The broker out of every ISR and leadership (a controlled shutdown)."""
        for part in list(p.image.partitions.values()):
            if broker in part.isr or part.leader == broker:
                self.change(p, part, reason=reason, remove=broker)

    def handle_broker_fenced(self, p: Proposal, b: BrokerRegistration) -> None:
        """Fence a broker (ReplicationControlManager.handleBrokerFenced): the partition changes
        taking it out of every ISR and leadership come first (computed as if it were fenced
        already), then the fencing record. A large fencing spans many records that may commit in
        several parts; in this order no committed prefix shows a fenced broker in an ISR
        (NoFencedInIsr, seen at 10,000 partitions)."""
        brokers = {**p.image.brokers, b.broker_id: replace(b, fenced=True)}
        for part in list(p.image.partitions.values()):
            if b.broker_id in part.isr or part.leader == b.broker_id:
                self.change(p, part, brokers, reason="broker_fenced", remove=b.broker_id)
        p.add(BrokerRegistrationChangeRecord(b.broker_id, b.epoch, fenced=True))

    def handle_broker_unfenced(self, p: Proposal, broker: int) -> None:
        """Elect a leader for every leaderless partition the unfenced broker holds a replica of."""
        for part in list(p.image.partitions.values()):
            if part.leader is None and broker in part.replicas:
                self.change(p, part, reason="broker_unfenced")

    def handle_broker_unclean_shutdown(self, p: Proposal, broker: int) -> None:
        """KIP-966: a broker back from an unclean shutdown leaves every ELR (its log may have lost
        committed records) and is remembered in the LastKnownELR."""
        for part in list(p.image.partitions.values()):
            if broker in part.elr:
                self.change(p, part, reason="unclean_shutdown", unclean_shutdown=frozenset({broker}))

    def handle_directories_offline(self, p: Proposal, broker_id: int, offline_dirs: tuple[int, ...]) -> None:
        """Kafka's ReplicationControlManager.handleDirectoriesOffline, which processBrokerHeartbeat
        calls after the broker's state transition: for the reported directories still online in the
        registration (`directoryIntersection`), every partition with a replica of this broker there
        gets the changes of generateLeaderAndIsrUpdates with the broker as `brokerToRemove` (out of
        the ISR, into the ELR if the ISR falls below MinISR, and never the leader), then one
        BrokerRegistrationChangeRecord keeps the directories left (`directoryDifference`). A
        heartbeat naming no new directory changes nothing: the broker repeats them until it
        restarts."""
        reg = p.image.brokers[broker_id]
        newly_offline = [d for d in offline_dirs if reg.has_online_dir(d)]
        if not newly_offline:
            return
        online = tuple(d for d in reg.log_dirs if d not in offline_dirs)
        # Judged as if the record below were applied, so that no replica in those directories is an
        # acceptable leader (Kafka excludes brokerToRemove from leadership in the same way).
        brokers = {**p.image.brokers, broker_id: replace(reg, log_dirs=online)}
        for part in list(p.image.partitions.values()):
            if broker_id in part.replicas and part.dir_of(broker_id) in newly_offline:
                self.change(p, part, brokers, reason="log_dir_offline", remove=broker_id)
        p.add(BrokerRegistrationChangeRecord(broker_id, reg.epoch, log_dirs=online))

    # --- AlterPartition ---------------------------------------------------------------------------

    def alter_partition(self, p: Proposal, req: AlterPartitionRequest, controller: str | None) -> AlterPartitionResponse:
        """The leader's ISR change (ReplicationControlManager.alterPartition): refused with Kafka's
        error (naming the `controller` that answers), or made; the answer carries the partition's
        state and echoes the request."""
        echo = {"request_leader_epoch": req.leader_epoch, "request_partition_epoch": req.partition_epoch, "request_attempt": req.attempt}

        def fail(error: str) -> AlterPartitionResponse:
            p.emit(AlterPartitionRejected(req.topic, req.partition, error, req.broker_id))
            return AlterPartitionResponse(error, req.topic, req.partition, controller=controller, **echo)

        w = p.image
        sender = w.brokers.get(req.broker_id)
        if sender is None or sender.epoch != req.broker_epoch:
            return fail(STALE_BROKER_EPOCH)
        part = w.partitions.get((req.topic, req.partition))
        if part is None:
            return fail(UNKNOWN_TOPIC_OR_PARTITION)
        if part.leader != req.broker_id or part.leader_epoch != req.leader_epoch:
            return fail(FENCED_LEADER_EPOCH)
        if part.partition_epoch != req.partition_epoch:
            return fail(INVALID_UPDATE_VERSION)  # §6.3: the leader worked from a stale view
        new_isr = tuple(b for b, _ in req.new_isr)
        if req.broker_id not in new_isr or not set(new_isr) <= set(part.replicas) or len(set(new_isr)) != len(new_isr):
            return fail(INVALID_REQUEST)
        if part.leader_recovery_state == RECOVERING and req.leader_recovery_state == RECOVERING and len(new_isr) > 1:
            return fail(INVALID_REQUEST)  # KIP-704: no ISR expansion before the leader recovered
        for broker, broker_epoch in req.new_isr:
            if broker in part.isr:
                continue
            reg = w.brokers.get(broker)
            stale = self.settings.protocol.broker_epoch_in_alter_partition and (reg is None or reg.epoch != broker_epoch)
            if reg is None or not reg.active or stale:
                return fail(INELIGIBLE_REPLICA)  # §6.5.1 case 3, KIP-903
        new = self.change(
            p,
            part,
            reason="alter_partition",
            target_isr=tuple(b for b in part.replicas if b in new_isr),
            recovery_state=RECOVERED if req.leader_recovery_state == RECOVERED else None,
        )
        return AlterPartitionResponse(None, req.topic, req.partition, part if new is None else new, **echo)

    # --- automatic elections ----------------------------------------------------------------------

    def elect_preferred_leaders(self, p: Proposal) -> int:
        """ReplicationControlManager.maybeBalancePartitionLeaders: a preferred election for each
        partition led by a replica other than its first (`imbalancedPartitions`), where the first
        can lead. Returns the changes made (at most MAX_ELECTIONS_PER_PASS)."""
        changed = 0
        for part in list(p.image.partitions.values()):
            if changed >= MAX_ELECTIONS_PER_PASS:
                break
            if part.replicas and part.leader != part.replicas[0]:
                if self.change(p, part, reason="leader_rebalance", election="preferred") is not None:
                    changed += 1
        return changed

    def elect_unclean_leaders(self, p: Proposal) -> int:
        """ReplicationControlManager.maybeTriggerUncleanLeaderElectionForLeaderlessPartitions: each
        leaderless partition whose topic allows unclean elections gets a live replica as leader (the
        change's usual election: the ISR, the ELR, then any live replica). Returns the changes made."""
        w = p.image
        changed = 0
        for key in [k for k in w.partitions if k in w.leaderless]:
            part = w.partitions[key]
            if changed >= MAX_ELECTIONS_PER_PASS:
                break
            if self._policy_of(w, part).unclean_leader_election:
                if self.change(p, part, reason="unclean_election_check") is not None:
                    changed += 1
        return changed

    # --- admin calls ------------------------------------------------------------------------------

    def create_topic(self, p: Proposal, name: str, partitions: int, replication_factor: int, assignment: dict[int, list[int]] | None,
                     config: dict[str, Any]) -> AdminError | None:
        """CreateTopics (Kafka's ReplicationControlManager.createTopic): None when the records were
        made, else Kafka's error."""
        w = p.image
        if name in w.topics:
            return AdminError(TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions < 1:
            return AdminError(INVALID_PARTITIONS, f"the number of partitions must be at least 1, got {partitions}")
        replicas, error = self._new_replicas(w, range(partitions), replication_factor, assignment)
        if error is not None:
            return error
        topic_id = new_topic_id(name, p.next_offset)
        records: list[Any] = [TopicRecord(name, topic_id)]
        records += [ConfigRecord("topic", name, k, v) for k, v in config.items() if v is not None]
        placer = self._directory_placer(w)
        records += [self._new_partition(w, name, i, reps, placer) for i, reps in zip(range(partitions), replicas, strict=True)]
        p.add(*records)
        p.emit(TopicCreated(name, tuple(tuple(r) for r in replicas), topic_id))
        return None

    @staticmethod
    def delete_topic(p: Proposal, name: str) -> AdminError | None:
        """DeleteTopics (Kafka's ReplicationControlManager.deleteTopic): one RemoveTopicRecord; the
        brokers delete the topic's replicas when it commits."""
        topic_id = p.image.topics.get(name)
        if topic_id is None:
            return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name}")
        p.add(RemoveTopicRecord(name, topic_id))
        return None

    def create_partitions(self, p: Proposal, topic: str, count: int, assignment: dict[int, list[int]] | None) -> AdminError | None:
        """CreatePartitions (Kafka's ReplicationControlManager.createPartitions): the topic grows
        to `count` partitions, placed as its existing ones are replicated."""
        w = p.image
        if topic not in w.topics:
            return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
        existing = sorted(i for (t, i) in w.partitions if t == topic)
        if count < len(existing):
            return AdminError(INVALID_PARTITIONS, f"topic currently has {len(existing)} partitions, which is higher than the requested {count}")
        if count == len(existing):
            return AdminError(INVALID_PARTITIONS, f"topic already has {len(existing)} partition(s)")
        new = range(len(existing), count)
        if assignment is not None:
            assignment = {i: r for i, r in assignment.items()}
            if set(assignment) != set(new):
                return AdminError(INVALID_REPLICA_ASSIGNMENT, f"the assignment must name exactly the new partitions {list(new)}, got {sorted(assignment)}")
        rf = len(w.partitions[(topic, existing[0])].replicas)
        replicas, error = self._new_replicas(w, new, rf, assignment)
        if error is not None:
            return error
        placer = self._directory_placer(w)
        p.add(*[self._new_partition(w, topic, i, reps, placer) for i, reps in zip(new, replicas, strict=True)])
        return None

    @staticmethod
    def _new_replicas(w: MetadataImage, partitions: range, replication_factor: int,
                      assignment: dict[int, list[int]] | None) -> tuple[list[list[int]], AdminError | None]:
        """Each new partition's replicas: the assignment's, checked as Kafka's
        validateManualPartitionAssignment does, or Kafka's placement over the active brokers."""
        if assignment is None:
            usable = {b.broker_id: b.rack for b in w.brokers.values() if b.active}
            try:
                return assign_replicas(len(partitions), replication_factor, usable), None
            except PlacementError as exc:
                return [], AdminError(INVALID_REPLICATION_FACTOR, str(exc))
        chosen = []
        for i in partitions:
            reps = list(assignment.get(i, []))
            try:
                validate_target(tuple(reps), w.brokers)
            except ReassignmentError as exc:
                return [], AdminError(exc.error, f"partition {i}: {exc}")
            if len(reps) != replication_factor:
                return [], AdminError(INVALID_REPLICA_ASSIGNMENT, f"partition {i} has {len(reps)} replicas, the others {replication_factor}")
            if not any(w.is_active(b) for b in reps):
                return [], AdminError(INVALID_REPLICA_ASSIGNMENT, f"every broker of partition {i}'s assignment {reps} is fenced or shutting down")
            chosen.append(reps)
        return chosen, None

    def _directory_placer(self, w: MetadataImage) -> DirectoryPlacer:
        """Where the new replicas of one admin call go among their brokers' log directories."""
        return DirectoryPlacer(w, self.settings.log_dirs)

    @staticmethod
    def _new_partition(w: MetadataImage, topic: str, partition: int, replicas: list[int], placer: DirectoryPlacer) -> PartitionRecord:
        """A new partition: its active replicas are the ISR, the first of them leads; each replica
        goes to the log directory `placer` chooses."""
        isr = tuple(b for b in replicas if w.is_active(b))
        dirs = placer.place(replicas)
        directories = tuple(dirs.get(b, DEFAULT_DIR) for b in replicas)
        if all(d == DEFAULT_DIR for d in directories):
            directories = ()  # as PartitionRecord keeps them: none when all in the default one
        return PartitionRecord(topic, partition, tuple(replicas), isr, (), (), isr[0] if isr else None, 0, 0, RECOVERED, "create", "clean",
                               directories=directories)

    @staticmethod
    def _admin_partition(w: MetadataImage, topic: str, partition: int) -> PartitionRecord | AdminError:
        """The partition an admin call names, or the error that answers it."""
        part = w.partitions.get((topic, partition))
        return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}") if part is None else part

    def elect_leaders(self, p: Proposal, topic: str, partition: int, election: str) -> AdminError | None:
        """ElectLeaders (Kafka's ReplicationControlManager.electLeader): ELECTION_NOT_NEEDED when
        the preferred replica already leads (preferred) or the partition has a leader (unclean);
        a build that changes nothing is PREFERRED_LEADER_NOT_AVAILABLE or
        ELIGIBLE_LEADERS_NOT_AVAILABLE."""
        part = self._admin_partition(p.image, topic, partition)
        if isinstance(part, AdminError):
            return part
        if (election == "preferred" and part.replicas and part.leader == part.replicas[0]) or (election == "unclean" and part.leader is not None):
            return AdminError(ELECTION_NOT_NEEDED, f"{topic}-{partition} is led by {part.leader}")
        if self.change(p, part, reason=f"elect_{election}", election=election) is None:
            error = PREFERRED_LEADER_NOT_AVAILABLE if election == "preferred" else ELIGIBLE_LEADERS_NOT_AVAILABLE
            return AdminError(error, f"no {'preferred ' if election == 'preferred' else ''}leader can be elected for {topic}-{partition}")
        return None

    def reassign(self, p: Proposal, topic: str, partition: int, target: list[int]) -> AdminError | None:
        """AlterPartitionReassignments with a target (§6.7, Kafka's changePartitionReassignment):
        one record grows the replica set, or completes at once when the ISR already allows it;
        a reassignment in progress is replaced by the new target. The leader's ISR expansions
        complete it (`reassignment.complete_if_ready`, inside `change_partition`)."""
        part = self._admin_partition(p.image, topic, partition)
        if isinstance(part, AdminError):
            return part
        try:
            assignment = reassignment_to(part, tuple(target), p.image.brokers)
        except ReassignmentError as exc:
            return AdminError(exc.error, str(exc))
        joining = [b for b in assignment.replicas if b not in part.replicas]
        self.change(p, part, reason="reassignment", assignment=assignment, new_directories=self._directory_placer(p.image).place(joining))
        return None

    def cancel_reassignment(self, p: Proposal, topic: str, partition: int) -> AdminError | None:
        """AlterPartitionReassignments without a target (Kafka's cancelPartitionReassignment): back to
        the replicas before the reassignment. NO_REASSIGNMENT_IN_PROGRESS when there is none;
        INVALID_REPLICA_ASSIGNMENT when going back needs an unclean election the topic does not allow."""
        part = self._admin_partition(p.image, topic, partition)
        if isinstance(part, AdminError):
            return part
        try:
            back = revert(part)
        except ReassignmentError as exc:
            return AdminError(exc.error, str(exc))
        policy = self.policy(p.image, part.topic, replication_factor=len(back.assignment.replicas))
        if back.unclean and not policy.unclean_leader_election:
            return AdminError(INVALID_REPLICA_ASSIGNMENT, f"reverting {topic}-{partition} would need an unclean leader election")
        new = change_partition(
            part, p.image.brokers, policy, reason="reassignment_cancelled", target_isr=back.isr,
            assignment=back.assignment, election="unclean" if policy.unclean_leader_election else "clean",
        )
        if new is not None:
            self.propose_change(p, part, new)
        return None
