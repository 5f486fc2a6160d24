"""Kafka's RecordBatch v2 to and from a kraftlab batch.

A kraftlab batch's payload is `[producer, [sequence...], [value...]]` (actors/clients/records.py):
the records' identity travels with them, so that the final read of every log can tell which
acknowledged record is missing. A batch from a Kafka client is kept whole inside that payload, as
a fourth element: the part of the v2 batch its CRC-32C covers (attributes to the last record), with
the identity the listener gave its records (the connection's producer name and a sequence per
record). The records themselves are not decoded on the way in (the CRC covers them; the count is
the batch header's), so their values read as empty text by kraftlab's own consumers: a record is
identified by its producer and sequence, and its batch by offset and CRC. Its base offset and partition leader epoch, which the CRC does
not cover, are the leader's to assign, as in Kafka: a fetch rebuilds the header in front of the
kept bytes, and the client's CRC still holds. A batch a kraftlab producer wrote is turned into a
v2 batch of the same records (the value as the record's value, no key, its identity in a header) when a Kafka client reads it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import msgpack
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from storage.partition_log import NO_PRODUCER, RecordBatch

from .load_identity import header

# Compression codecs a listener accepts (attributes' low 3 bits); any other is refused with
# UNSUPPORTED_COMPRESSION_TYPE.
ACCEPTED_CODECS = {DefaultRecordBatch.CODEC_NONE: "none", DefaultRecordBatch.CODEC_GZIP: "gzip"}

HEADER = DefaultRecordBatch.HEADER_STRUCT
ATTRIBUTES_OFFSET = DefaultRecordBatch.ATTRIBUTES_OFFSET
LENGTH_OFFSET = DefaultRecordBatch.AFTER_LEN_OFFSET  # bytes before the batch length counts from
MAGIC_V2 = 2


class BatchError(Exception):
    """A batch the leader refuses: `error` is Kafka's name for why."""

    def __init__(self, error: str, detail: str) -> None:
        super().__init__(detail)
        self.error = error


class ClientBatch(NamedTuple):
    """One v2 batch as a Kafka client sent it."""

    count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    codec: str
    covered: bytes  # what its CRC covers: attributes to the end
    raw: bytes = b""  # the whole batch, as sent (its records' headers name a load client's records)


def split_batches(records: bytes | None) -> list[ClientBatch]:
    """Every batch of a produce request's record set, checked: magic 2, the CRC-32C, a codec this
    listener reads. Raises BatchError (CORRUPT_MESSAGE, UNSUPPORTED_COMPRESSION_TYPE,
    INVALID_RECORD) for the first bad one: Kafka refuses the partition's whole record set."""
    data = bytes(records or b"")
    out: list[ClientBatch] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER.size:
            raise BatchError("CORRUPT_MESSAGE", f"a batch header cut short at byte {pos}")
        length = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + LENGTH_OFFSET + length
        if length < HEADER.size - LENGTH_OFFSET or end > len(data):
            raise BatchError("CORRUPT_MESSAGE", f"a batch length {length} at byte {pos} past the record set's end")
        batch = DefaultRecordBatch(data[pos:end])
        if batch.magic != MAGIC_V2:
            raise BatchError("UNSUPPORTED_VERSION", f"record batch magic {batch.magic}: only v2 is served")
        if not batch.validate_crc():
            raise BatchError("CORRUPT_MESSAGE", f"the batch at byte {pos} fails its CRC-32C")
        codec = batch.compression_type
        if codec not in ACCEPTED_CODECS:
            raise BatchError("UNSUPPORTED_COMPRESSION_TYPE", f"compression codec {codec}")
        if batch.is_transactional or batch.is_control_batch:
            raise BatchError("INVALID_RECORD", "transactional and control batches are not served")
        if batch.records_count <= 0:
            raise BatchError("CORRUPT_MESSAGE", f"a batch of {batch.records_count} records")
        covered = data[pos + ATTRIBUTES_OFFSET:end]
        out.append(ClientBatch(batch.records_count, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                               ACCEPTED_CODECS[codec], covered, data[pos:end]))
        pos = end
    return out


def batch_identity(batch: ClientBatch, key: tuple[str, int]) -> tuple[str, int] | None:
    """An idempotent client's batch: the producer name and first sequence its records are known by
    in the history, from what the batch carries. Kafka's sequences count per partition and start
    again with each producer epoch (KIP-98, KIP-360), so the name holds the producer id, the epoch
    and the partition: a retry of the batch, through any connection, is the same records. None for
    a batch without a producer id (the connection names its records)."""
    if batch.producer_id < 0:
        return None
    return f"kafka:pid{batch.producer_id}.{batch.producer_epoch}@{key[0]}-{key[1]}", batch.base_sequence


def to_kraftlab(batch: ClientBatch, producer: str, sequences: list[int]) -> RecordBatch:
    """The kraftlab batch a client's batch is appended as; its records are `producer`'s, with
    `sequences`. An idempotent client's producer id and base sequence stay the batch's, so
    that the leader's duplicate and sequence checks (KIP-98) apply to it as to any producer."""
    payload = msgpack.packb([producer, sequences, [""] * batch.count, batch.covered], use_bin_type=True)
    producer_id = batch.producer_id if batch.producer_id >= 0 else NO_PRODUCER
    return RecordBatch.of(payload, batch.count, producer_id, batch.base_sequence if producer_id != NO_PRODUCER else -1)


def to_kafka(batch: RecordBatch) -> bytes:
    """The v2 batch a Kafka client reads for a kraftlab batch of the log: the client's own bytes
    behind a header with the leader's offset and epoch, or a batch built of a kraftlab producer's
    records."""
    fields = msgpack.unpackb(batch.records, raw=False)
    covered = fields[3] if len(fields) > 3 else _build(fields[0], fields[1], fields[2])
    length = ATTRIBUTES_OFFSET - LENGTH_OFFSET + len(covered)
    return struct.pack(">qiibI", batch.base_offset, length, batch.leader_epoch, MAGIC_V2, calc_crc32c(covered)) + covered


def _build(producer: str, sequences: list[int], values: list[str]) -> bytes:
    """A kraftlab producer's records as a v2 batch (no key, no timestamp: kraftlab's records have
    none), from its attributes on; each record's identity in a header, so that a load consumer
    running as a real client (load_identity.py) can name the records it reads."""
    builder = DefaultRecordBatchBuilder(MAGIC_V2, DefaultRecordBatch.CODEC_NONE, False, -1, -1, -1, 1 << 30)
    for i, (sequence, value) in enumerate(zip(sequences, values, strict=True)):
        builder.append(i, 0, None, value.encode(), [header(producer, sequence)])
    return bytes(builder.build()[ATTRIBUTES_OFFSET:])
