"""A partition replica's rules, one at a time, on the pure PartitionReplica (actors/replication/
replica.py). Sections are the protocol description's unless named otherwise."""


from actors.contract import Output
from actors.replication.messages import (
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    OFFSET_NOT_AVAILABLE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    STALE_BROKER_EPOCH,
    FetchedPartition,
    FetchPartition,
    ProduceRequest,
    ProduceResponse,
)
from actors.replication.replica import PartitionReplica
from controller_quorum.metadata import BrokerRegistration, MetadataImage, PartitionRecord
from controller_quorum.requests import AlterPartitionRequest, AlterPartitionResponse
from storage.codec import pack
from storage.partition_log import PartitionLog, RecordBatch
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec

EPOCHS = {1: 10, 2: 20, 3: 30}


class Env:
    """The broker around a replica: broker 1, brokers 1-3 registered and unfenced, MinISR 2."""

    def __init__(self, **protocol):
        self.node_id, self.broker_id, self.broker_epoch = "b1", 1, EPOCHS[1]
        spec = ClusterSpec.model_validate({"config": {"min.insync.replicas": 2}, "protocol": protocol})
        self.settings = cluster_settings(spec)
        self.image = MetadataImage(brokers={b: BrokerRegistration(b, e, None, False) for b, e in EPOCHS.items()})
        self.sync_flush = False
        self.to_controller: list = []

    def min_isr(self, topic, rf):
        return min(2, rf)

    def send_to_controller(self, payload, out):
        self.to_controller.append(payload)


def leader(isr=(1, 2, 3), log=None, hwm=0, **protocol):
    env = Env(**protocol)
    r = PartitionReplica(env, "t", 0, log or PartitionLog("partitions/t-0"), hwm)
    r.become_leader(PartitionRecord("t", 0, (1, 2, 3), tuple(isr), (), (), 1, 5, 7), 0.0, Output())
    return r, env


def produce(r, n, acks=-1, now=0.0, pid=-1, seq=-1):
    out = Output()
    batch = RecordBatch.of(pack([f"v{i}" for i in range(n)]), n, pid, seq)
    r.on_produce("client", ProduceRequest(1, "t", 0, acks, 30_000, batch), now, out)
    return [e.payload for e in out.sends if isinstance(e.payload, ProduceResponse)]


def fetch(r, follower, offset, now=0.0, epoch=None, last_epoch=-1, broker_epoch=None):
    out = Output()
    fp = FetchPartition("t", 0, r.leader_epoch if epoch is None else epoch, offset, last_epoch)
    ans = r.on_follower_fetch(fp, follower, EPOCHS[follower] if broker_epoch is None else broker_epoch, now, out)
    return ans, out


# --- the high watermark (§6.5.4; the replication deep dive "How the high watermark moves") ---


def test_a_fetch_at_offset_x_confirms_only_what_is_below_x():
    r, _ = leader()
    produce(r, 3)
    fetch(r, 2, 0)
    fetch(r, 3, 0)
    assert r.hwm == 0  # T2-T3: they got the records, but have not confirmed them
    fetch(r, 2, 3)
    assert r.hwm == 0  # T5: R3 has not confirmed yet
    fetch(r, 3, 3)
    assert r.hwm == 3  # T6


def test_the_hwm_never_passes_a_maximal_isr_member_and_ignores_out_of_sync_replicas():
    r, _ = leader(isr=(1, 2))
    produce(r, 5)
    fetch(r, 2, 5)
    assert r.hwm == 5  # replica 3 is not in the ISR: it does not hold the HWM back


def test_strict_min_isr_freezes_the_hwm_while_the_committed_isr_is_below_min_isr():
    r, _ = leader(isr=(1,))
    produce(r, 3, acks=1)
    assert r.hwm == 0  # KIP-966 / Kafka >= 3.7
    r_old, _ = leader(isr=(1,), strict_min_isr=False)
    produce(r_old, 3, acks=1)
    assert r_old.hwm == 3  # before 3.7 a lone leader advanced it


# --- acks (the replication deep dive "acks") ------------------------------------------------


def test_acks_all_is_refused_up_front_while_the_isr_is_below_min_isr():
    r, _ = leader(isr=(1,))
    (resp,) = produce(r, 1)
    assert resp.error == NOT_ENOUGH_REPLICAS and r.leo == 0


