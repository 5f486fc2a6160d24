"""The ordered trace of a simulated run and its hash.

Two kinds of entries go in, in the order the simulator produced them:

- *events*: what roles emit and what the driver does to the world (faults, steps, checks), typed
  by `observability.events`. Each is numbered per node and incarnation (`node_seq`, one number per
  history row) and handed to the event sinks as an `EventRecord` (the run directory's `events/`,
  the checks, the cluster view).
- *deliveries and drops*: every message put in a role's hands or lost, as `(at_ms, src, dst,
  payload type)`. They are hashed but not stored: there are millions of them.

The hash is BLAKE2b over a canonical form (msgpack of each entry's plain values), so it does not
depend on Python's per-process string hash seed. Entries are buffered and hashed in batches to keep the per-message cost low.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import msgpack

from observability.events import EventRecord

EventSink = Callable[[EventRecord], None]

_BATCH = 4096


class TraceRecorder:
    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=16)
        self._pending: list[bytes] = []
        # Each entry is the msgpack of a tuple of plain values: self-delimiting and canonical.
        self._pack = msgpack.Packer(use_bin_type=True, default=repr).pack
        self.sinks: list[EventSink] = []
        self._next_seq: dict[tuple[str, int], int] = {}
        self.event_count = 0  # history rows
        self.delivery_count = 0
        self.drop_count = 0

    def _add(self, entry: bytes) -> None:
        pending = self._pending
        pending.append(entry)
        if len(pending) >= _BATCH:
            self._drain()

    def _drain(self) -> None:
        if self._pending:
            self._hash.update(b"".join(self._pending))
            self._pending.clear()

    def event(self, at_ms: float, node: str, incarnation: int, event: Any) -> EventRecord:
        """Number `event` as `node`'s (in `incarnation`), hash it and hand it to the sinks."""
        key = (node, incarnation)
        seq = self._next_seq.get(key, 0)
        rows = event.row_count
        self._next_seq[key] = seq + rows
        self.event_count += rows
        # msgpack of the event (a NamedTuple of plain values) is canonical.
        self._add(self._pack(("E", at_ms, node, incarnation, event.kind, event)))
        record = EventRecord(at_ms, node, incarnation, seq, event)
        for sink in self.sinks:
            sink(record)
        return record

    def delivered(self, at_ms: float, src: str, dst: str, payload: Any) -> None:
        self.delivery_count += 1
        self._add(self._pack(("D", at_ms, src, dst, type(payload).__name__)))

    def dropped(self, at_ms: float, src: str, dst: str, payload: Any, reason: str) -> None:
        self.drop_count += 1
        self._add(self._pack(("X", at_ms, src, dst, type(payload).__name__, reason)))

    def hexdigest(self) -> str:
        self._drain()
        return self._hash.copy().hexdigest()
