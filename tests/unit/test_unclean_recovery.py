"""KIP-966 unclean recovery, one strategy at a time (the KIP-966 article, "Unclean
Recovery"; the protocol description §6.8): when each one triggers, whose logs it inspects, how
long it waits, and whom it elects."""

import pytest

from controller_quorum.metadata import RECOVERING, BrokerRegistration, PartitionRecord
from controller_quorum.unclean_recovery import (
    Inquiry,
    LogInfo,
    UncleanRecovery,
    choose_leader,
    normalize_strategy,
    plan_recovery,
    recovered_partition,
)


def brokers(fenced=()):
    return {b: BrokerRegistration(b, 10 + b, None, b in fenced) for b in (1, 2, 3)}


def offline(isr=(), elr=(), lkelr=()):
    return PartitionRecord("t", 0, (1, 2, 3), isr, elr, lkelr, None, 5, 7)


def logs(**ends):
    """logs(b1=(epoch, leo), ...) as answers from each broker's current session."""
    return {int(k[1:]): LogInfo(int(k[1:]), 10 + int(k[1:]), e, leo) for k, (e, leo) in ends.items()}


def test_both_spellings_are_accepted():
    assert [normalize_strategy(s) for s in ("proactive", "aggressive", "manual", "none", "balanced")] == [
        "aggressive", "aggressive", "none", "none", "balanced",
    ]


# --- balanced: safety first ------------------------------------------------------------------


def test_balanced_waits_while_an_elr_member_may_come_back():
    assert plan_recovery(offline(elr=(2,), lkelr=(1,)), brokers(fenced=(2,)), "balanced") is None


def test_balanced_inspects_the_last_known_elr_once_isr_and_elr_are_empty():
    assert plan_recovery(offline(lkelr=(1, 2)), brokers(), "balanced") == (1, 2)


def test_balanced_inspects_every_replica_when_the_last_known_elr_is_empty():
    assert plan_recovery(offline(), brokers(), "balanced") == (1, 2, 3)


def test_balanced_waits_for_every_candidate_then_takes_the_most_complete_log():
    answers = logs(b1=(3, 40))
    assert choose_leader((1, 2), answers, brokers(), "balanced", window_over=True) is None  # b2 not heard yet
    answers |= logs(b2=(3, 55))
    assert choose_leader((1, 2), answers, brokers(), "balanced", window_over=False) == 2


def test_balanced_prefers_the_later_epoch_over_the_longer_log():
    assert choose_leader((1, 2), logs(b1=(2, 90), b2=(3, 50)), brokers(), "balanced", window_over=False) == 2


def test_an_answer_from_an_ended_broker_session_does_not_count():
    stale = {1: LogInfo(1, 5, 3, 99), **logs(b2=(3, 10))}  # b1 answered with epoch 5, registered as 11
    assert choose_leader((1, 2), stale, brokers(), "balanced", window_over=True) is None


def test_a_candidate_whose_answer_is_from_an_ended_session_is_asked_again():
    """Found by the switches-kip-903 campaign (seed 1): a broker answered the inquiry from a session
    that then ended (it crashed, or answered before registering again); once it registers, the
    inquiry must ask its new session, or balanced recovery waits forever for an answer that counts."""
    recovery = UncleanRecovery("balanced")
    inq = recovery.inquiries[("t", 0)] = Inquiry(7, (1, 2), started_ms=0.0)
    first = {(key, b) for key, b, _ in recovery.to_ask(0.0, brokers())}
    assert first == {(("t", 0), 1), (("t", 0), 2)}
    inq.answers |= logs(b1=(3, 40), b2=(3, 55))
    assert recovery.to_ask(10.0, brokers()) == []  # both answered from their current sessions
    now = brokers() | {2: BrokerRegistration(2, 99, None, False)}  # b2 registered again
    assert choose_leader((1, 2), inq.answers, now, "balanced", window_over=True) is None
    asked = recovery.to_ask(20.0, now)  # at once, not QUERY_RETRY_MS after the first ask
    assert [(key, b) for key, b, _ in asked] == [(("t", 0), 2)]
    assert 2 not in inq.answers
    inq.answers[2] = LogInfo(2, 99, 3, 20)  # the new session's answer (its log lost a suffix)
    assert choose_leader((1, 2), inq.answers, now, "balanced", window_over=True) == 1


def test_a_fenced_candidate_is_not_elected():
    assert choose_leader((1, 2), logs(b1=(3, 90), b2=(3, 10)), brokers(fenced=(1,)), "balanced", window_over=True) is None


# --- aggressive (proactive): availability first --------------------------------------------------


def test_aggressive_triggers_when_every_elr_member_is_fenced():
    assert plan_recovery(offline(elr=(1, 2)), brokers(fenced=(1, 2)), "aggressive") == (1, 2, 3)
    assert plan_recovery(offline(elr=(1, 2)), brokers(fenced=(1,)), "proactive") is None  # b2 can lead cleanly


def test_aggressive_chooses_among_the_answers_once_the_window_is_over():
    answers = logs(b3=(1, 4))
    assert choose_leader((1, 2, 3), answers, brokers(fenced=(1, 2)), "aggressive", window_over=False) is None
    assert choose_leader((1, 2, 3), answers, brokers(fenced=(1, 2)), "aggressive", window_over=True) == 3


