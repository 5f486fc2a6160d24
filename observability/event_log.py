"""The run directory's `events/` folder: one msgpack stream per node.

Each record is a map `{"seq": int, "at_ms": float, "node": str, "kind": str, "fields": {...}}`;
`seq` numbers the events of the whole run in the order they happened, so the streams merge back
into one history exactly. `read_events` reads a folder back (for tests and analysis).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

import msgpack


class EventLog:
    """An event sink writing `events/<node>.msgpack`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, BinaryIO] = {}
        self._packer = msgpack.Packer(use_bin_type=True, default=repr)
        self.count = 0

    def __call__(self, record: tuple[float, str, str, dict[str, Any]]) -> None:
        at_ms, node, kind, fields = record
        f = self._files.get(node)
        if f is None:
            f = self._files[node] = open(self.directory / f"{node}.msgpack", "ab")  # noqa: SIM115
        f.write(self._packer.pack({"seq": self.count, "at_ms": at_ms, "node": node, "kind": kind, "fields": fields}))
        self.count += 1

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def read_events(directory: Path) -> list[dict[str, Any]]:
    """Every event of a run, merged across nodes in the order they happened."""
    events: list[dict[str, Any]] = []
    for path in sorted(Path(directory).glob("*.msgpack")):
        with open(path, "rb") as f:
            events.extend(msgpack.Unpacker(f, raw=False, strict_map_key=False))
    events.sort(key=lambda e: e["seq"])
    return events
