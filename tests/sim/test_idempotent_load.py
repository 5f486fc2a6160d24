"""Idempotent load producers (Kafka's enable.idempotence, on by default with acks=all since 3.0):
a batch retried after its first attempt was appended is appended once, and the producer's
sequences start again after a batch fails (KIP-360), so that the load goes on."""

from collections import Counter

import pytest

from actors.clients.producer import ProducerNode
from observability.events import FinalRead
from workloads.drivers import sim_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import LoadArgs
from workloads.steps import StepRunner, protocol_command

LOAD_PRODUCER = "load-producer-1"


def cluster(name: str, **cluster_spec):
    spec = {"brokers": 3, "controllers": 1, "config": {"min.insync.replicas": 2}, **cluster_spec}
    finals: list[FinalRead] = []

    def keep_final_reads(rec) -> None:
        if isinstance(rec.event, FinalRead):
            finals.append(rec.event)

    scenario = validate({
        "name": name,
        "cluster": spec,
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 3, "assignment": {0: [1, 2, 3]}}],
    }, "test_idempotent_load.py")
    return sim_cluster(scenario, event_sinks=[keep_final_reads]), finals


def offsets_per_record(finals: list[FinalRead]) -> Counter:
    """How many offsets of the leader's final read hold each (producer, sequence)."""
    held = Counter()
    for f in finals:
        assert f.source == "leader"
        for s in f.sequences:
            held[(f.producer, s)] += 1
    return held


def lost_answers(**load) -> tuple[Counter, ProducerNode]:
    """acks=all load while every answer of the leader (b1) to the load producer is lost for 6 s:
    the batch in flight then is appended and committed, its request times out (5 s) and is sent
    again. The load stops after 12 s, at least 3 s before the run ends, so that every batch has
    its answer by then (a batch still in flight at the end is settled as indeterminate, and
    whether one is depends on where the load's rounds fall)."""
    c, finals = cluster("lost-answers")
    c.clients.load(protocol_command("load", LoadArgs(producers=1, rate_per_s=200, acks="all", duration_ms=12_000, **load)), {"t": 1})
    producer = c.role(LOAD_PRODUCER)
    assert c.run_until(lambda: producer.acked >= 200, 10_000)
    assert c.view().partition("t-0").leader == 1
    c.link("b1", LOAD_PRODUCER, 1.0, 0.0)
    c.run_for(6_000)
    c.heal(None)
    c.run_for(8_000)
    c.clients.finish()
    return offsets_per_record(finals), producer


def test_a_retried_load_batch_is_appended_once_with_idempotence_and_twice_without():
    held, producer = lost_answers()  # acks=all: idempotent by default
    assert producer.load is None and producer.last_load.idempotent
    assert held and set(held.values()) == {1}
    assert producer.acked == len(held)  # the retry was answered with the first append's offset

    held, producer = lost_answers(idempotent=False)
    assert not producer.last_load.idempotent
    # Without idempotence every attempt is appended: the first, the retry after the request
    # timeout (its answer lost too) and the one after the heal, which is answered.
    again = {k: n for k, n in held.items() if n > 1}
    assert again and set(again.values()) == {3}, again
    assert producer.acked == len(held)


def test_load_goes_on_after_an_idempotent_batch_fails():
    """The ISR below MinISR for longer than the delivery timeout (30 s): the batch in flight fails
    NOT_ENOUGH_REPLICAS and its sequences are never written. The producer numbers from 0 again under
    a new producer id; otherwise every later batch would be refused OUT_OF_ORDER_SEQUENCE_NUMBER."""
    c, finals = cluster("sequence-reset", config={"min.insync.replicas": 2, "replica.lag.time.max.ms": 2_000})
    c.clients.load(protocol_command("load", LoadArgs(producers=1, rate_per_s=100, acks="all")), {"t": 1})
    producer = c.role(LOAD_PRODUCER)
    assert c.run_until(lambda: producer.acked >= 100, 10_000)
    c.isolate("b2")
    c.isolate("b3")
    c.run_for(40_000)
    assert producer.failed > 0
    c.heal(None)
    acked = producer.acked
    c.run_for(15_000)
    assert producer.acked > acked + 500  # acknowledged again: the new id's sequences are accepted
    assert producer.sequence_resets >= 1
    c.clients.finish()
    held = offsets_per_record(finals)
    assert set(held.values()) == {1}


@pytest.mark.parametrize(
    "load,idempotent",
    [
        ({"acks": "all"}, True),  # Kafka's default since 3.0
        ({"acks": -1}, True),
        ({"acks": 1}, False),  # with acks 0 or 1 Kafka turns the default off
        ({"acks": 0}, False),
        ({"acks": "all", "idempotent": False}, False),
        ({"acks": 1, "idempotent": False}, False),
        ({"acks": "all", "idempotent": True}, True),
    ],
)
def test_load_producers_are_idempotent_by_kafkas_default_rule(load, idempotent):
    """From the scenario file's load step to the load producer's batches."""
    scenario = validate({
        "name": "idempotence-default",
        "cluster": {"brokers": 3, "controllers": 1, "config": {"min.insync.replicas": 2}},
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}],
        "steps": [{"load": {"rate_per_s": 100, **load}}, {"wait": 3_000}],
    }, "test_idempotent_load.py")
    assert scenario.steps[0].load.idempotence() is idempotent
    c = sim_cluster(scenario)
    StepRunner(c, scenario).run()
    producer = c.role(LOAD_PRODUCER)
    assert producer.last_load.idempotent is idempotent and producer.acked > 100
    leader = c.view().partition("t-0").leader
    log = c.role(f"b{leader}").data_plane.replicas[("t", 0)].log
    assert {b.producer_id for b in log.batches} == ({1001} if idempotent else {-1})
