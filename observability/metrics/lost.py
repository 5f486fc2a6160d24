"""`kraftlab_records_lost`: acknowledged acks=all records missing from the committed log now, as
the cluster view's `acked_lost` counts them (`ClusterProjection.holders`: the acting leader's log,
or every replica's, running or down, while there is none), but kept up incrementally, so that
sampling it every second costs what changed and not every batch ever acknowledged.

Per partition: the batches acknowledged with acks=all, how many were verified against the holders'
logs, and which of those were missing. A batch found once stays found while its holders are the
same logs at the same versions (a log only grows between truncations, and `LogMirror.version`
changes at every truncation or replacement); a missing one may still appear (a follower catching
up while there is no leader), so the missing ones are looked at again each time. A change of
holders (a new acting leader, a restart, a truncation) starts the partition over.
"""

from __future__ import annotations

from typing import Any

from observability.events import EventRecord

Key = tuple[str, int]
Batch = tuple[int, int, int, int]  # base offset, count, CRC, records acknowledged

# Events after which a partition's holders or their logs may differ.
PARTITION_EVENTS = frozenset({"truncated", "replica_recovered", "replica_deleted", "become_leader", "become_follower",
                              "appended", "partition_change", "replica_survived"})
CLUSTER_EVENTS = frozenset({"process_start", "process_stop"})


class LostRecords:
    """An event sink (for the acknowledgements and what to look at again) and the count."""

    def __init__(self) -> None:
        self.view: Any = None  # the cluster view (observability/projection.py), set once it exists
        self.batches: dict[Key, list[Batch]] = {}
        self._state: dict[Key, tuple[tuple[int, ...], int, list[Batch]]] = {}  # stamp, verified, missing
        self._lost: dict[Key, int] = {}
        self._dirty: set[Key] = set()
        self._all_dirty = False

    def __call__(self, rec: EventRecord) -> None:
        ev = rec.event
        kind = ev.kind
        if kind == "produce_ack":
            deleted = self.view is not None and ev.topic_id in self.view.deleted_topic_ids
            if ev.outcome == "ok" and ev.acks == "all" and ev.first_offset is not None and not deleted:
                key = (ev.topic, ev.partition)
                self.batches.setdefault(key, []).append((*ev.batch, len(ev.sequences)))
                self._dirty.add(key)
        elif kind in PARTITION_EVENTS:
            key = (ev.topic, ev.partition)
            # An append can only turn a missing batch into a found one: worth a look only then.
            if kind != "appended" or self._state.get(key, ((), 0, []))[2]:
                self._dirty.add(key)
        elif kind in CLUSTER_EVENTS or (kind == "fault" and ev.fault.startswith("crash_")):
            self._all_dirty = True
        elif kind == "topic_deleted":
            # Neither lost nor required (docs/reference); a topic created again starts its own count.
            for table in (self.batches, self._state, self._lost):
                for key in [k for k in table if k[0] == ev.topic]:
                    del table[key]
            self._dirty = {k for k in self._dirty if k[0] != ev.topic}

    def count(self) -> int:
        if self.view is None:
            return 0
        keys = list(self.batches) if self._all_dirty else [k for k in self._dirty if k in self.batches]
        self._all_dirty = False
        self._dirty = set()
        for key in keys:
            self._lost[key] = self._recount(key)
        return sum(self._lost.values())

    def _recount(self, key: Key) -> int:
        holders = self.view.holders(key)
        stamp = tuple(sorted(log.version for log in holders))
        batches = self.batches[key]
        before, verified, missing = self._state.get(key, ((), 0, []))
        if before != stamp:
            verified, missing = 0, []
        missing = [b for b in missing + batches[verified:] if not any(log.holds(*b[:3]) for log in holders)]
        self._state[key] = (stamp, len(batches), missing)
        return sum(b[3] for b in missing)
