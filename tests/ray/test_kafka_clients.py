"""Real Kafka clients against an emulated cluster on Ray (`cluster.listeners: [kafka]`,
actors/runtime/kafka/): confluent-kafka (librdkafka 2.16) and kcat (librdkafka 2.0, Debian's)
produce to and consume from the brokers' Kafka listeners, follow a leader that moved, and what
they were told is in the run's history like a kraftlab client's records. First, on a cluster of
its own, an idempotent producer writes through a leader's crash and a partition of the next
leader from the other brokers; then the other tests share one cluster."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from workloads.drivers import ray_cluster
from workloads.scenario.loading import validate

pytestmark = pytest.mark.ray

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(local_ray):
    scenario = validate({
        "name": "kafka-clients", "runtime": "ray",
        "cluster": {"brokers": 3, "controllers": 3, "listeners": ["kafka"], "config": {"min.insync.replicas": 2}},
        "topics": [{"name": "t", "partitions": PARTITIONS, "replication_factor": 3}],
    }, "test_kafka_clients.py")
    c = ray_cluster(scenario)
    assert c.run_until(lambda: all(p.leader is not None for p in c.view().partitions().values())
                       and len(c.view().partitions()) == PARTITIONS, 60_000)
    yield c
    c.close()


def produce(servers: str, records: list[tuple[int, bytes]], **config) -> list[tuple[KafkaError | None, int, int]]:
    outcomes = []
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000, **config})
    for partition, value in records:
        producer.produce("t", value=value, partition=partition,
                         on_delivery=lambda err, msg: outcomes.append((err, msg.partition(), msg.offset())))
    assert producer.flush(90) == 0
    return outcomes


def consume(servers: str, partition: int, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "kraftlab-test", "enable.auto.commit": False})
    consumer.assign([TopicPartition("t", partition, 0)])
    read: list[tuple[int, bytes]] = []
    try:
        for _ in range(200):
            if len(read) >= expected:
                break
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return read


def read_to(servers: str, partition: int, end: int) -> list[tuple[int, bytes]]:
    """Every record of the partition from offset 0 until `end` (bounded: 300 s of polls)."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "kraftlab-test", "enable.auto.commit": False})
    consumer.assign([TopicPartition("t", partition, 0)])
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 300
    try:
        while (not read or read[-1][0] < end - 1) and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    read.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return read


class SteadyProducer:
    """An idempotent acks=all confluent-kafka producer writing numbered records to one partition
    from a thread of its own, as an application would while the cluster is being broken; the
    delivery reports say which were acknowledged."""

    def __init__(self, servers: str, partition: int, prefix: str) -> None:
        self.partition, self.prefix = partition, prefix
        self.producer = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 300_000})
        self.acked: list[tuple[int, bytes]] = []
        self.failed: list[tuple[bytes, str]] = []
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.offset(), msg.value()))
        else:
            self.failed.append((msg.value(), err.str()))

    def _run(self) -> None:
        while not self.stop.is_set():
            self.producer.produce("t", value=f"{self.prefix}{self.sent}".encode(), partition=self.partition, on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0.02)

    def finish(self) -> int:
        """Stop producing; the records still queued, after every retry (0: none)."""
        self.stop.set()
        self.thread.join(30)
        return self.producer.flush(360)


