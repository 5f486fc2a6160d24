"""How long each partition could not take writes, from the committed metadata's history.

An event sink reading the voters' `partition_change` events (one per committed partition record
per voter). A partition is

- *offline* while it has no leader (Kafka's OfflinePartitionsCount), and
- *under min ISR* while its ISR is smaller than its min.insync.replicas (UnderMinIsrPartitionCount):
  acks=all writes are refused with NOT_ENOUGH_REPLICAS;

*unavailable* (for acks=all writes) while either holds. Each state counts from the first voter's
report of its metadata record (lagging voters repeat older records later; those are ignored), so
the figures are as of when the cluster first knew. A min.insync.replicas change counts from its
own record (the voters report the partitions it applies to again).
"""

from __future__ import annotations

from dataclasses import dataclass

from .events import EventRecord


@dataclass
class _PartitionTimeline:
    metadata_offset: int
    since_ms: float
    offline: bool
    under_min_isr: bool
    offline_ms: float = 0.0
    under_min_isr_ms: float = 0.0
    unavailable_ms: float = 0.0

    def advance(self, now_ms: float) -> None:
        span = max(0.0, now_ms - self.since_ms)
        if self.offline:
            self.offline_ms += span
        if self.under_min_isr:
            self.under_min_isr_ms += span
        if self.offline or self.under_min_isr:
            self.unavailable_ms += span
        self.since_ms = now_ms


class AvailabilityTracker:
    """Invariant: `partitions[p]` holds the newest metadata offset reported for `p` and the time
    accumulated in each condition up to `since_ms`."""

    def __init__(self) -> None:
        self.partitions: dict[str, _PartitionTimeline] = {}

    def __call__(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.kind != "partition_change":
            return
        name = f"{ev.topic}-{ev.partition}"
        offline = ev.leader is None
        under = bool(ev.under_min_isr)
        t = self.partitions.get(name)
        if t is None:
            self.partitions[name] = _PartitionTimeline(ev.metadata_offset, rec.time_ms, offline, under)
            return
        if ev.metadata_offset <= t.metadata_offset:
            return
        t.advance(rec.time_ms)
        t.metadata_offset, t.offline, t.under_min_isr = ev.metadata_offset, offline, under

    def report(self, end_ms: float) -> dict[str, dict[str, float]]:
        """Per partition: ms offline, under min ISR, and unavailable (either), up to `end_ms`."""
        out = {}
        for name in sorted(self.partitions):
            t = self.partitions[name]
            t.advance(max(end_ms, t.since_ms))
            out[name] = {
                "offline_ms": round(t.offline_ms, 1),
                "under_min_isr_ms": round(t.under_min_isr_ms, 1),
                "unavailable_ms": round(t.unavailable_ms, 1),
            }
        return out
