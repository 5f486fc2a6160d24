"""Log directories (KIP-858): a replica whose directory is offline is not an acceptable leader
(Kafka's ReplicationControlManager.LeaderAcceptor, used by PartitionChangeBuilder), a heartbeat
naming a failed directory takes the broker out of the ISR and leadership of the partitions it holds
there (handleDirectoriesOffline), new replicas go to the directory with the fewest replicas
(LogManager.nextLogDirs), and the broker's side: the halt, the heartbeat, the timeout. The library
scenario `log-dir-failure` runs it whole."""

import random
from dataclasses import replace
from types import SimpleNamespace

from actors.broker_node import BrokerNode
from actors.contract import Envelope, Output, StartContext, StopProcess
from controller_quorum.controller import Controller
from controller_quorum.log_dirs import DirectoryPlacer, fewest_replicas
from controller_quorum.metadata import (
    BrokerRegistration,
    BrokerRegistrationChangeRecord,
    MetadataImage,
    PartitionRecord,
    RegisterBrokerRecord,
)
from controller_quorum.partition_change import ChangePolicy, change_partition
from controller_quorum.requests import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec

ELR_ON = ChangePolicy(min_isr=2, elr_enabled=True, unclean_leader_election=False)
ELR_OFF = ChangePolicy(min_isr=2, elr_enabled=False, unclean_leader_election=False)
UNCLEAN = ChangePolicy(min_isr=2, elr_enabled=False, unclean_leader_election=True)


def brokers(offline: dict[int, tuple[int, ...]] | None = None) -> dict[int, BrokerRegistration]:
    """Brokers 1..3, unfenced, each with directories 0 and 1 online but those in `offline`."""
    offline = offline or {}
    return {b: BrokerRegistration(b, 10 + b, None, False, log_dirs=tuple(d for d in (0, 1) if d not in offline.get(b, ()))) for b in (1, 2, 3)}


def part(leader=1, isr=(1, 2, 3), elr=(), directories=(1, 0, 0)) -> PartitionRecord:
    return PartitionRecord("t", 0, (1, 2, 3), isr, elr, (), leader, 5, 7, directories=directories)


# --- the leader acceptor ------------------------------------------------------------------------


def test_a_replica_in_an_offline_directory_is_not_elected_though_first_in_the_isr():
    new = change_partition(part(leader=None), brokers(offline={1: (1,)}), ELR_ON, reason="broker_unfenced")
    assert (new.leader, new.isr, new.election) == (2, (1, 2, 3), "clean")


def test_the_same_replica_leads_when_its_other_directory_failed():
    # Broker 1's failed directory is 0, its replica of t-0 is in directory 1: it stays acceptable.
    new = change_partition(part(leader=None), brokers(offline={1: (0,)}), ELR_ON, reason="broker_unfenced")
    assert new.leader == 1


def test_a_leader_whose_directory_went_offline_loses_the_leadership_at_the_next_change():
    new = change_partition(part(), brokers(offline={1: (1,)}), ELR_ON, reason="any")
    assert (new.leader, new.leader_epoch) == (2, 6)


def test_an_elr_member_in_an_offline_directory_is_not_elected():
    offline = part(leader=None, isr=(), elr=(1, 2))
    new = change_partition(offline, brokers(offline={1: (1,)}), ELR_ON, reason="broker_unfenced")
    assert (new.leader, new.isr, new.elr, new.election) == (2, (2,), (1,), "elr")


def test_an_unclean_election_skips_a_replica_in_an_offline_directory():
    leaderless = part(leader=None, isr=(3,), directories=(1, 0, 1))
    new = change_partition(leaderless, brokers(offline={1: (1,), 3: (1,)}), UNCLEAN, reason="unclean_election_check")
    assert (new.leader, new.isr, new.election) == (2, (2,), "unclean")


def test_with_no_acceptable_replica_the_partition_has_no_leader():
    only = part(isr=(1,), directories=(1, 0, 0))
    new = change_partition(only, brokers(offline={1: (1,)}), ELR_OFF, reason="any")
    assert (new.leader, new.isr) == (None, (1,))


def test_a_change_keeps_the_directories_and_places_the_joining_replicas():
    # PartitionChangeBuilderTest.testKeepsDirectoriesAfterReassignment, in kraftlab's numbers.
    from controller_quorum.reassignment import Assignment

    grown = Assignment((1, 2, 3, 4), (4,), ())
    new = change_partition(part(), {**brokers(), 4: BrokerRegistration(4, 14, None, False, log_dirs=(0, 1))}, ELR_ON,
                           reason="reassignment", assignment=grown, new_directories={4: 1})
    assert new.directories == (1, 0, 0, 1)
    assert [new.dir_of(b) for b in (1, 2, 3, 4)] == [1, 0, 0, 1]


# --- where new replicas go ---------------------------------------------------------------------


def test_a_new_replica_goes_to_the_directory_with_the_fewest_replicas_ties_to_the_lowest():
    from collections import Counter

    assert fewest_replicas((0, 1, 2), Counter()) == 0
    assert fewest_replicas((0, 1, 2), Counter({0: 1})) == 1
    assert fewest_replicas((0, 1, 2), Counter({0: 2, 1: 1, 2: 1})) == 1
    assert fewest_replicas((0, 2), Counter({0: 1})) == 2  # directory 1 is offline


