"""A `load` step's consumer as a real Kafka client (`load.client: librdkafka`): a confluent-kafka
Consumer inside a client node's process (a Ray actor), following every partition of the load from
offset 0, as kraftlab's own load consumer does.

The brokers' listeners serve no group coordinator (no FindCoordinator, JoinGroup or OffsetCommit),
so the consumer takes its partitions with `assign()` at explicit offsets and commits nothing. Each
record it reads is a `consume` row, named by the identity in its header (load_identity.py); the
batch it came in is filled in from the listener's `load_batch_served` row (load_join.py), so that
the checks judge its reads as a kraftlab consumer's. A record without an identity (written by
another real client, which names none) cannot be named in the history and is not recorded.
"""

from __future__ import annotations

from typing import Any

from actors.contract import Envelope, Output, StartContext
from observability.events import Consume, ConsumerDone, ConsumerSeek

from .load_identity import client_id, identity_of

TICK_MS = 10.0
MAX_RECORDS = 500  # read per tick at most
# Settings of a producer only: the load's `config` is the producers', and a consumer given one
# logs a warning for each.
PRODUCER_ONLY = ("acks", "enable.idempotence", "linger.ms", "queue.buffering.max.ms", "retries", "message.send.max.retries",
                 "delivery.timeout.ms", "message.timeout.ms", "batch.size", "batch.num.messages", "compression.type",
                 "compression.codec", "max.in.flight.requests.per.connection", "max.in.flight", "queue.buffering.max.messages",
                 "queue.buffering.max.kbytes", "retry.backoff.ms", "request.timeout.ms", "request.required.acks", "partitioner")


class KafkaLoadConsumer:
    def __init__(self, ctx: StartContext, bootstrap_servers: str) -> None:
        self.node_id = ctx.node_id
        self.servers = bootstrap_servers
        self.client: Any = None
        self.polls = 0
        self.position: dict[tuple[str, int], int] = {}  # the next offset to read, per partition
        self.unnamed = 0  # records read without an identity (not recorded)
        self.held: list[Any] = []  # read by the last step, written by the next

    def start(self, now_ms: float) -> Output:
        return Output()

    def handle(self, envelope: Envelope, now_ms: float) -> Output:
        return Output()

    def tick(self, now_ms: float) -> Output:
        """Write what the previous step read (it may have come after that step's instant, and after
        the listener's row for its batch: as the producer's reports, load_producer.py), then read."""
        out = Output()
        self._write_reads(out)
        if self.client is None:
            return out
        self.held = [m for m in self.client.consume(MAX_RECORDS, 0) if m.error() is None]
        out.next_deadline_ms = now_ms if self.held else now_ms + TICK_MS
        return out

    def _write_reads(self, out: Output) -> None:
        by_partition: dict[tuple[str, int], list[Any]] = {}
        for message in self.held:
            by_partition.setdefault((message.topic(), message.partition()), []).append(message)
        self.held = []
        if by_partition:
            for (topic, partition), messages in by_partition.items():
                for m in messages:
                    named = identity_of(m.headers())
                    if named is None:
                        self.unnamed += 1
                        continue
                    out.emit(Consume(self.node_id, self.polls, topic, partition, m.offset(), named[0], (named[1],), None, None))
                self.position[(topic, partition)] = max(self.position.get((topic, partition), 0), messages[-1].offset() + 1)
            self.polls += 1

    # --- local calls (actors/runtime/clients.py) -------------------------------------------------------

    def follow(self, partitions: list[tuple[str, int]], config: dict[str, Any], now_ms: float) -> Output:
        from confluent_kafka import Consumer, TopicPartition

        settings = {k: v for k, v in config.items() if k not in PRODUCER_ONLY}
        # A group.id librdkafka requires of a Consumer; with assign() and no commits it never
        # asks for the group's coordinator.
        settings.update({"bootstrap.servers": self.servers, "client.id": client_id(self.node_id), "group.id": f"kraftlab-{self.node_id}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "earliest"})
        self.client = Consumer(settings)
        self.client.assign([TopicPartition(t, p, 0) for t, p in partitions])
        out = Output()
        for t, p in partitions:
            self.position[(t, p)] = 0
            out.emit(ConsumerSeek(self.node_id, t, p, 0))
        out.next_deadline_ms = now_ms + TICK_MS
        return out

    def stop_following(self, caught_up: dict[tuple[str, int], bool]) -> Output:
        """The run's end (as kraftlab's load consumer's): how far it read in each partition, and
        whether that was everything committed when the catch-up began."""
        out = Output()
        self._write_reads(out)
        for (topic, partition), complete in sorted(caught_up.items()):
            out.emit(ConsumerDone(self.node_id, complete, topic, partition, self.position.get((topic, partition), 0)))
        if self.client is not None:
            self.client.close()
            self.client = None
        return out