@pytest.fixture(scope="module")
def through_faults(local_ray):
    """With ELR on, a cluster of its own: an idempotent acks=all producer writes to t-1 while its
    leader's host crashes (OS crash: the page cache lost) and comes back, and then while the next
    leader is cut off from the other brokers (the controllers still reach everyone: the ISR shrinks
    to the leader and acks=all cannot be satisfied) and healed. Then the partition is read to its
    end. What the producer was told, what was read and what the history says, taken before the
    cluster is closed (so that it does not outlive this fixture's tests)."""
    scenario = validate({
        "name": "kafka-clients-faults", "runtime": "ray",
        "cluster": {"brokers": 3, "controllers": 3, "listeners": ["kafka"], "config": {"min.insync.replicas": 2},
                    "protocol": {"elr": True}},
        "topics": [{"name": "t", "partitions": PARTITIONS, "replication_factor": 3}],
    }, "test_kafka_clients.py")
    c = ray_cluster(scenario)
    key = "t-1"
    try:
        assert c.run_until(lambda: len(c.view().partitions()) == PARTITIONS and all(p.leader is not None for p in c.view().partitions().values()),
                           60_000)
        servers = c.bootstrap_servers
        producer = SteadyProducer(servers, 1, "steady-")
        try:
            def acked_at_least(n: int) -> bool:
                return len(producer.acked) >= n

            assert c.run_until(lambda: acked_at_least(50), 60_000), producer.failed[:5]
            first = c.view().partitions()[key].leader
            c.crash(f"b{first}", "os")
            assert c.run_until(lambda: c.view().partitions()[key].leader not in (None, first), 60_000)
            c.restart(f"b{first}")
            assert c.run_until(lambda: len(c.view().partitions()[key].isr) == 3, 120_000)
            crashed = len(producer.acked)
            assert c.run_until(lambda: acked_at_least(crashed + 50), 120_000), producer.failed[:5]

            # The leader now is cut off from the other brokers (nodes in no group keep their links).
            second = c.view().partitions()[key].leader
            c.partition([[f"b{second}"], [f"b{b}" for b in c.view().brokers() if b != second]])
            assert c.run_until(lambda: c.view().partitions()[key].isr == [second], 120_000), c.view().partitions()[key]
            c.heal(None)
            assert c.run_until(lambda: len(c.view().partitions()[key].isr) == 3, 120_000)
            healed = len(producer.acked)
            assert c.run_until(lambda: acked_at_least(healed + 50), 120_000), producer.failed[:5]
        finally:
            queued = producer.finish()
        read = [(offset, value) for offset, value in read_to(servers, 1, max(dict(producer.acked), default=0) + 1)
                if value.startswith(b"steady-")]
        c.clients.finish()  # the run's end: producers settled, every partition read to its end
        c.refresh()
        view = c.view()
        return SimpleNamespace(producer=producer, queued=queued, read=read, history=view.history(), lost=lost_batches(view),
                               violations=c.violations())
    finally:
        c.close()


def test_an_idempotent_producer_through_a_leader_crash_and_a_partition_has_each_acknowledged_record_read_back_once(through_faults):
    run = through_faults
    producer = run.producer
    # Every record was delivered in the end (librdkafka retried through both faults).
    assert run.queued == 0 and producer.failed == [], (run.queued, producer.failed[:5])
    acked = dict(producer.acked)
    assert len(acked) == len(producer.acked) == producer.sent  # each acknowledged once, at an offset of its own
    # Read to the partition's end: each acknowledged record at its offset, and no record twice.
    assert [v for v, n in Counter(v for _, v in run.read).items() if n > 1] == []
    assert dict(run.read) == acked


def test_the_history_of_that_run_counts_every_record_acknowledged_and_none_lost(through_faults):
    run = through_faults
    assert run.history["acked"] >= len(run.producer.acked)
    assert run.history["acked_lost"] == 0, run.lost
    assert run.violations == []


def lost_batches(view) -> list[str]:
    """The history's acknowledged batches it does not find in their partition's log, with the
    batch the log has at that offset (for the assertion's message)."""
    out = []
    for name, p in view.producers.items():
        for b in p.acked_batches:
            logs = view.holders((b.topic, b.partition))
            if b.acks == "all" and not any(log.holds(b.base_offset, b.count, b.crc) for log in logs):
                there = [(log.bases[i], log.counts[i], log.crcs[i]) if (i := log.batch_index(b.base_offset)) is not None else None
                         for log in logs]
                out.append(f"{name}: {b.topic}-{b.partition} base {b.base_offset} count {b.count} crc {b.crc}; the logs have {there}")
    return out


