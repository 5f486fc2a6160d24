"""A `load` step's producer as a real Kafka client (`load.client: librdkafka`): a confluent-kafka
Producer inside a client node's process (a Ray actor), writing open-loop load to the brokers' Kafka
listeners.

The role keeps kraftlab's client contract (actors/contract.py): the driver ticks it, and it emits
the history's rows. The load is offered as kraftlab's own load generator offers it (records due
by the rate on a 10 ms grid, round-robin over the partitions, idle during a `pause_load`); each
record is handed to `Producer.produce()` with its identity in a header (load_identity.py), a
`produce_send` row when librdkafka takes it, and a `produce_ack` row when its delivery report
comes: "ok" with its offset, or the error. That report is the acknowledgement, as Jepsen counts
what a client was told; the listener that appended the record writes no row of its own for it.
A record librdkafka refuses at once (its queue is full: BufferError) is never offered, as a
record kraftlab's generator does not offer while its send() is blocked: `load_throttled`.

Not a sans-I/O role: librdkafka does its own I/O on its own threads. The driver's clock is read
through `now_ms` as for every role, which is the instant a step began: a delivery report served
during a step (`Producer.poll(0)`) may have come after that instant, and after the listener's row
about the same batch. So reports are held and written at the next step, which begins at once and
whose instant is surely after them (the history stays causal: load_join.py relies on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from actors.contract import Envelope, Output, StartContext
from observability.events import LoadFinished, LoadPaused, LoadStarted, LoadThrottled, ProduceAck, ProduceSend

from .load_identity import client_id, header

TICK_MS = 10.0  # as kraftlab's load generator's rounds (actors/clients/load_generator.py)
# The run's end: how long librdkafka gets to deliver what it holds before the rest is purged.
SETTLE_S = 5.0
RUN_ENDED = "RUN_ENDED"


@dataclass
class Plan:
    partitions: list[tuple[str, int]]
    rate_per_s: float
    message_bytes: int
    acks: str
    start_ms: float
    until_ms: float | None
    generated: int = 0
    pauses: list[tuple[float, float]] = field(default_factory=list)

    def due(self, now_ms: float) -> int:
        """Records that have come due by now and were not offered yet (time paused not counted)."""
        end = now_ms if self.until_ms is None else min(now_ms, self.until_ms)
        paused = sum(max(0.0, min(end, to) - max(self.start_ms, since)) for since, to in self.pauses)
        return int((end - self.start_ms - paused) * self.rate_per_s / 1000.0) + 1 - self.generated


def outcome_of(error: Any) -> str:
    """"fail" when librdkafka surely never wrote the record, else "info" (a request may have been
    appended: a timeout, an error after retries, a purge of what was in flight)."""
    from confluent_kafka import KafkaError

    never_sent = {KafkaError._PURGE_QUEUE, KafkaError._TIMED_OUT_QUEUE, KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._UNKNOWN_PARTITION,
                  KafkaError._UNKNOWN_TOPIC, KafkaError._QUEUE_FULL}
    return "fail" if error.code() in never_sent else "info"


class KafkaLoadProducer:
    def __init__(self, ctx: StartContext, bootstrap_servers: str) -> None:
        self.node_id = ctx.node_id
        self.servers = bootstrap_servers
        self.client: Any = None  # the confluent_kafka.Producer, made by `start_load`
        self.plan: Plan | None = None
        self.next_sequence = 0
        self.pending: dict[int, tuple[str, int, float]] = {}  # sequence -> (topic, partition, handed over at)
        self.reports: list[tuple[int, Any, int]] = []  # (sequence, error, offset), as librdkafka calls back
        self.acks = "all"
        self.ended = False  # the run's end (`abandon`): what is still pending is written off at the next step

    # --- the role contract ------------------------------------------------------------------------

    def start(self, now_ms: float) -> Output:
        return Output()

    def handle(self, envelope: Envelope, now_ms: float) -> Output:
        return Output()  # it speaks Kafka's protocol, not kraftlab's

    def tick(self, now_ms: float) -> Output:
        out = Output()
        self._write_reports(now_ms, out)
        if self.ended:
            for sequence, (topic, partition, sent_ms) in sorted(self.pending.items()):
                out.emit(ProduceAck(self.node_id, topic, partition, self.acks, "info", (sequence,), (now_ms - sent_ms,), error=RUN_ENDED))
            self.pending.clear()
            return out
        self._generate(now_ms, out)
        if self.client is not None:
            self.client.poll(0)  # librdkafka calls `_delivered` for each report it holds
        return self._finish(now_ms, out)

    # --- local calls (actors/runtime/clients.py) -------------------------------------------------------

    def start_load(self, partitions: list[tuple[str, int]], rate_per_s: float, message_bytes: int, until_ms: float | None,
                   config: dict[str, Any], now_ms: float) -> Output:
        from confluent_kafka import Producer

        self.acks = str(config.get("acks", "all"))
        settings = {**config, "bootstrap.servers": self.servers, "client.id": client_id(self.node_id)}
        self.client = Producer(settings)
        self.plan = Plan(list(partitions), rate_per_s, message_bytes, self.acks, now_ms, until_ms)
        out = Output()
        out.emit(LoadStarted(rate_per_s, len(partitions), self.acks, bool(config.get("enable.idempotence", False))))
        self._generate(now_ms, out)
        return self._finish(now_ms, out)

    def pause_load(self, now_ms: float, for_ms: float) -> Output:
        out = Output()
        if self.plan is not None:
            self.plan.pauses.append((now_ms, now_ms + for_ms))
            out.emit(LoadPaused(for_ms))
        return self._finish(now_ms, out)

    def abandon(self, now_ms: float) -> Output:
        """The run's end: no more records; librdkafka gets `SETTLE_S` to deliver what it holds,
        then the rest is purged, so that every `produce_send` has its `produce_ack` ("fail" for
        a record never sent, "info" for one that may have been), written at the next step."""
        out = Output()
        self._write_reports(now_ms, out)
        self._stop(out)
        if self.client is not None:
            self.client.flush(SETTLE_S)
            self.client.purge(in_queue=True, in_flight=True, blocking=False)
            self.client.flush(0)
        self.ended = True
        out.next_deadline_ms = now_ms
        return out

    # --- the load --------------------------------------------------------------------------------------

    def _generate(self, now_ms: float, out: Output) -> None:
        plan = self.plan
        if plan is None:
            return
        due = plan.due(now_ms)
        pad = "x" * max(0, plan.message_bytes - 16)
        handed: dict[tuple[str, int], list[int]] = {}
        throttled = 0
        for i in range(max(due, 0)):
            topic, partition = plan.partitions[plan.generated % len(plan.partitions)]
            plan.generated += 1
            sequence = self.next_sequence
            value = f"{self.node_id}-{sequence}-{pad}"[:max(plan.message_bytes, 8)]
            try:
                self.client.produce(topic, value=value.encode(), partition=partition, headers=[header(self.node_id, sequence)],
                                    on_delivery=partial(self._delivered, sequence))
            except BufferError:  # librdkafka's queue is full: the rest of what is due is not offered
                throttled = due - i
                plan.generated += throttled - 1
                break
            self.next_sequence += 1
            self.pending[sequence] = (topic, partition, now_ms)
            handed.setdefault((topic, partition), []).append(sequence)
        for (topic, partition), sequences in handed.items():
            out.emit(ProduceSend(self.node_id, topic, partition, self.acks, tuple(sequences)))
        if throttled:
            out.emit(LoadThrottled(throttled))
        if plan.until_ms is not None and now_ms >= plan.until_ms:
            self._stop(out)

    def _stop(self, out: Output) -> None:
        if self.plan is not None:
            out.emit(LoadFinished(self.plan.generated))
            self.plan = None

    def _delivered(self, sequence: int, error: Any, message: Any) -> None:
        self.reports.append((sequence, error, message.offset() if error is None else -1))

    def _write_reports(self, now_ms: float, out: Output) -> None:
        """The delivery reports served before this step began, as `produce_ack` rows."""
        reports, self.reports = self.reports, []
        for sequence, error, offset in reports:
            sent = self.pending.pop(sequence, None)
            if sent is None:
                continue
            topic, partition, sent_ms = sent
            latency = (now_ms - sent_ms,)
            if error is None:
                # acks=0: librdkafka reports no offset (-1); the batch is filled in from the
                # listener's row (load_join.py).
                out.emit(ProduceAck(self.node_id, topic, partition, self.acks, "ok", (sequence,), latency, offset if offset >= 0 else None))
            else:
                out.emit(ProduceAck(self.node_id, topic, partition, self.acks, outcome_of(error), (sequence,), latency, error=error.name()))

    def _finish(self, now_ms: float, out: Output) -> Output:
        if self.reports:
            out.next_deadline_ms = now_ms  # written at once, by a step that begins after them
        elif self.plan is not None or self.pending:
            out.next_deadline_ms = now_ms + TICK_MS
        return out