def test_a_topics_partitions_spread_over_a_brokers_directories_and_skip_an_offline_one():
    image = MetadataImage()
    image.apply(0, RegisterBrokerRecord(1, 0, None, fenced=False, log_dirs=(0, 1, 2)))
    image.apply(1, RegisterBrokerRecord(2, 1, None, fenced=False, log_dirs=(0, 1, 2)))
    image.apply(2, BrokerRegistrationChangeRecord(2, 1, log_dirs=(0, 2)))
    placer = DirectoryPlacer(image, 3)
    assert [placer.place([1, 2]) for _ in range(4)] == [{1: 0, 2: 0}, {1: 1, 2: 2}, {1: 2, 2: 0}, {1: 0, 2: 2}]
    assert DirectoryPlacer(image, 1).place([1, 2]) == {}  # one directory: nothing to record


def test_existing_replicas_count_for_the_next_placement():
    image = MetadataImage()
    image.apply(0, RegisterBrokerRecord(1, 0, None, fenced=False, log_dirs=(0, 1)))
    image.apply(1, PartitionRecord("u", 0, (1,), (1,), (), (), 1, 0, 0))  # in directory 0
    assert DirectoryPlacer(image, 2).place([1]) == {1: 1}


# --- the active controller and a heartbeat naming failed directories ---------------------------


class LeaderRaft:
    """What the controller needs of its Raft node as the leader: appends take the next offsets."""

    def __init__(self) -> None:
        self.log = SimpleNamespace(end_offset=0, entries=[])
        self.pending: list = []
        self.leader = "c1"

    def append(self, records, now_ms, out):
        self.pending.extend(records)
        return self.log.end_offset + len(self.pending) - 1


def active_controller(elr: bool = True, min_isr: int = 2) -> Controller:
    spec = ClusterSpec.model_validate({"brokers": 3, "controllers": 1, "log_dirs": 2,
                                       "config": {"min.insync.replicas": min_isr, "eligible.leader.replicas.enable": elr}})
    ctl = Controller("c1", cluster_settings(spec))
    ctl.raft = LeaderRaft()
    records = [RegisterBrokerRecord(b, b, None, fenced=False, log_dirs=(0, 1)) for b in (1, 2, 3)]
    # t-0: broker 1's replica in directory 0; t-1: in directory 1 (on every broker alike).
    records += [PartitionRecord("t", 0, (1, 2, 3), (1, 2, 3), (), (), 1, 0, 0),
                PartitionRecord("t", 1, (1, 2, 3), (1, 2, 3), (), (), 1, 0, 0, directories=(1, 1, 1)),
                PartitionRecord("t", 2, (2, 1), (2, 1), (), (), 2, 0, 0, directories=(1, 1))]
    ctl.working = MetadataImage()
    for offset, rec in enumerate(records):
        ctl.working.apply(offset, rec)
    ctl.raft.log.end_offset = len(records)
    return ctl


def heartbeat(ctl: Controller, broker: int, offline: tuple[int, ...]) -> Output:
    out = Output()
    req = BrokerHeartbeatRequest(broker, broker, ctl.working.offset, offline_log_dirs=offline)
    ctl.handle(Envelope(f"b{broker}", "c1", req), 1_000.0, out)
    return out


def test_a_heartbeat_naming_a_failed_directory_moves_leadership_and_shrinks_the_isr():
    # ReplicationControlManagerTest.testHandleDirectoriesOffline.
    ctl = active_controller()
    heartbeat(ctl, 1, (1,))
    w = ctl.working
    assert (w.partitions[("t", 1)].leader, w.partitions[("t", 1)].isr) == (2, (2, 3))
    assert (w.partitions[("t", 1)].reason, w.partitions[("t", 1)].leader_epoch) == ("log_dir_offline", 1)
    assert (w.partitions[("t", 2)].leader, w.partitions[("t", 2)].isr) == (2, (2,))
    assert (w.partitions[("t", 0)].leader, w.partitions[("t", 0)].isr, w.partitions[("t", 0)].partition_epoch) == (1, (1, 2, 3), 0)
    assert w.brokers[1].log_dirs == (0,)
    # The partition changes first, then the registration (as Kafka appends them).
    assert isinstance(ctl.raft.pending[-1], BrokerRegistrationChangeRecord) and ctl.raft.pending[-1].log_dirs == (0,)


def test_the_broker_repeats_its_failed_directories_and_only_the_first_heartbeat_changes_anything():
    ctl = active_controller()
    heartbeat(ctl, 1, (1,))
    written = len(ctl.raft.pending)
    out = heartbeat(ctl, 1, (1,))
    assert len(ctl.raft.pending) == written
    (answer,) = [e.payload for e in out.sends if isinstance(e.payload, BrokerHeartbeatResponse)]
    assert answer.error is None and not answer.is_fenced


