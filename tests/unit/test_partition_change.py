"""The controller's partition changes: ELR cases A-G of the KIP-966 article
("Replica completeness guarantee"), the legacy Last Replica Standing, unclean shutdowns and
elections, and the epochs (the protocol description §6.3)."""

from controller_quorum.metadata import RECOVERING, BrokerRegistration, PartitionRecord
from controller_quorum.partition_change import ChangePolicy, change_partition

ELR_ON = ChangePolicy(min_isr=2, elr_enabled=True, unclean_leader_election=False)
ELR_OFF = ChangePolicy(min_isr=2, elr_enabled=False, unclean_leader_election=False)


def brokers(fenced=(), shutting_down=()):
    return {b: BrokerRegistration(b, 10 + b, None, b in fenced, b in shutting_down) for b in (1, 2, 3)}


def part(leader=1, isr=(1, 2, 3), elr=(), lkelr=(), replicas=(1, 2, 3)):
    return PartitionRecord("t", 0, replicas, isr, elr, lkelr, leader, 5, 7)


def fence(p, broker, policy=ELR_ON, fenced=None):
    return change_partition(p, brokers(fenced=fenced if fenced is not None else (broker,)), policy, reason="fenced", remove=broker)


def test_case_f_removed_while_the_isr_stays_at_min_isr_gives_no_elr_membership():
    new = fence(part(), 3)
    assert (new.isr, new.elr, new.leader) == ((1, 2), (), 1)


def test_case_a_a_follower_removed_below_min_isr_enters_the_elr():
    new = fence(part(isr=(1, 2)), 2)
    assert (new.isr, new.elr, new.leader) == ((1,), (2,), 1)


def test_case_c_a_fenced_leader_whose_removal_empties_the_isr_enters_the_elr():
    new = fence(part(isr=(1,), elr=(2,)), 1, fenced=(1, 2))
    assert (new.leader, new.isr, new.elr) == (None, (), (1, 2))
    assert new.leader_epoch == 6  # the leader changed (to none)


def test_case_d_a_fenced_leader_replaced_with_the_isr_still_at_min_isr_gives_no_elr():
    new = fence(part(isr=(1, 2, 3)), 1)
    assert (new.leader, new.isr, new.elr) == (2, (2, 3), ())


def test_case_b_an_unfenced_elr_member_is_elected_and_moves_to_the_isr():
    offline = part(leader=None, isr=(), elr=(1, 2))
    new = change_partition(offline, brokers(fenced=(1, 3)), ELR_ON, reason="broker_unfenced")
    assert (new.leader, new.isr, new.elr, new.election) == (2, (2,), (1,), "elr")


def test_an_election_from_the_elr_has_its_own_kind_and_one_from_the_isr_stays_clean():
    # Kafka 4.1 counts these apart (ElectionFromEligibleLeaderReplicasPerSec); both are clean.
    from_elr = change_partition(part(leader=None, isr=(), elr=(2, 3)), brokers(fenced=(1, 2)), ELR_ON, reason="broker_unfenced")
    assert (from_elr.leader, from_elr.isr, from_elr.elr, from_elr.election) == (3, (3,), (2,), "elr")
    assert from_elr.leader_recovery_state != RECOVERING
    from_isr = fence(part(isr=(1, 2), elr=(3,)), 1)
    assert (from_isr.leader, from_isr.isr, from_isr.election) == (2, (2,), "clean")


def test_case_e_and_g_isr_expansion_to_min_isr_empties_the_elr():
    p = part(leader=2, isr=(2,), elr=(1,), lkelr=(3,))
    new = change_partition(p, brokers(), ELR_ON, reason="alter_partition", target_isr=(2, 3))
    assert (new.isr, new.elr, new.last_known_elr, new.leader) == ((2, 3), (), (), 2)
    assert new.leader_epoch == p.leader_epoch and new.partition_epoch == p.partition_epoch + 1


def test_an_unclean_shutdown_moves_a_replica_from_the_elr_to_the_last_known_elr():
    offline = part(leader=None, isr=(), elr=(1, 2))
    new = change_partition(offline, brokers(fenced=(1, 2)), ELR_ON, reason="unclean_shutdown", unclean_shutdown=frozenset({1}))
    assert (new.elr, new.last_known_elr, new.leader) == ((2,), (1,), None)


def test_with_elr_off_the_last_replica_standing_stays_in_the_isr_when_fenced():
    new = fence(part(isr=(1,)), 1, policy=ELR_OFF)
    assert (new.leader, new.isr, new.elr) == (None, (1,), ())


def test_with_elr_off_no_replica_enters_an_elr():
    new = fence(part(isr=(1, 2)), 2, policy=ELR_OFF)
    assert (new.isr, new.elr) == ((1,), ())


def test_legacy_unclean_election_takes_an_out_of_sync_replica_and_marks_it_recovering():
    policy = ChangePolicy(min_isr=2, elr_enabled=False, unclean_leader_election=True)
    offline = part(leader=None, isr=(1,))
    new = change_partition(offline, brokers(fenced=(1,)), policy, reason="broker_unfenced")
    assert (new.leader, new.isr, new.election, new.leader_recovery_state) == (2, (2,), "unclean", RECOVERING)


def test_without_unclean_election_an_offline_partition_stays_offline():
    offline = part(leader=None, isr=(1,))
    assert change_partition(offline, brokers(fenced=(1,)), ELR_OFF, reason="broker_unfenced") is None