def test_a_confluent_kafka_producer_and_consumer_round_trip_through_the_listeners(cluster):
    servers = cluster.bootstrap_servers
    assert servers is not None and len(servers.split(",")) == 3
    records = [(i % PARTITIONS, f"confluent-{i}".encode()) for i in range(90)]
    outcomes = produce(servers, records)
    assert [err for err, _, _ in outcomes if err is not None] == []
    # Each partition's acknowledged offsets are its records in the order they were produced.
    for partition in range(PARTITIONS):
        sent = [value for p, value in records if p == partition]
        offsets = sorted(offset for _, p, offset in outcomes if p == partition)
        read = consume(servers, partition, offsets[-1] + 1)
        assert [value for offset, value in read if offset in offsets] == sent
    # The idempotent producer (InitProducerId, sequence numbers checked by the leader).
    idempotent = produce(servers, [(1, f"idempotent-{i}".encode()) for i in range(30)], **{"enable.idempotence": True})
    assert [err for err, _, _ in idempotent if err is not None] == []
    offsets = sorted(offset for _, _, offset in idempotent)
    assert offsets == list(range(offsets[0], offsets[0] + 30))
    # A gzip batch is read back as written (the value compresses well: librdkafka sends a batch
    # uncompressed when compressing does not pay). Other codecs: tests/unit/test_kafka_gateway.py.
    big = b"kraftlab " * 2_000
    [(err, partition, offset)] = produce(servers, [(0, big)], **{"compression.type": "gzip"})
    assert err is None and (offset, big) in consume(servers, partition, offset + 1)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (.ci/run installs Debian's)")
def test_kcat_lists_the_cluster_and_round_trips_records(cluster):
    servers = cluster.bootstrap_servers
    listing = subprocess.run(["kcat", "-b", servers, "-L", "-t", "t"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert " 3 brokers:" in listing and f'topic "t" with {PARTITIONS} partitions:' in listing
    lines = [f"kcat-{i}" for i in range(20)]
    subprocess.run(["kcat", "-b", servers, "-P", "-t", "t", "-p", "1", "-X", "acks=all"], input="\n".join(lines) + "\n",
                   text=True, timeout=60, check=True)
    read = subprocess.run(["kcat", "-b", servers, "-C", "-t", "t", "-p", "1", "-o", "beginning", "-e", "-f", "%s\\n"],
                          capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert [line for line in read if line.startswith("kcat-")] == lines


def test_a_producer_follows_the_leader_after_a_crash_and_the_history_counts_what_it_was_told(cluster):
    servers = cluster.bootstrap_servers
    leader = cluster.view().partitions()["t-2"].leader
    cluster.crash(f"b{leader}", "process")
    assert cluster.run_until(lambda: cluster.view().partitions()["t-2"].leader not in (None, leader), 60_000)
    outcomes = produce(servers, [(2, f"after-crash-{i}".encode()) for i in range(30)])
    assert [err for err, _, _ in outcomes if err is not None] == []
    # A consumer reads them from the new leader (validating its position there: OffsetForLeaderEpoch).
    last = max(offset for _, _, offset in outcomes)
    read = [value for _, value in consume(servers, 2, last + 1)]
    assert [v for v in read if v.startswith(b"after-crash-")] == [f"after-crash-{i}".encode() for i in range(30)]
    cluster.restart(f"b{leader}")
    assert cluster.run_until(lambda: not cluster.view().brokers()[leader].fenced, 60_000)
    cluster.refresh()
    history = cluster.view().history()
    # Every record a Kafka client was told was written is an acknowledged record of the history.
    assert history.get("acked") >= 90 + 30 + 1 + 20 + 30


def test_a_pure_python_client_round_trips_records(cluster):
    """kafka-python, the protocol library the listeners use, as a client too (its own
    ApiVersions negotiation, RecordBatch v2, fetch and offset lookups)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as PyTopicPartition

    servers = cluster.bootstrap_servers.split(",")
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=5)
    metadata = [producer.send("t", value=f"python-{i}".encode(), partition=0).get(timeout=60) for i in range(20)]
    producer.close()
    offsets = [m.offset for m in metadata]
    assert offsets == list(range(offsets[0], offsets[0] + 20))
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, consumer_timeout_ms=10_000)
    partition = PyTopicPartition("t", 0)
    consumer.assign([partition])
    consumer.seek(partition, offsets[0])
    read = [(m.offset, m.value) for _, m in zip(range(20), consumer, strict=False)]
    consumer.close()
    assert read == [(offsets[0] + i, f"python-{i}".encode()) for i in range(20)]


def test_at_the_end_every_record_a_client_was_told_was_written_is_in_the_final_read(cluster):
    """Last in this module: the run's end as `kraftlab run` makes it (producers settled, every
    partition read to its end), with the records of Kafka clients among them."""
    cluster.clients.finish()
    cluster.refresh()
    history = cluster.view().history()
    assert history.get("acked") >= 90 + 30 + 1 + 20 + 30 + 20
    assert history.get("acked_lost") == 0
    assert cluster.violations() == []