def test_a_replica_removed_below_min_isr_enters_the_elr_but_cannot_lead_from_it():
    ctl = active_controller(min_isr=2)
    heartbeat(ctl, 1, (1,))
    t2 = ctl.working.partitions[("t", 2)]
    assert (t2.isr, t2.elr) == ((2,), (1,))  # Kafka's maybePopulateTargetElr takes every ISR member removed
    # Broker 2 goes too: broker 1, in the ELR, is active but its directory is offline.
    brokers_now = {**ctl.working.brokers, 2: replace(ctl.working.brokers[2], fenced=True)}
    new = change_partition(t2, brokers_now, ctl.policy("t", replication_factor=2), reason="broker_fenced", remove=2)
    assert new.leader is None and 1 in new.elr


def test_without_elr_a_leader_in_a_failed_directory_hands_over_to_the_other_isr_member():
    ctl = active_controller(elr=False)
    heartbeat(ctl, 2, (1,))  # broker 2 leads t-2, whose ISR is [2, 1]
    assert (ctl.working.partitions[("t", 2)].leader, ctl.working.partitions[("t", 2)].isr) == (1, (1,))


def test_without_elr_the_last_replica_stays_in_the_isr_and_the_partition_goes_offline():
    ctl = active_controller(elr=False)
    ctl.working.apply(ctl.working.offset, PartitionRecord("t", 2, (2, 1), (2,), (), (), 2, 0, 1, directories=(1, 1)))
    ctl.raft.log.end_offset = ctl.working.offset
    heartbeat(ctl, 2, (1,))
    t2 = ctl.working.partitions[("t", 2)]
    assert (t2.leader, t2.isr) == (None, (2,))  # the Last Replica Standing, unable to lead


def test_a_failed_directory_is_reported_offline_in_the_committed_registration():
    ctl = active_controller()
    heartbeat(ctl, 1, (1,))
    out = Output()
    entries = [SimpleNamespace(offset=ctl.committed.offset + i, record=r) for i, r in enumerate(
        [RegisterBrokerRecord(1, 1, None, fenced=False, log_dirs=(0, 1)), BrokerRegistrationChangeRecord(1, 1, log_dirs=(0,))])]
    ctl.on_commit(entries, 1_000.0, out)
    assert [e.offline_log_dirs for e in out.events if e.kind == "broker_change"] == [(), (1,)]


# --- the broker ----------------------------------------------------------------------------------


def broker(log_dirs: int = 2) -> BrokerNode:
    settings = cluster_settings(ClusterSpec.model_validate({"brokers": 3, "controllers": 1, "log_dirs": log_dirs}))
    b = BrokerNode(StartContext("b1", {}, None, random.Random(0)), settings)
    b.start(0.0)
    b.controller, b.epoch = "c1", 7
    return b


def heartbeats(out: Output) -> list[BrokerHeartbeatRequest]:
    return [e.payload for e in out.sends if isinstance(e.payload, BrokerHeartbeatRequest)]


def test_losing_the_metadata_logs_directory_halts_the_broker():
    b = broker()
    out, halted = b.fail_log_dir(0, 100.0)
    assert halted and [(e.kind, e.halted) for e in out.events] == [("log_dir_failed", True)]
    assert not out.sends and not out.storage  # Exit.halt: nothing more, no clean shutdown
    assert b.tick(200.0).events == [] and b.tick(200.0).sends == []


def test_a_failed_directory_goes_in_a_heartbeat_at_once_and_in_every_one_after():
    b = broker()
    out, halted = b.fail_log_dir(1, 100.0)
    assert not halted and out.next_deadline_ms <= 100.0
    first = heartbeats(b.tick(100.0))
    assert [h.offline_log_dirs for h in first] == [(1,)]
    b.handle(Envelope("c1", "b1", BrokerHeartbeatResponse(None, is_fenced=False)), 150.0)
    later = heartbeats(b.tick(100.0 + b.settings.config.broker_heartbeat_interval_ms))
    assert [h.offline_log_dirs for h in later] == [(1,)]


def test_an_unacknowledged_failed_directory_shuts_the_broker_down_after_the_timeout():
    b = broker()
    b.fail_log_dir(1, 100.0)
    timeout = b.settings.config.log_dir_failure_timeout_ms
    assert not any(isinstance(op, StopProcess) for op in b.tick(100.0 + timeout - 1).storage)
    out = b.tick(100.0 + timeout)
    assert [e.kind for e in out.events][:1] == ["log_dir_failure_timeout"]
    # No broker epoch in the marker: the failed directory got no clean-shutdown file (KIP-966).
    assert [op for op in out.storage if isinstance(op, StopProcess)] == [StopProcess(b"")]


def test_an_acknowledged_failed_directory_does_not_shut_the_broker_down():
    b = broker()
    b.fail_log_dir(1, 100.0)
    b.tick(100.0)
    b.handle(Envelope("c1", "b1", BrokerHeartbeatResponse(None, is_fenced=False)), 150.0)
    out = b.tick(100.0 + b.settings.config.log_dir_failure_timeout_ms + 1)
    assert not any(isinstance(op, StopProcess) for op in out.storage)
