"""What one operation of the active controller writes: Kafka's ControllerResult (the records and
the reply of a write event), built by the control managers (cluster_control.py,
replication_control.py, configuration_control.py) and appended by the Controller.

The records are applied to the working image as they are made, at the offsets they will have, so
that each decision of the operation builds on the ones before it (the controller is
single-threaded, the protocol description §6.3; Kafka's QuorumController replays a result's
records at once, before they commit). The events are the history's rows the operation makes; the
controller emits them with the records.
"""

from __future__ import annotations

from typing import Any

from .metadata import MetadataImage


class Proposal:
    """Invariants: `records[i]` has been applied to `image` at offset `first_offset + i`; nothing
    else was applied to `image` since the proposal began."""

    __slots__ = ("events", "first_offset", "image", "records")

    def __init__(self, image: MetadataImage, first_offset: int) -> None:
        self.image = image
        self.first_offset = first_offset
        self.records: list[Any] = []
        self.events: list[Any] = []

    @property
    def next_offset(self) -> int:
        """The offset the next record will have (a new broker epoch is its registration's)."""
        return self.first_offset + len(self.records)

    @property
    def last_offset(self) -> int | None:
        """The offset of the last record made (None: none), after whose commit a reply may go."""
        return self.next_offset - 1 if self.records else None

    def add(self, *records: Any) -> int:
        """Make records; returns the last one's offset."""
        for rec in records:
            self.image.apply(self.next_offset, rec)
            self.records.append(rec)
        return self.next_offset - 1

    def emit(self, event: Any) -> None:
        self.events.append(event)
