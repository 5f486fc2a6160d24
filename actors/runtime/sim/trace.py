"""The ordered trace of a simulated run and its hash.

Two kinds of entries go in, in the order the simulator produced them:

- *events*: what roles emit and what the simulator does to the world (crashes, restarts, faults,
  steps). They are kept as records `(at_ms, node, kind, fields)` and handed to the event sinks
  (the run directory's `events/` streams).
- *deliveries and drops*: every message put in a role's hands or lost, as `(at_ms, src, dst,
  payload type)`. They are hashed but not stored: there are millions of them.

The hash is BLAKE2b over a canonical text form, so it does not depend on Python's per-process
string hash seed. Entries are buffered and hashed in batches to keep the per-message cost low.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import msgpack

EventRecord = tuple[float, str, str, dict[str, Any]]
EventSink = Callable[[EventRecord], None]

_BATCH = 4096


class TraceRecorder:
    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=16)
        self._pending: list[str] = []
        self.sinks: list[EventSink] = []
        self.event_count = 0
        self.delivery_count = 0
        self.drop_count = 0

    def _add(self, line: str) -> None:
        pending = self._pending
        pending.append(line)
        if len(pending) >= _BATCH:
            self._drain()

    def _drain(self) -> None:
        if self._pending:
            self._hash.update("\n".join(self._pending).encode())
            self._hash.update(b"\n")
            self._pending.clear()

    def event(self, at_ms: float, node: str, kind: str, fields: dict[str, Any]) -> None:
        self.event_count += 1
        # msgpack of the fields is canonical for the plain values events carry (dicts keep their
        # insertion order, which is deterministic in a deterministic run).
        packed = msgpack.packb(fields, use_bin_type=True, default=repr)
        self._add(f"E|{at_ms!r}|{node}|{kind}|{packed.hex()}")
        record = (at_ms, node, kind, fields)
        for sink in self.sinks:
            sink(record)

    def delivered(self, at_ms: float, src: str, dst: str, payload: Any) -> None:
        self.delivery_count += 1
        self._add(f"D|{at_ms!r}|{src}|{dst}|{type(payload).__name__}")

    def dropped(self, at_ms: float, src: str, dst: str, payload: Any, reason: str) -> None:
        self.drop_count += 1
        self._add(f"X|{at_ms!r}|{src}|{dst}|{type(payload).__name__}|{reason}")

    def hexdigest(self) -> str:
        self._drain()
        return self._hash.copy().hexdigest()
