"""Small hand-built histories, written exactly as runs write them: typed events
(observability/events.py) through the project's writer (observability/history.py), so the files
have the real columns and types."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from observability.events import (
    Consume,
    ConsumerDone,
    ConsumerSeek,
    EventRecord,
    FinalRead,
    FinalReadDone,
    ProduceAck,
    ProduceSend,
)
from observability.history import HistoryWriter, events_table

PRODUCER = "p1"
LOAD_CONSUMER = "load-consumer-1"
STEP_CONSUMER = "consumer"


class History:
    """Events in order; each node numbers its rows from 0 (per incarnation), as drivers do."""

    def __init__(self) -> None:
        self.records: list[EventRecord] = []
        self.next_seq: dict[tuple[str, int], int] = defaultdict(int)
        self.clock = 0.0
        self.polls: dict[str, int] = defaultdict(int)

    def add(self, node: str, event, *, skip_seq: int = 0, at: float | None = None, incarnation: int = 0) -> History:
        """`skip_seq`: leave that many `node_seq` numbers out first (lost rows); `at`: the row's
        time_ms (default: 1 ms after the previous row); `incarnation`: the node's (0: its first start)."""
        key = (node, incarnation)
        self.next_seq[key] += skip_seq
        self.clock = at if at is not None else self.clock + 1.0
        self.records.append(EventRecord(self.clock, node, incarnation, self.next_seq[key], event))
        self.next_seq[key] += event.row_count
        return self

    def produce(self, seqs, offset: int | None, outcome: str = "ok", topic: str = "t", partition: int = 0) -> History:
        seqs = tuple(seqs)
        self.add(PRODUCER, ProduceSend(PRODUCER, topic, partition, "all", seqs))
        latencies = tuple(10.0 + s for s in seqs)
        first = offset if outcome == "ok" else None
        return self.add(PRODUCER, ProduceAck(PRODUCER, topic, partition, "all", outcome, seqs, latencies, first, 7 if first is not None else None))

    def consume(self, consumer: str, first_offset: int, seqs, topic: str = "t", partition: int = 0, poll: int | None = None) -> History:
        """One poll of `consumer` reading `seqs` at `first_offset`..., a new poll unless given."""
        if poll is None:
            poll = self.polls[consumer]
            self.polls[consumer] += 1
        return self.add(consumer, Consume(consumer, poll, topic, partition, first_offset, PRODUCER, tuple(seqs), first_offset, 7))

    def seek(self, consumer: str, offset: int, topic: str = "t", partition: int = 0) -> History:
        """Where `consumer` starts reading (kraftlab's consumers write one at each reading's start)."""
        return self.add(consumer, ConsumerSeek(consumer, topic, partition, offset))

    def consumer_done(self, consumer: str = LOAD_CONSUMER, complete: bool = True, reached: int | None = None,
                      topic: str = "t", partition: int = 0) -> History:
        """`consumer` stopped at the end; with `reached`, the row of one partition as kraftlab's
        load consumers write it (the next offset it would have read there), else one row of the
        consumer alone."""
        if reached is None:
            return self.add(consumer, ConsumerDone(consumer, complete))
        return self.add(consumer, ConsumerDone(consumer, complete, topic, partition, reached))

    def final(self, first_offset: int, seqs, topic: str = "t", partition: int = 0, broker: int = 1) -> History:
        return self.add(STEP_CONSUMER, FinalRead(topic, partition, "leader", broker, first_offset, PRODUCER, tuple(seqs), first_offset, 7))

    def final_done(self, complete: bool = True, topic: str = "t", partition: int = 0, broker: int = 1, hwm: int | None = 5) -> History:
        return self.add(STEP_CONSUMER, FinalReadDone(topic, partition, "leader", broker, hwm if complete else None, complete))

    def write(self, run_dir: Path, file_per_node: bool = False) -> Path:
        """The history as kraftlab's writer leaves a short run's (one file), or with a file per node."""
        events = Path(run_dir) / "events"
        if file_per_node:
            events.mkdir(parents=True, exist_ok=True)
            for node in dict.fromkeys(rec.node for rec in self.records):
                pq.write_table(events_table([rec for rec in self.records if rec.node == node]), events / f"{node}-00000.parquet")
            return Path(run_dir)
        writer = HistoryWriter(events)
        for rec in self.records:
            writer(rec)
        writer.close()
        return Path(run_dir)


def produced(n: int = 5) -> History:
    """`n` records acknowledged ok at offsets 0..n-1 of t-0."""
    return History().produce(range(n), 0)


def clean() -> History:
    """Five records acknowledged, read in order by a load consumer in two polls, all in the
    final read: nothing to report."""
    return (produced().consume(LOAD_CONSUMER, 0, range(3)).consume(LOAD_CONSUMER, 3, range(3, 5))
            .consumer_done().final(0, range(5)).final_done())