def test_preferred_election_moves_leadership_back_to_the_first_replica():
    p = part(leader=2, isr=(1, 2, 3))
    new = change_partition(p, brokers(), ELR_ON, reason="elect_preferred", election="preferred")
    assert (new.leader, new.leader_epoch) == (1, 6)
    assert new.election == "preferred"  # the documented election kind; a clean election


def test_a_broker_in_controlled_shutdown_is_not_a_leader_candidate():
    new = change_partition(part(), brokers(shutting_down=(1,)), ELR_ON, reason="controlled_shutdown", remove=1)
    assert (new.leader, new.isr) == (2, (2, 3))


def test_no_change_returns_none():
    assert change_partition(part(), brokers(), ELR_ON, reason="noop") is None


def test_the_metadata_invariants_catch_a_bad_shape_a_fenced_isr_member_and_an_epoch_going_back():
    from observability.checks import MetadataChecks
    from observability.events import BrokerChange, EventRecord, PartitionChange

    checks = MetadataChecks(elr_enabled=True)
    offset = iter(range(10, 100))

    def commit(*events):
        for ev in events:
            ev = ev._replace(metadata_offset=next(offset))
            for voter in ("c1", "c2"):  # every voter reports each record
                checks(EventRecord(0.0, voter, 0, 0, ev))
        return set(checks.check())

    def state(isr, elr=(), leader_epoch=5, partition_epoch=7):
        return PartitionChange("t", 0, 1, leader_epoch, partition_epoch, (1, 2, 3), isr, elr, (), 0, False, 2, "RECOVERED", "test")

    assert commit(BrokerChange(3, 4, True, 0), state(isr=(1, 2), elr=(3,))) == {"IsrElrShape"}  # ELR not empty while ISR >= MinISR
    assert commit(state(isr=(1, 3), partition_epoch=8)) == {"NoFencedInIsr"}
    assert commit(state(isr=(1, 2), leader_epoch=1, partition_epoch=9)) == {"MonotonicEpochs"}
    assert checks.check() == {}  # nothing new committed: nothing re-checked
    # A broker fenced and taken out of the ISR by records committed together is never judged in between.
    assert commit(state(isr=(1, 2), leader_epoch=6, partition_epoch=10)) == set()
    assert commit(BrokerChange(2, 5, True, 0), state(isr=(1,), elr=(2,), leader_epoch=6, partition_epoch=11)) == set()


# --- LastKnownELR under unclean.recovery.strategy=last_known_leader (Kafka's
# PartitionChangeBuilder.maybeUpdateLastKnownLeader) ------------------------------------------------

LAST_KNOWN_LEADER = ChangePolicy(min_isr=2, elr_enabled=True, unclean_leader_election=False, last_known_leader_only=True)


def test_last_known_leader_is_recorded_when_a_change_empties_the_isr_even_with_an_elr():
    p = fence(part(), 3, policy=LAST_KNOWN_LEADER)
    assert (p.isr, p.elr, p.last_known_elr, p.leader) == ((1, 2), (), (), 1)
    p = fence(p, 2, policy=LAST_KNOWN_LEADER, fenced=(2, 3))
    assert (p.isr, p.elr, p.last_known_elr, p.leader) == ((1,), (2,), (), 1)
    p = fence(p, 1, policy=LAST_KNOWN_LEADER, fenced=(1, 2, 3))
    assert (p.isr, p.elr, p.last_known_elr, p.leader) == ((), (1, 2), (1,), None)
    # It stays while the partition is leaderless: an ELR member lost to an unclean shutdown...
    p = change_partition(p, brokers(fenced=(1, 2, 3)), LAST_KNOWN_LEADER, reason="unclean_shutdown", unclean_shutdown=frozenset({2}))
    assert (p.isr, p.elr, p.last_known_elr, p.leader) == ((), (1,), (1,), None)
    # ... and it is cleared once the partition has a leader again (here an ELR member).
    p = change_partition(p, brokers(fenced=(2, 3)), LAST_KNOWN_LEADER, reason="broker_unfenced")
    assert (p.isr, p.elr, p.last_known_elr, p.leader) == ((1,), (), (), 1)


def test_last_known_leader_is_not_rewritten_when_it_already_holds_just_that_leader():
    p = part(leader=1, isr=(1,), elr=(2,), lkelr=(1,))
    new = fence(p, 1, policy=LAST_KNOWN_LEADER, fenced=(1, 2))
    assert (new.isr, new.elr, new.last_known_elr, new.leader) == ((), (1, 2), (1,), None)


def test_last_known_leader_stays_while_the_partition_keeps_its_leader():
    # Kafka 4.2 on (maybeUpdateLastKnownLeader): only a new leader clears it; before 4.2 a change
    # that kept the leader cleared it too.
    p = part(leader=1, isr=(1,), elr=(), lkelr=(3,))
    new = change_partition(p, brokers(), LAST_KNOWN_LEADER, reason="alter_partition", target_isr=(1, 2))
    assert (new.isr, new.last_known_elr, new.leader) == ((1, 2), (3,), 1)


def test_last_known_leader_is_recorded_when_the_partition_first_loses_its_leader_even_with_an_isr():
    # PartitionChangeBuilderTest.testEligibleLeaderReplicas_lastKnownElrShouldBePopulatedWhenNoLeader
    # (also a script, tests/unit/testdata/partition_change/): no acceptable replica, the ISR kept.
    p = part(leader=1, isr=(1,), elr=(2,))
    new = change_partition(p, brokers(fenced=(1, 2, 3)), LAST_KNOWN_LEADER, reason="elect", election="preferred")
    assert (new.isr, new.elr, new.last_known_elr, new.leader) == ((1,), (2,), (1,), None)
