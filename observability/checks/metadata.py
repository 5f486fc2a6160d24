"""Partition invariants of docs/explanation/protocol-facts.md that the committed metadata alone can show,
judged from the voters' reports of it (`partition_change`, `broker_change`).

| name           | checked here                                                                  |
|----------------|-------------------------------------------------------------------------------|
| IsrElrShape    | ISR and ELR are subsets of the replicas, disjoint, ELR empty when ISR >= MinISR |
| NoFencedInIsr  | with ELR on, no fenced broker is in an ISR                                    |
| MonotonicEpochs| leader epoch, partition epoch and broker epoch only grow                      |

Every voter reports each committed record in metadata-log order, so the records, taken once each in
offset order (a report no newer than the newest taken is another voter's repeat), rebuild the
committed image. A controller's change spans several records committed together (fencing a broker,
then taking it out of every ISR), so the image is judged at `check()`, which the drivers call after
each node's batch of events, not after each record.
"""

from __future__ import annotations

from typing import Any

from observability.events import EventRecord


class MetadataChecks:
    """An event sink and a check set."""

    def __init__(self, *, elr_enabled: bool) -> None:
        self.elr_enabled = elr_enabled
        self._offset = -1  # the newest metadata offset taken
        self.partitions: dict[tuple[str, int], Any] = {}
        self.fenced: dict[int, bool] = {}
        self._partition_epochs: dict[tuple[str, int], tuple[int, int]] = {}
        self._broker_epochs: dict[int, int] = {}
        self._touched: set[tuple[str, int]] = set()
        self._fence_changed = False
        self._found: dict[str, str] = {}

    def __call__(self, rec: EventRecord) -> None:
        ev = rec.event
        kind = ev.kind
        if kind not in ("partition_change", "broker_change", "topic_deleted") or ev.metadata_offset < self._offset:
            return
        if kind == "topic_deleted":
            # A topic created again under the name starts its epochs anew (a new topic id).
            self._offset = ev.metadata_offset
            for key in [k for k in self.partitions if k[0] == ev.topic]:
                del self.partitions[key]
                self._partition_epochs.pop(key, None)
                self._touched.discard(key)
            return
        if kind == "partition_change":
            # A MinISR change reports partitions again at its own offset: several per offset.
            self._offset = ev.metadata_offset
            key = (ev.topic, ev.partition)
            self.partitions[key] = ev
            self._touched.add(key)
            before = self._partition_epochs.get(key)
            now = (ev.leader_epoch, ev.partition_epoch)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                self._found.setdefault("MonotonicEpochs", f"{ev.topic}-{ev.partition}: (leader epoch, partition epoch) went from {before} to {now}")
            self._partition_epochs[key] = now
        elif ev.metadata_offset > self._offset:
            self._offset = ev.metadata_offset
            if ev.epoch < self._broker_epochs.get(ev.broker, -1):
                self._found.setdefault("MonotonicEpochs", f"broker {ev.broker}'s epoch went from {self._broker_epochs[ev.broker]} to {ev.epoch}")
            self._broker_epochs[ev.broker] = ev.epoch
            if self.fenced.get(ev.broker) != ev.fenced:
                self.fenced[ev.broker] = ev.fenced
                self._fence_changed = True

    def check(self) -> dict[str, str]:
        found, self._found = self._found, {}
        keys = self.partitions if self._fence_changed else self._touched
        for key in keys:
            p = self.partitions[key]
            name = f"{key[0]}-{key[1]}"
            isr, elr, replicas = set(p.isr), set(p.elr), set(p.replicas)
            if not isr <= replicas or not elr <= replicas or isr & elr or (elr and len(isr) >= p.min_isr):
                found.setdefault("IsrElrShape", f"{name}: replicas {list(p.replicas)}, ISR {list(p.isr)}, ELR {list(p.elr)}, MinISR {p.min_isr}")
            if self.elr_enabled:
                fenced = [b for b in p.isr if self.fenced.get(b)]
                if fenced:
                    found.setdefault("NoFencedInIsr", f"{name}: fenced brokers {fenced} in ISR {list(p.isr)}")
        self._touched = set()
        self._fence_changed = False
        return found

    check_all = check