def test_acks_all_waits_for_the_hwm_and_acks_1_does_not():
    r, _ = leader(isr=(1, 2))
    assert produce(r, 2) == []
    assert [p.error for p in produce(r, 2, acks=1)] == [None]
    out = Output()
    r.on_follower_fetch(FetchPartition("t", 0, 5, 4), 2, EPOCHS[2], 0.0, out)
    assert sorted(p.base_offset for p in (e.payload for e in out.sends)) == [0]


def test_waiting_acks_all_requests_fail_when_the_isr_shrinks_below_min_isr():
    r, _ = leader(isr=(1, 2))
    produce(r, 2)
    out = Output()
    r.on_partition_change(PartitionRecord("t", 0, (1, 2, 3), (1,), (2,), (), 1, 5, 8), 0.0, out)
    assert [e.payload.error for e in out.sends] == [NOT_ENOUGH_REPLICAS_AFTER_APPEND]


def test_an_idempotent_retry_is_answered_with_the_original_offset():
    r, _ = leader(isr=(1, 2))
    produce(r, 2, acks=1, pid=9, seq=0)
    (again,) = produce(r, 2, acks=1, pid=9, seq=0)
    assert again.error is None and again.base_offset == 0 and r.leo == 2


def test_an_idempotent_batch_must_follow_the_producers_last_one():
    r, _ = leader(isr=(1, 2))
    produce(r, 2, acks=1, pid=9, seq=0)
    (gap,) = produce(r, 2, acks=1, pid=9, seq=5)
    (old,) = produce(r, 1, acks=1, pid=9, seq=1)  # not the last batch's base: not a retry of it
    assert gap.error == old.error == OUT_OF_ORDER_SEQUENCE_NUMBER and r.leo == 2
    (next_,) = produce(r, 2, acks=1, pid=9, seq=2)
    assert next_.error is None and next_.base_offset == 2


def test_a_producer_the_log_holds_nothing_of_may_start_at_any_sequence():
    """Kafka >= 2.5 (KIP-360): no state for the producer (its batches lost with a page cache or
    truncated away): the batch is taken, and its sequences are the producer's from then on."""
    r, _ = leader(isr=(1, 2))
    (first,) = produce(r, 2, acks=1, pid=9, seq=40)
    assert first.error is None and r.leo == 2
    (retry,) = produce(r, 2, acks=1, pid=9, seq=40)
    assert retry.error is None and retry.base_offset == 0 and r.leo == 2


def test_a_new_leader_answers_a_retry_of_a_batch_it_replicated_with_the_original_offset():
    """The producer state comes from the log, so a follower that fetched the batch and then leads
    recognises the producer's retry (the answer of the old leader was lost)."""
    log = PartitionLog("partitions/t-0")
    log.append(RecordBatch.of(pack(["a", "b"]), 2, 9, 0).stamped(0, 3), Output())
    r, _ = leader(isr=(1, 2), log=log, hwm=2)
    (retry,) = produce(r, 2, acks=1, pid=9, seq=0)
    assert retry.error is None and retry.base_offset == 0 and r.leo == 2


# --- ISR changes (§6.5.1-6.5.4) -----------------------------------------------------------------


def test_an_out_of_sync_follower_joins_only_at_max_hwm_leso_with_a_fetch_in_this_epoch():
    log = PartitionLog("partitions/t-0")
    out = Output()
    for base in (0, 2):
        log.append(RecordBatch.of(pack(["a", "b"]), 2, -1, -1).stamped(base, 3), out)
    r, env = leader(isr=(1, 2), log=log, hwm=2)  # elected with LEO 4: LESO 4, local HWM 2 (stale)
    assert r.leso == 4
    fetch(r, 3, 2)
    assert r.pending_isr is None  # reached the local HWM but not the LESO (§6.5.3)
    fetch(r, 3, 4, epoch=4)
    assert r.pending_isr is None  # a fetch from an older leader epoch is refused altogether
    fetch(r, 3, 4)
    assert r.pending_isr == (1, 2, 3)
    (req,) = [p for p in env.to_controller if isinstance(p, AlterPartitionRequest)]
    assert req.partition_epoch == 7 and dict(req.new_isr)[3] == EPOCHS[3]


