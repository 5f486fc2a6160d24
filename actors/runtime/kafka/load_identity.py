"""How a real Kafka client running a scenario's load (`load.client: librdkafka`) makes itself and its
records known to the brokers' listeners.

The history identifies a record by (producer, sequence) everywhere: in the producer's
`produce_send`/`produce_ack` rows, in the consumers' `consume` rows and in the final read of the
logs. A load client gives each record that identity itself, in a record header (`HEADER`:
"<producer>/<sequence>"), and names itself in its `client.id` (`CLIENT_ID_PREFIX` + its node
name). The listener keeps the header's identity for the records it appends (so that the final read
names them as the client's rows do), and leaves the client's `produce_send` and `produce_ack` rows
to the client, whose delivery reports are what it was told (see gateway.py).
"""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch

CLIENT_ID_PREFIX = "kraftlab-load/"
HEADER = "kraftlab.id"


def client_id(node: str) -> str:
    """The `client.id` of the load client running as node `node` (load-producer-1, ...)."""
    return f"{CLIENT_ID_PREFIX}{node}"


def load_client(client_id_: str | None) -> str | None:
    """The load client's node name a connection's client.id names, or None (any other client)."""
    if client_id_ and client_id_.startswith(CLIENT_ID_PREFIX):
        return client_id_[len(CLIENT_ID_PREFIX):] or None
    return None


def header(producer: str, sequence: int) -> tuple[str, bytes]:
    return HEADER, f"{producer}/{sequence}".encode()


def parse(value: bytes | None) -> tuple[str, int] | None:
    """(producer, sequence) from a header's value, or None when it is not one."""
    if not value:
        return None
    producer, slash, sequence = value.decode(errors="replace").rpartition("/")
    if not slash or not producer or not sequence.isdigit():
        return None
    return producer, int(sequence)


def identity_of(headers) -> tuple[str, int] | None:
    """A record's identity from its headers ((key, value) pairs), or None."""
    for key, value in headers or ():
        if key == HEADER:
            return parse(value)
    return None


def load_identity(raw: bytes) -> tuple[str, list[int]] | None:
    """(producer, the sequence of each record) of a v2 batch whose every record carries one
    producer's identity, else None (a batch written by a client that does not name its records)."""
    producer = None
    sequences: list[int] = []
    try:
        for record in DefaultRecordBatch(raw):
            found = identity_of(record.headers)
            if found is None or (producer is not None and found[0] != producer):
                return None
            producer = found[0]
            sequences.append(found[1])
    except Exception:  # noqa: BLE001 - a batch it cannot decode names nothing; the listener checked its CRC
        return None
    return (producer, sequences) if producer is not None else None
