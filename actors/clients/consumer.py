"""The consumer client: reads committed records (below the leader's high watermark) of one
partition from its current leader, in order, and records what it read.

Every fetch answer that brings records is a *poll* (numbered per consumer from 0); every record it
read is a `consume` row of the history with the record's identity (producer, sequence) decoded from
the batch payload (records.py). The final read at the end of a run is a consumer command too
(`final_source`): it reads one partition from one given broker with FINAL_READER fetches, which any
replica answers from its own log below its own HWM, and reports `final_read` rows.

A read is `(offset, value, identity)` where identity is `(batch crc, position in batch, leader
epoch)`, what `storage.partition_log.PartitionLog.identity_at` reports: the ConsistentRead check
compares later logs against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.contract import Envelope, Output, StartContext
from actors.replication.messages import (
    CONSUMER,
    FINAL_READER,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
)
from observability.events import (
    Consume,
    ConsumeDone,
    ConsumerDone,
    ConsumerReset,
    ConsumerSeek,
    FinalRead,
    FinalReadDone,
    ListOffsetsAnswer,
)

from .records import decode_records
from .topic_ids import TopicIds

POLL_BACKOFF_MS = 100  # fetch.max.wait-like pause when there was nothing new
REQUEST_TIMEOUT_MS = 2_000


@dataclass(frozen=True, slots=True)
class ConsumeCommand:
    """Read `topic-partition` from `from_offset` until caught up with the high watermark (and, with
    `expect_count`, until at least that many records were read)."""

    command_id: int
    topic: str
    partition: int
    from_offset: int
    expect_count: int | None
    follow: bool = False  # keep reading forever (background load)
    # The final read: read from this broker (not the leader), below that replica's HWM, until
    # caught up or `deadline_ms`; `final_source` ("leader" or "replica") goes in the rows.
    broker: int | None = None
    final_source: str | None = None
    deadline_ms: float | None = None
    # False: the leader read has an HWM below its LESO, so it cannot tell yet whether its log above
    # the HWM is committed (the protocol description §6.4.2): what it answers is the committed
    # log as far as it knows, not known to be all of it.
    final_exact: bool = True


@dataclass
class Reading:
    command: ConsumeCommand
    position: int
    values: list[str] = field(default_factory=list)
    done: bool = False
    caught_up_at_hwm: int | None = None
    # The leader epoch of the last record read (Kafka's position "offset epoch"), -1 before the
    # first read or after a seek: what the leader validates the position against (KIP-320).
    last_epoch: int = -1
    # The id of the topic the position is in (None before the first answer): an answer from a
    # topic of the same name with another id means the topic was deleted and created again.
    topic_id: str | None = None


class ConsumerNode:
    def __init__(self, ctx: StartContext, brokers: list[str]) -> None:
        self.node_id = ctx.node_id
        self.brokers = brokers
        self.leaders: dict[tuple[str, int], int | None] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}
        self.topic_ids = TopicIds()
        self.readings: dict[int, Reading] = {}
        # Everything read, per partition: offset -> (value, identity). Invariant: an offset once
        # read keeps the identity it was read with here (a changed one is a ConsistentRead breach).
        self.reads: dict[tuple[str, int], dict[int, tuple[str, tuple[int, int, int]]]] = {}
        self.read_order: dict[tuple[str, int], list[int]] = {}  # the offsets of `reads`, as first read
        self.consumed = 0
        self.polls = 0
        self.next_request_id = 0
        self.in_flight: dict[int, tuple[int, float]] = {}  # command -> (request id, sent at)
        self.next_poll_ms: dict[int, float] = {}
        self.metadata_request: tuple[int, float] | None = None
        self.metadata_broker = 0
        self.list_offsets: dict[int, ListOffsetsResponse | None] = {}  # request id -> answer
        self.last_list_offsets = -1

    def start(self, now_ms: float) -> Output:
        return Output()

    def submit(self, cmd: ConsumeCommand, now_ms: float) -> Output:
        out = Output()
        self.readings[cmd.command_id] = Reading(cmd, cmd.from_offset)
        if cmd.final_source is None:
            # Where this reading starts: its polls are judged from here (a step reads again from its
            # `from`, a load consumer from 0), not against an earlier command's reads.
            out.emit(ConsumerSeek(self.node_id, cmd.topic, cmd.partition, cmd.from_offset))
        self.next_poll_ms[cmd.command_id] = now_ms
        self._poll(now_ms, out)
        return self._finish(out)

    def ask_latest_offset(self, topic: str, partition: int, broker: int, now_ms: float) -> Output:
        """A local call: send ListOffsets(latest) to `broker`; the answer lands in
        `list_offsets[last_list_offsets]`."""
        out = Output()
        self.next_request_id += 1
        self.last_list_offsets = self.next_request_id
        self.list_offsets[self.next_request_id] = None
        out.send(Envelope(self.node_id, f"b{broker}", ListOffsetsRequest(self.next_request_id, topic, partition)))
        return self._finish(out)

    def stop_following(self, caught_up: dict[tuple[str, int], bool]) -> Output:
        """A local call at the end of a run: stop every reading; for each partition of
        `caught_up` (every partition of the run), the history learns how far this consumer read
        there and whether it had read everything committed by then (`consumer_done`)."""
        out = Output()
        reached: dict[tuple[str, int], int] = {}
        for r in self.readings.values():
            r.done = True
            key = (r.command.topic, r.command.partition)
            reached[key] = max(reached.get(key, 0), r.position)
        for (topic, partition), complete in sorted(caught_up.items()):
            out.emit(ConsumerDone(self.node_id, complete, topic, partition, reached.get((topic, partition), 0)))
        return out

    def final_read_unreachable(self, topic: str, partition: int, broker: int) -> Output:
        """A local call at the end of a run: no replica of the partition runs (`broker` is one of
        them, down), so its committed log cannot be read. Its records are not lost for that (a
        stopped broker's disk holds them): the history says the final read did not complete, and
        the analysis gives no verdict on them (`valid: "unknown"`)."""
        out = Output()
        out.emit(FinalReadDone(topic, partition, "replica", broker, None, False))
        return out

    def handle(self, env: Envelope, now_ms: float) -> Output:
        out = Output()
        p = env.payload
        if isinstance(p, FetchResponse):
            self._on_fetch(p, now_ms, out)
        elif isinstance(p, ListOffsetsResponse):
            if p.request_id in self.list_offsets and self.list_offsets[p.request_id] is None:
                self.list_offsets[p.request_id] = p
                broker = int(env.src[1:])
                out.emit(ListOffsetsAnswer(p.request_id, p.topic, p.partition, broker, None if p.error else p.offset, p.error))
        elif isinstance(p, MetadataResponse):
            if self.metadata_request is not None and p.request_id == self.metadata_request[0]:
                self.metadata_request = None
                for topic in self.topic_ids.learn(p):
                    self._forget_topic(topic)
                for pm in p.partitions:
                    key = (pm.topic, pm.partition)
                    # Metadata from a broker that is behind (an older leader epoch) is ignored, as
                    # Kafka clients do.
                    if pm.leader_epoch >= self.leader_epochs.get(key, -1):
                        self.leader_epochs[key] = pm.leader_epoch
                        self.leaders[key] = pm.leader
        self._poll(now_ms, out)
        return self._finish(out)

    def tick(self, now_ms: float) -> Output:
        out = Output()
        if self.metadata_request is not None and now_ms >= self.metadata_request[1] + REQUEST_TIMEOUT_MS:
            self.metadata_request = None  # the next ask goes to the next broker
        for cid, (_, sent) in list(self.in_flight.items()):
            if now_ms >= sent + REQUEST_TIMEOUT_MS:
                del self.in_flight[cid]
                self.leaders.pop((self.readings[cid].command.topic, self.readings[cid].command.partition), None)
        for r in self.readings.values():
            c = r.command
            if c.final_source is not None and not r.done and c.deadline_ms is not None and now_ms >= c.deadline_ms:
                self._end_final_read(r, None, out)
        self._poll(now_ms, out)
        return self._finish(out)

    def _finish(self, out: Output) -> Output:
        deadlines = [sent + REQUEST_TIMEOUT_MS for _, sent in self.in_flight.values()]
        deadlines += [t for cid, t in self.next_poll_ms.items() if not self.readings[cid].done and cid not in self.in_flight]
        deadlines += [r.command.deadline_ms for r in self.readings.values() if not r.done and r.command.deadline_ms is not None]
        if self.metadata_request is not None:
            deadlines.append(self.metadata_request[1] + REQUEST_TIMEOUT_MS)
        out.next_deadline_ms = min(deadlines) if deadlines else None
        return out

    def _poll(self, now_ms: float, out: Output) -> None:
        for cid, r in self.readings.items():
            if r.done or cid in self.in_flight or self.next_poll_ms.get(cid, 0) > now_ms:
                continue
            key = (r.command.topic, r.command.partition)
            leader = r.command.broker if r.command.broker is not None else self.leaders.get(key)
            if leader is None:
                self._ask_metadata(now_ms, out)
                self.next_poll_ms[cid] = now_ms + POLL_BACKOFF_MS
                continue
            self.next_request_id += 1
            self.in_flight[cid] = (self.next_request_id, now_ms)
            reader = FINAL_READER if r.command.final_source is not None else CONSUMER
            last_epoch = r.last_epoch if r.command.final_source is None else -1
            req = FetchRequest(self.next_request_id, reader, -1, 0, (FetchPartition(key[0], key[1], -1, r.position, last_epoch),))
            out.send(Envelope(self.node_id, f"b{leader}", req))

    def _forget_topic(self, topic: str) -> None:
        """The topic was created again: the leaders and epochs known were the old topic's."""
        for key in [k for k in self.leader_epochs if k[0] == topic]:
            del self.leader_epochs[key]
            self.leaders.pop(key, None)

    def _ask_metadata(self, now_ms: float, out: Output) -> None:
        if self.metadata_request is not None:
            return
        self.next_request_id += 1
        self.metadata_request = (self.next_request_id, now_ms)
        target = self.brokers[self.metadata_broker % len(self.brokers)]
        self.metadata_broker += 1
        out.send(Envelope(self.node_id, target, MetadataRequest(self.next_request_id)))

    def _on_fetch(self, resp: FetchResponse, now_ms: float, out: Output) -> None:
        cid = next((c for c, (rid, _) in self.in_flight.items() if rid == resp.request_id), None)
        if cid is None:
            return
        del self.in_flight[cid]
        r = self.readings[cid]
        (fp,) = resp.partitions
        key = (fp.topic, fp.partition)
        c = r.command
        if fp.topic_id is not None and r.topic_id != fp.topic_id:
            if r.topic_id is not None:
                self._on_topic_recreated(cid, r, now_ms, out)
                return
            r.topic_id = fp.topic_id
        if fp.diverging_epoch is not None:
            self._on_log_truncation(cid, r, fp.diverging_epoch, now_ms, out)
            return
        if fp.error is not None:
            if c.final_source is not None:
                self._end_final_read(r, None, out)
                return
            self.leaders.pop(key, None)
            self.next_poll_ms[cid] = now_ms + POLL_BACKOFF_MS
            return
        if c.final_source is not None:
            self._on_final_read(cid, r, fp, now_ms, out)
            return
        got = 0
        seen = self.reads.setdefault(key, {})
        order = self.read_order.setdefault(key, [])
        poll = self.polls
        for b in fp.batches:
            if b.next_offset <= r.position or b.base_offset > r.position:
                continue  # already read; or a gap (never from a leader's log): read again from there
            producer, sequences, values = decode_records(b.records)
            start = r.position - b.base_offset
            for i in range(start, b.count):
                offset = b.base_offset + i
                if offset not in seen:  # the first read of an offset is what it must stay
                    order.append(offset)
                    seen[offset] = (values[i], (b.crc, i, b.leader_epoch))
            r.values.extend(values[start:])
            out.emit(Consume(self.node_id, poll, key[0], key[1], r.position, producer, sequences[start:], b.base_offset, b.crc, fp.topic_id))
            got += b.count - start
            r.position = b.next_offset
            r.last_epoch = b.leader_epoch
        if got:
            self.polls += 1
        self.consumed += got
        # A read is done once it has caught up with the HWM (everything committed was read) and,
        # when a count is expected, has at least that many: more committed records than expected
        # are read too, so that the step can tell.
        caught_up = got == 0 and r.position >= fp.high_watermark
        if not c.follow and caught_up and (c.expect_count is None or len(r.values) >= c.expect_count):
            r.done = True
            r.caught_up_at_hwm = fp.high_watermark
            out.emit(ConsumeDone(c.command_id, len(r.values)))
        self.next_poll_ms[cid] = now_ms if got else now_ms + POLL_BACKOFF_MS

    def _on_log_truncation(self, cid: int, r: Reading, diverging: tuple[int, int], now_ms: float, out: Output) -> None:
        """The leader's log ends the epoch of the last record read before this reading's position:
        what was read there is gone. As Kafka's consumer with an offset reset policy does
        (SubscriptionState.maybeCompleteValidation, "Truncation detected ... resetting offset to
        the first offset known to diverge"), move back to where that epoch ends now, or, when the
        leader has no epoch up to it, to the earliest offset (kraftlab's consumers read from the
        beginning, as `auto.offset.reset=earliest`); then read on from there."""
        epoch, end = diverging
        known = epoch >= 0 and end >= 0
        c = r.command
        out.emit(ConsumerReset(self.node_id, c.topic, c.partition, r.position, end if known else 0, epoch, "log_truncation"))
        # The leader answers so only when the epoch ends below the position: always a step back.
        r.position, r.last_epoch = (end, epoch) if known else (0, -1)
        self.next_poll_ms[cid] = now_ms

    def _on_topic_recreated(self, cid: int, r: Reading, now_ms: float, out: Output) -> None:
        """The partition's topic was deleted and created again: the position was in a log that is
        gone. Read the new topic from its earliest offset (`auto.offset.reset=earliest`), as a
        Kafka consumer does when the topic id behind a partition changes; what was read of the old
        topic is no part of the new one."""
        c = r.command
        key = (c.topic, c.partition)
        out.emit(ConsumerReset(self.node_id, c.topic, c.partition, r.position, 0, -1, "topic_recreated"))
        r.position, r.last_epoch, r.topic_id = 0, -1, None
        self.reads.pop(key, None)
        self.read_order.pop(key, None)
        self.next_poll_ms[cid] = now_ms

    # --- the final read --------------------------------------------------------------------------

    def _on_final_read(self, cid: int, r: Reading, fp, now_ms: float, out: Output) -> None:
        c = r.command
        got = 0
        for b in fp.batches:
            if b.next_offset <= r.position or b.base_offset > r.position:
                continue
            producer, sequences, _values = decode_records(b.records)
            start = r.position - b.base_offset
            out.emit(FinalRead(c.topic, c.partition, c.final_source, c.broker, r.position, producer, sequences[start:], b.base_offset, b.crc, fp.topic_id))
            got += b.count - start
            r.position = b.next_offset
        if got == 0 and r.position >= fp.high_watermark:
            # From a replica (no acting leader), what lies below its HWM is committed, but the
            # committed log may go on above it unless the HWM is its log end.
            exact = c.final_exact and (c.final_source != "replica" or fp.high_watermark >= fp.log_end_offset)
            self._end_final_read(r, fp.high_watermark, out, complete=exact)
            return
        self.next_poll_ms[cid] = now_ms

    def _end_final_read(self, r: Reading, hwm: int | None, out: Output, *, complete: bool = True) -> None:
        """`hwm` None: the broker did not answer (in time) or had no such replica."""
        r.done = True
        c = r.command
        out.emit(FinalReadDone(c.topic, c.partition, c.final_source, c.broker, hwm, hwm is not None and complete))
