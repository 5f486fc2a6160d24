"""Real clients as load (`load.client: librdkafka`): the client's rows completed with what the brokers'
listeners saw, before any reader of the history gets them.

A load producer writes a `produce_ack` per delivery report: the record's identity, outcome and
offset, which is all librdkafka tells it. The checks find an acknowledged record in a replica's log
by its batch (base offset, count, CRC: observability/projection.py `AckedBatch`), which only the
listener that appended it knows; it says so in a `load_batch_appended` row. Likewise a load
consumer's `consume` rows name the offset read, and the listener that answered the fetch names the
batch it served there (`load_batch_served`). The listener's row is older than the client's (the
client hears of the batch in the listener's answer), so the history, released in time order,
brings it first; this join, applied to each event as it is released (world.py), fills the batch
into the client's row (a `LoadProduceAck`, the same kind). A client row with no such listener row
keeps a null batch: the checks then find its record nowhere, which reports a loss rather than
hiding one.
"""

from __future__ import annotations

from observability.events import EventRecord, LoadProduceAck

Key = tuple[str, int]


class LoadJoin:
    def __init__(self) -> None:
        # (topic, partition) -> offset -> (batch base, count, CRC, producer, sequence)
        self.appended: dict[Key, dict[int, tuple[int, int, int, str, int]]] = {}
        # (consumer, topic, partition) -> offset -> (batch base, CRC)
        self.served: dict[tuple[str, str, int], dict[int, tuple[int, int]]] = {}

    def __call__(self, record: EventRecord) -> EventRecord:
        ev = record.event
        kind = ev.kind
        if kind == "load_batch_appended":
            at = self.appended.setdefault((ev.topic, ev.partition), {})
            for i, sequence in enumerate(ev.sequences):
                at[ev.offset + i] = (ev.offset, ev.count, ev.batch_crc, ev.producer, sequence)
        elif kind == "load_batch_served":
            at = self.served.setdefault((ev.consumer, ev.topic, ev.partition), {})
            for offset in range(ev.offset, ev.offset + ev.count):
                at[offset] = (ev.offset, ev.batch_crc)
        elif kind == "produce_ack" and ev.outcome == "ok" and ev.first_offset is not None and ev.batch_crc is None:
            return self._ack(record)
        elif kind == "consume" and ev.batch_crc is None:
            return self._read(record)
        return record

    def _ack(self, record: EventRecord) -> EventRecord:
        """A delivery report's record (one per row): its batch, when the listener appended this
        very record (producer and sequence) at that offset."""
        ev = record.event
        found = self.appended.get((ev.topic, ev.partition), {}).pop(ev.first_offset, None)
        if found is None or len(ev.sequences) != 1 or found[3:] != (ev.producer, ev.sequences[0]):
            return record
        base, count, crc = found[:3]
        return record._replace(event=LoadProduceAck(*ev._replace(batch_crc=crc), base, count))

    def _read(self, record: EventRecord) -> EventRecord:
        """A record a load consumer read (one per row): the batch the listener served it there."""
        ev = record.event
        found = self.served.get((ev.consumer, ev.topic, ev.partition), {}).get(ev.first_offset)
        if found is None or len(ev.sequences) != 1:
            return record
        return record._replace(event=ev._replace(batch_offset=found[0], batch_crc=found[1]))