def test_aggressive_does_not_wait_for_the_window_when_everyone_answered():
    assert choose_leader((1, 2, 3), logs(b1=(1, 4), b2=(1, 9), b3=(1, 4)), brokers(), "aggressive", window_over=False) == 2


# --- none (manual) and last_known_leader ---------------------------------------------------------


@pytest.mark.parametrize("strategy", ["none", "manual"])
def test_manual_never_recovers_on_its_own(strategy):
    assert plan_recovery(offline(lkelr=(1, 2)), brokers(), strategy) is None
    assert plan_recovery(offline(elr=(1,)), brokers(fenced=(1,)), strategy) is None


def test_last_known_leader_elects_the_last_known_leader_without_inspecting_logs():
    assert plan_recovery(offline(lkelr=(2,)), brokers(), "last_known_leader") == (2,)
    assert choose_leader((2,), {}, brokers(), "last_known_leader", window_over=False) == 2
    assert choose_leader((2,), {}, brokers(fenced=(2,)), "last_known_leader", window_over=False) is None


# --- the election record --------------------------------------------------------------------


def test_no_recovery_while_a_clean_leader_exists_or_an_isr_member_is_live():
    led = PartitionRecord("t", 0, (1, 2, 3), (1,), (), (), 1, 5, 7)
    assert plan_recovery(led, brokers(), "aggressive") is None
    assert plan_recovery(offline(isr=(2,)), brokers(), "aggressive") is None


def test_the_recovered_leader_leads_alone_recovering_with_bumped_epochs():
    new = recovered_partition(offline(lkelr=(1, 2)), 2, "balanced")
    assert (new.leader, new.isr, new.elr) == (2, (2,), ())
    assert (new.leader_epoch, new.partition_epoch) == (6, 8)
    assert new.leader_recovery_state == RECOVERING and new.election == "unclean"


def test_the_lastknownelr_keeps_its_other_members_until_the_isr_reaches_min_isr():
    """KIP-966, Balanced mode: "The LastKnownELR is cleaned when ISR reaches the Min ISR". Cleared
    at the recovery, a later one (the new leader's log lost in turn) would elect it again, empty,
    while broker 1, which may hold every committed record, was up."""
    assert recovered_partition(offline(lkelr=(1, 2)), 2, "balanced").last_known_elr == (1,)
    assert recovered_partition(offline(lkelr=(1, 2)), 2, "aggressive").last_known_elr == (1,)
    assert recovered_partition(offline(lkelr=(1,)), 1, "last_known_leader").last_known_elr == ()  # shipped Kafka


def test_the_last_known_leader_strategy_elects_with_its_own_kind():
    new = recovered_partition(offline(lkelr=(1,)), 1, "last_known_leader")
    assert (new.leader, new.isr, new.leader_recovery_state) == (1, (1,), RECOVERING)
    assert new.election == "last_known_leader"  # unclean: counted in elections_unclean


def test_last_known_leader_recovery_elects_the_leader_recorded_when_the_isr_emptied():
    """The partition-change side (LastKnownELR = [last leader] when a change empties the ISR, even
    with ELR members left) feeding this strategy: once unclean shutdowns empty the ELR, recovery
    elects that leader, and only that one."""
    from controller_quorum.partition_change import ChangePolicy, change_partition

    policy = ChangePolicy(min_isr=2, elr_enabled=True, unclean_leader_election=False, last_known_leader_only=True)
    p = PartitionRecord("t", 0, (1, 2, 3), (1,), (2,), (), 1, 5, 7)
    p = change_partition(p, brokers(fenced=(1, 2, 3)), policy, reason="fenced", remove=1)
    assert (p.isr, p.elr, p.last_known_elr) == ((), (1, 2), (1,))
    assert plan_recovery(p, brokers(fenced=(1, 2, 3)), "last_known_leader") is None  # the ELR may come back
    p = change_partition(p, brokers(fenced=(1, 2, 3)), policy, reason="unclean_shutdown", unclean_shutdown=frozenset({1, 2}))
    assert (p.isr, p.elr, p.last_known_elr, p.leader) == ((), (), (1,), None)
    candidates = plan_recovery(p, brokers(fenced=(1, 2)), "last_known_leader")
    assert candidates == (1,)
    assert choose_leader(candidates, {}, brokers(fenced=(1, 2)), "last_known_leader", window_over=False) is None
    assert choose_leader(candidates, {}, brokers(fenced=(2,)), "last_known_leader", window_over=False) == 1


def test_the_image_indexes_its_leaderless_partitions_as_records_apply():
    """What unclean recovery scans (MetadataImage.leaderless) follows every partition record."""
    from controller_quorum.metadata import MetadataImage

    image = MetadataImage()
    led = PartitionRecord("t", 1, (1, 2, 3), (1, 2), (), (), 1, 5, 7)
    image.apply(0, offline(elr=(2,)))
    image.apply(1, led)
    assert list(image.leaderless) == [("t", 0)]
    image.apply(2, PartitionRecord("t", 0, (1, 2, 3), (2,), (), (), 2, 6, 8))
    image.apply(3, PartitionRecord("t", 1, (1, 2, 3), (), (1, 2), (), None, 5, 8))
    assert list(image.leaderless) == [("t", 1)]
    assert list(image.copy().leaderless) == [("t", 1)]  # a copy rebuilds it from its partitions
