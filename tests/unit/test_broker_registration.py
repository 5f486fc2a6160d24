"""A broker keeps at most one registration in flight (Kafka's BrokerLifecycleManager): every
registration the controller accepts is a new broker epoch, so sending another before the answer
would make the first answer's epoch stale at once (on a loaded Ray, with answers slower than the
resend interval, it looped)."""

import random

from actors.broker_node import REGISTRATION_TIMEOUT_MS, BrokerNode
from actors.contract import Envelope, StartContext
from controller_quorum.requests import BrokerRegistrationRequest, BrokerRegistrationResponse
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec


def broker() -> BrokerNode:
    settings = cluster_settings(ClusterSpec.model_validate({"brokers": 3, "controllers": 1}))
    b = BrokerNode(StartContext("b1", {}, None, random.Random(0)), settings)
    b.start(0.0)
    b.controller = "c1"  # as if the metadata log named its leader
    return b


def registrations(out) -> list[BrokerRegistrationRequest]:
    return [e.payload for e in out.sends if isinstance(e.payload, BrokerRegistrationRequest)]


def run_ticks(b: BrokerNode, start_ms: float, end_ms: float) -> list[BrokerRegistrationRequest]:
    sent, t = [], start_ms
    while t <= end_ms:
        sent += registrations(b.tick(t))
        t += 50
    return sent


def test_no_second_registration_before_the_answer_or_the_timeout():
    b = broker()
    first = run_ticks(b, 0, REGISTRATION_TIMEOUT_MS - 50)
    assert len(first) == 1
    b.handle(Envelope("c1", "b1", BrokerRegistrationResponse(None, 7, request_id=first[0].request_id)), 1_900.0)
    assert b.epoch == 7


def test_after_a_timeout_only_the_latest_attempts_answer_counts():
    b = broker()
    sent = run_ticks(b, 0, REGISTRATION_TIMEOUT_MS + 50)
    assert [r.request_id for r in sent] == [1, 2]
    b.handle(Envelope("c1", "b1", BrokerRegistrationResponse(None, 7, request_id=1)), 2_100.0)
    assert b.epoch is None  # epoch 7 belongs to an attempt given up on
    b.handle(Envelope("c1", "b1", BrokerRegistrationResponse(None, 9, request_id=2)), 2_200.0)
    assert b.epoch == 9
