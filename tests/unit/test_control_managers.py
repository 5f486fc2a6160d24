"""The controller's managers on a metadata image, without Raft (Kafka's ClusterControlManagerTest,
ReplicationControlManagerTest and ConfigurationControlManagerTest do the same): each operation
makes its records in a Proposal, applied to the image at the offsets they will have, and returns
its answer."""

from __future__ import annotations

from controller_quorum.cluster_control import ClusterControl
from controller_quorum.configuration_control import alter_config
from controller_quorum.metadata import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataImage,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    new_topic_id,
)
from controller_quorum.proposal import Proposal
from controller_quorum.replication_control import ReplicationControl
from controller_quorum.requests import (
    DUPLICATE_BROKER_REGISTRATION,
    INELIGIBLE_REPLICA,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
)
from observability.events import BrokerFenced, RegistrationAccepted
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec


def managers(**protocol) -> tuple[ClusterControl, ReplicationControl]:
    spec = ClusterSpec.model_validate({"brokers": 3, "controllers": 1, "config": {"min.insync.replicas": 2}, "protocol": protocol})
    settings = cluster_settings(spec)
    replication = ReplicationControl(settings)
    return ClusterControl(settings, replication), replication


def image(*partitions: PartitionRecord, fenced: tuple[int, ...] = ()) -> MetadataImage:
    """Brokers 1-3 registered at offsets 1-3 (their epochs), then topic t and its partitions."""
    img = MetadataImage()
    records = [RegisterBrokerRecord(b, b, None, fenced=b in fenced) for b in (1, 2, 3)] + [TopicRecord("t", new_topic_id("t", 4))]
    for offset, rec in enumerate([*records, *partitions], start=1):
        img.apply(offset, rec)
    return img


def partition(isr=(1, 2, 3), elr=(), leader=1, leader_epoch=0, partition_epoch=0) -> PartitionRecord:
    return PartitionRecord("t", 0, (1, 2, 3), isr, elr, (), leader, leader_epoch, partition_epoch)


def proposal_on(img: MetadataImage) -> Proposal:
    return Proposal(img, img.offset)


def test_register_broker_grants_the_registration_offset_as_epoch_once_the_old_one_is_fenced():
    # ClusterControlManagerTest.testRegistrationWithUnsupportedFeature's neighbours: a live broker
    # cannot register again (DUPLICATE_BROKER_REGISTRATION, §6.5.1); a fenced one gets a new epoch.
    cluster, _ = managers()
    img = image(fenced=(2,))
    p = proposal_on(img)
    assert cluster.register(p, BrokerRegistrationRequest(1, None, 1), 0.0).error == DUPLICATE_BROKER_REGISTRATION
    assert p.records == []
    answer = cluster.register(p, BrokerRegistrationRequest(2, None, 2), 5.0)
    assert (answer.error, answer.broker_epoch) == (None, img.offset - 1) == (None, p.first_offset)
    assert img.brokers[2].epoch == p.first_offset and img.brokers[2].fenced
    assert p.events == [RegistrationAccepted(2, p.first_offset, True)] and cluster.last_contact_ms[2] == 5.0


def test_an_unclean_restart_leaves_every_elr():
    # ReplicationControlManagerTest.testUncleanShutdownBrokerElrs (KIP-966).
    cluster, _ = managers(elr=True)
    img = image(partition(isr=(1,), elr=(2,)), fenced=(2,))
    p = proposal_on(img)
    cluster.register(p, BrokerRegistrationRequest(2, None, None), 0.0)  # no clean-shutdown marker
    assert isinstance(p.records[0], RegisterBrokerRecord)
    t0 = img.partitions[("t", 0)]
    assert (t0.elr, t0.last_known_elr, t0.reason) == ((), (2,), "unclean_shutdown")


def test_a_caught_up_heartbeat_unfences_the_broker_and_elects_its_leaderless_partitions():
    # ReplicationControlManagerTest.testUnfenceBroker...: the unfencing record, then the elections.
    cluster, _ = managers()
    img = image(partition(isr=(1,), leader=None), fenced=(1,))
    p = proposal_on(img)
    answer = cluster.heartbeat(p, BrokerHeartbeatRequest(1, 1, metadata_offset=img.offset), 0.0)
    assert not answer.is_fenced and answer.error is None
    assert isinstance(p.records[0], BrokerRegistrationChangeRecord) and p.records[0].fenced is False
    assert img.partitions[("t", 0)].leader == 1 and p.last_offset == p.first_offset + 1


def test_fencing_an_expired_session_changes_the_partitions_before_the_fencing_record():
    # ReplicationControlManager.handleBrokerFenced: no committed prefix shows a fenced ISR member.
    cluster, _ = managers()
    img = image(partition())
    cluster.activate(img, 0.0)
    cluster.last_contact_ms.update({2: 100_000.0, 3: 100_000.0})
    p = proposal_on(img)
    cluster.fence_expired_sessions(p, 20_000.0)  # broker 1 silent since 0, past the 9 s session
    assert [type(r).__name__ for r in p.records] == ["PartitionRecord", "BrokerRegistrationChangeRecord"]
    assert img.partitions[("t", 0)].leader != 1 and 1 not in img.partitions[("t", 0)].isr
    assert p.events == [BrokerFenced(1, 1, "session_timeout")]


def test_alter_partition_refuses_a_new_member_named_with_a_stale_broker_epoch():
    # ReplicationControlManagerTest.testAlterPartitionShouldRejectBrokersWithStaleEpoch (KIP-903).
    for kip_903, expected in ((True, INELIGIBLE_REPLICA), (False, None)):
        _, replication = managers(broker_epoch_in_alter_partition=kip_903)
        img = image(partition(isr=(1, 2)))
        p = proposal_on(img)
        req = AlterPartitionRequest(1, 1, "t", 0, 0, 0, ((1, 1), (2, 2), (3, 99)), "RECOVERED")
        answer = replication.alter_partition(p, req, "c1")
        assert answer.error == expected
        assert (img.partitions[("t", 0)].isr == (1, 2, 3)) is (expected is None)
        assert len(p.records) == (0 if expected else 1)


def test_a_config_set_to_its_value_writes_nothing_and_a_min_isr_change_clears_the_elrs():
    # ConfigurationControlManager.incrementalAlterConfig (no record for an unchanged topic key);
    # KIP-966: a dynamic MinISR change clears the ELR.
    img = image(partition(isr=(1,), elr=(2,)))
    img.apply(img.offset, ConfigRecord("topic", "t", "min.insync.replicas", 2))
    p = proposal_on(img)
    assert alter_config(p, "t", {"min.insync.replicas": 2}) is None and p.records == []
    assert alter_config(p, "t", {"min.insync.replicas": 3}) is None
    assert [type(r).__name__ for r in p.records] == ["ConfigRecord", "PartitionRecord"]
    assert img.partitions[("t", 0)].elr == () and img.partitions[("t", 0)].reason == "min_isr_changed"
