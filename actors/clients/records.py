"""What a record batch's payload holds: the records' values and their identity.

Brokers never decode a batch (docs/explanation/architecture.md); clients do. A record is identified by its producer's name
and its sequence (per producer, from 0) from the moment it is handed to the producer to the final
read of the log (docs/reference/events.md), so the identity travels inside the payload, next to the
values: `[producer, [sequence...], [value...]]`. A batch a Kafka client sent through a broker's
Kafka listener carries the client's own batch bytes as a fourth element
(actors/runtime/kafka/batches.py); a kraftlab reader reads its identity and values like any other.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgpack


def encode_records(producer: str, sequences: Sequence[int], values: Sequence[str]) -> bytes:
    # msgpack directly (not storage.codec.pack, which walks the values in Python): the load hot path.
    return msgpack.packb([producer, list(sequences), list(values)], use_bin_type=True)


def decode_records(payload: bytes) -> tuple[str, tuple[int, ...], tuple[str, ...]]:
    """(producer, sequences, values) of a batch's payload."""
    producer, sequences, values, *_kafka_batch = msgpack.unpackb(payload, raw=False)
    return producer, tuple(sequences), tuple(values)