def test_the_maximal_isr_counts_a_proposed_member_at_once_and_rolls_back_on_rejection():
    r, _ = leader(isr=(1, 2))
    fetch(r, 3, 0)
    assert r.pending_isr == (1, 2, 3) and r.maximal_isr() == {1, 2, 3}
    produce(r, 10)
    fetch(r, 2, 10)
    assert r.hwm == 0  # §6.5.2: r3 in the Maximal ISR holds the HWM back
    r.on_alter_partition_response(AlterPartitionResponse("INELIGIBLE_REPLICA", "t", 0, request_leader_epoch=5, request_partition_epoch=7), 0.0, Output())
    assert r.pending_isr is None and r.maximal_isr() == {1, 2}


def test_a_late_refusal_of_an_attempt_since_retried_does_not_roll_the_maximal_isr_back():
    """Hunt seed 200998: the leader proposed r3 (attempt 1) while r3 was fenced; the refusal was
    slow to come back, the leader retried (attempt 2) and the controller committed [1, 2, 3].
    The late refusal of attempt 1 then rolled the leader back to [1, 2] while the controller's ISR
    held r3 (ReplicationQuorumSuperset). Kafka never delivers it: a retried request's connection
    is closed. Only the latest attempt's refusal counts (an acceptance is the committed state)."""
    r, env = leader(isr=(1, 2))
    fetch(r, 3, 0)
    first = env.to_controller[-1]
    r.tick(r.alter_sent_ms + 1_000, Output())  # no answer within the retry interval: sent again
    retry = env.to_controller[-1]
    assert (first.attempt, retry.attempt) == (1, 2) and retry.new_isr == first.new_isr
    late = AlterPartitionResponse("INELIGIBLE_REPLICA", "t", 0, request_leader_epoch=5, request_partition_epoch=7, request_attempt=1)
    r.on_alter_partition_response(late, 1_500.0, Output())
    assert r.pending_isr == (1, 2, 3) and r.maximal_isr() == {1, 2, 3}
    new = PartitionRecord("t", 0, (1, 2, 3), (1, 2, 3), (), (), 1, 5, 8)
    r.on_alter_partition_response(AlterPartitionResponse(None, "t", 0, new, request_leader_epoch=5, request_partition_epoch=7, request_attempt=2), 1_600.0, Output())
    assert r.isr == (1, 2, 3) and r.pending_isr is None


def test_without_the_maximal_isr_a_proposed_member_is_not_counted_until_committed():
    r, _ = leader(isr=(1, 2), maximal_isr=False)
    fetch(r, 3, 0)
    produce(r, 10)
    fetch(r, 2, 10)
    assert r.hwm == 10  # §6.5.2 "without the eager application": acknowledged without r3


def test_a_committed_expansion_becomes_the_isr():
    r, _ = leader(isr=(1, 2))
    fetch(r, 3, 0)
    new = PartitionRecord("t", 0, (1, 2, 3), (1, 2, 3), (), (), 1, 5, 8)
    r.on_alter_partition_response(AlterPartitionResponse(None, "t", 0, new, request_leader_epoch=5, request_partition_epoch=7), 0.0, Output())
    assert r.isr == (1, 2, 3) and r.partition_epoch == 8 and r.pending_isr is None


def test_a_follower_that_has_not_caught_up_for_the_lag_time_is_proposed_out():
    r, _ = leader(isr=(1, 2, 3))
    produce(r, 1)
    fetch(r, 2, 1, now=29_000.0)
    r.maybe_shrink_isr(31_000.0, Output())
    assert r.pending_isr == (1, 2)  # 3 never caught up in 30 s (replica.lag.time.max.ms)


def test_a_fetch_with_a_stale_broker_epoch_is_refused_kip_903():
    r, _ = leader(isr=(1, 2))
    ans, _ = fetch(r, 3, 0, broker_epoch=EPOCHS[3] - 5)
    assert ans.error == STALE_BROKER_EPOCH and r.pending_isr is None


def test_without_kip_903_a_stale_broker_epoch_gets_in():
    r, env = leader(isr=(1, 2), broker_epoch_in_alter_partition=False)
    fetch(r, 3, 0, broker_epoch=EPOCHS[3] - 5)
    assert r.pending_isr == (1, 2, 3)


# --- ListOffsets (§6.4.2) ---------------------------------------------------------------------


def test_list_offsets_is_unavailable_until_the_hwm_reaches_the_leso():
    log = PartitionLog("partitions/t-0")
    log.append(RecordBatch.of(pack(["a"]), 1, -1, -1).stamped(0, 3), Output())
    r, _ = leader(isr=(1, 2), log=log, hwm=0)
    assert r.list_offsets_latest(1, Output()).error == OFFSET_NOT_AVAILABLE
    fetch(r, 2, 1)
    assert r.hwm == 1 and r.list_offsets_latest(2, Output()).offset == 1


# --- followers: divergence and truncation (§6.6) -------------------------------------------------


def follower(values_epochs, hwm=0, **protocol):
    env = Env(**protocol)
    env.node_id, env.broker_id = "b2", 2
    log, out = PartitionLog("partitions/t-0"), Output()
    for values, epoch in values_epochs:
        log.append(RecordBatch.of(pack(values), len(values), -1, -1).stamped(log.end_offset, epoch), out)
    r = PartitionReplica(env, "t", 0, log, hwm)
    r.become_follower(PartitionRecord("t", 0, (1, 2, 3), (1, 2, 3), (), (), 1, 5, 7), 0.0, Output())
    return r


def test_the_leader_reports_divergence_and_the_follower_truncates_to_the_common_epoch_end():
    lead, _ = leader(isr=(1, 2, 3))
    lead.log.append(RecordBatch.of(pack(["a", "b"]), 2, -1, -1).stamped(0, 2), Output())  # leader: epoch 2 [0, 2)
    f = follower([(["a", "b"], 2), (["x", "y"], 3)])  # follower: epoch 3 [2, 4) the leader never had
    ans, _ = fetch(lead, 2, f.leo, last_epoch=f.log.last_epoch_of_batches())
    assert ans.diverging_epoch == (2, 2)
    f.on_fetched(ans, 0.0, Output())
    assert f.leo == 2 and f.log.epochs == [(2, 0)]


def test_a_follower_takes_the_leaders_hwm_even_when_it_is_lower():
    f = follower([(["a", "b", "c"], 1)], hwm=3)
    f.on_fetched(FetchedPartition("t", 0, None, high_watermark=1, log_end_offset=3), 0.0, Output())
    assert f.hwm == 1  # §6.4: a follower's local HWM is not monotonic


def test_without_leader_epoch_truncation_a_follower_cuts_to_its_local_hwm():
    f = follower([(["a"], 1), (["b", "c"], 1)], hwm=1, leader_epoch_truncation=False)
    assert f.leo == 1  # before KIP-101: everything above the local HWM is dropped on becoming follower
    g = follower([(["a"], 1), (["b", "c"], 1)], hwm=1)
    assert g.leo == 3 and g.fetch_position().last_fetched_epoch == 1


def test_records_are_appended_from_the_fetch_offset_and_the_epoch_cache_follows():
    f = follower([(["a"], 1)])
    batches = (RecordBatch.of(pack(["b", "c"]), 2, -1, -1).stamped(1, 4),)
    f.on_fetched(FetchedPartition("t", 0, None, 3, 3, batches=batches), 0.0, Output())
    assert f.leo == 3 and f.hwm == 3 and f.log.epochs == [(1, 0), (4, 1)]




def test_a_stale_version_refusal_keeps_the_maximal_isr_until_the_metadata_says():
    """The refused request may be a retry of one the controller already committed (its answer
    lost): rolling back would let the leader replicate to less than the controller's ISR."""
    r, _ = leader(isr=(1, 2))
    fetch(r, 3, 0)
    r.on_alter_partition_response(AlterPartitionResponse("INVALID_UPDATE_VERSION", "t", 0, request_leader_epoch=5, request_partition_epoch=7), 0.0, Output())
    assert r.maximal_isr() == {1, 2, 3} and r.next_deadline() == 5_000.0  # wait for metadata (or ask again later)
    r.on_partition_change(PartitionRecord("t", 0, (1, 2, 3), (1, 2, 3), (), (), 1, 5, 8), 0.0, Output())
    assert r.isr == (1, 2, 3) and r.pending_isr is None


def test_a_late_answer_to_an_earlier_proposal_is_ignored():
    r, _ = leader(isr=(1, 2))
    fetch(r, 3, 0)
    late = AlterPartitionResponse("INVALID_UPDATE_VERSION", "t", 0, request_leader_epoch=5, request_partition_epoch=6)
    r.on_alter_partition_response(late, 0.0, Output())
    assert not r.awaiting_metadata and r.next_deadline() is not None  # still retrying its own
