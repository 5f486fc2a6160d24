"""The driver's side of a Ray cluster: which processes run where, and the history as it arrives.

Nothing here copies a role. The driver collects events: every actor numbers its own (`node_seq`
per incarnation) and keeps them until a later collection's cursor acknowledges them, so an answer
lost on the way loses nothing and a repeat is recognised (`HistoryCollector.collected`).

Events of different processes arrive in batches a few milliseconds apart, so the collector holds
them back until every running process has answered past their time (the *watermark*: the smallest
of the clocks the processes answered with), then hands them to the sinks in time order. The cluster
view and the checks thus see one history in the order it happened, as in the simulator; the
checks run after each node's batch of events (one role output: the records a controller commits
together are judged together).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from actors.runtime.sim.simulator import DRIVER_INCARNATION, Violation
from observability.events import DRIVER, EventRecord, InvariantViolated


class RayNode:
    """A broker, voter or client process slot. Invariant: `handle` is None exactly while the
    node's process is down; `starts` counts its starts (the history's incarnation is `starts - 1`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.handle: Any = None
        self.address: tuple[str, int] | None = None  # where its process listens (wire.py)
        self.starts = 0
        self.ray_node: str | None = None
        self.pid: int | None = None  # of its process, on `ray_node`
        self.counters: dict[str, Any] = {}

    @property
    def generation(self) -> int:
        return max(self.starts - 1, 0)


class HistoryCollector:
    """The history as the driver collects it. Invariants: `cursors[(node, incarnation)]` is the
    number of the next row expected from that process (an earlier one is a repeat); `pending`
    holds what was collected but not yet handed to the sinks."""

    def __init__(self) -> None:
        self.sinks: list[Callable[[EventRecord], None]] = []
        self.event_count = 0  # history rows handed over
        self.cursors: dict[tuple[str, int], int] = {}
        self.gaps = 0  # rows a process numbered that never arrived (lost with a process that died)
        self._pending: list[tuple[float, int, EventRecord]] = []
        self._arrivals = 0
        self.after_batch: Callable[[], None] = lambda: None
        self.released_ms = 0.0  # the time of the last event handed over
        # Applied to each event as it is released, before the sinks: real load clients' rows
        # completed with their listeners' (actors/runtime/kafka/load_join.py). None: as collected.
        self.transform: Callable[[EventRecord], EventRecord] | None = None

    def cursor(self, node: str, incarnation: int) -> int:
        return self.cursors.get((node, incarnation), 0)

    def collected(self, record: EventRecord) -> None:
        """An actor's event (numbered by it)."""
        key = (record.node, record.incarnation)
        expected = self.cursors.get(key, 0)
        if record.node_seq < expected:
            return
        self.gaps += record.node_seq - expected
        self.cursors[key] = record.node_seq + record.event.row_count
        self._push(record)

    def driver_event(self, at_ms: float, event: Any) -> None:
        key = (DRIVER, DRIVER_INCARNATION)
        seq = self.cursors.get(key, 0)
        self.cursors[key] = seq + event.row_count
        self._push(EventRecord(at_ms, DRIVER, DRIVER_INCARNATION, seq, event))

    def _push(self, record: EventRecord) -> None:
        self._arrivals += 1  # ties in time keep their arrival order (a node's own order)
        self._pending.append((record.time_ms, self._arrivals, record))

    def release(self, watermark: float) -> None:
        """Hand every pending event up to `watermark` to the sinks, in time order, calling
        `after_batch` after each run of one node's events of one instant.

        The pending events are sorted once per release, not kept in a heap: they arrive as one
        time-ordered run per process and poll, which Python's sort merges in about linear time,
        where a heap paid a push and a pop per event. What `after_batch` records (a violation,
        rarely) is merged in: the rest is sorted again with it."""
        last: tuple[str, float] | None = None
        while self._pending:
            pending = self._pending
            pending.sort()  # (time, arrival): arrivals are unique, records are never compared
            cut = bisect.bisect_right(pending, (watermark, math.inf))
            if cut == 0:
                break
            ready, self._pending = pending[:cut], pending[cut:]
            for i, (_, _, record) in enumerate(ready):
                batch = (record.node, record.time_ms)
                if last is not None and batch != last:
                    recorded = len(self._pending)
                    self.after_batch()
                    if len(self._pending) != recorded:
                        self._pending.extend(ready[i:])
                        last = None
                        break
                last = batch
                self.released_ms = record.time_ms
                self.event_count += record.event.row_count
                if self.transform is not None:
                    record = self.transform(record)
                for sink in self.sinks:
                    sink(record)
        if last is not None:
            self.after_batch()

    def release_all(self) -> None:
        self.release(float("inf"))


class RayWorld:
    """The parts of a simulator's world the shared cluster code uses (`nodes`, `trace`, `record`,
    `is_running`, the invariant hook), for a cluster of Ray actors."""

    def __init__(self, clock_ms: Callable[[], float]) -> None:
        self._clock_ms = clock_ms
        self.nodes: dict[str, RayNode] = {}
        self.trace = HistoryCollector()
        self.trace.after_batch = self._after_batch
        self.invariant_sets: list[Callable[[], dict[str, str]]] = []
        # Judged after each batch of events, after the checks: the conditions of the waits in
        # progress (`watching`).
        self._watches: list[Callable[[], None]] = []
        self.violations: dict[str, Violation] = {}

    @property
    def now_ms(self) -> float:
        return self._clock_ms()

    def add_invariant_set(self, check: Callable[[], dict[str, str]]) -> None:
        self.invariant_sets.append(check)

    def is_running(self, name: str) -> bool:
        return self.nodes[name].handle is not None

    def record(self, event: Any, at_ms: float | None = None) -> None:
        """An event of the driver's; it joins the history in time order (see the module)."""
        self.trace.driver_event(self.now_ms if at_ms is None else at_ms, event)

    def _after_batch(self) -> None:
        self.check_invariants()
        for watch in self._watches:
            watch()

    @contextmanager
    def watching(self, condition: Callable[[], bool]) -> Iterator[Callable[[], bool]]:
        """Within the block, `condition` is judged after each batch of events handed to the sinks;
        yields a test that is true once it held after one of them (and stays true)."""
        held = False

        def watch() -> None:
            nonlocal held
            held = held or condition()

        self._watches.append(watch)
        try:
            yield lambda: held
        finally:
            self._watches.remove(watch)

    def check_invariants(self) -> None:
        for check_set in self.invariant_sets:
            self.report(check_set())

    def report(self, found: dict[str, str]) -> None:
        """Violations found (invariant -> detail) in the history released so far."""
        for name, detail in found.items():
            seen = self.violations.get(name)
            if seen is None:
                at_ms = self.trace.released_ms  # when the events that show it happened
                self.violations[name] = Violation(name, round(at_ms, 3), detail)
                self.record(InvariantViolated(name, detail), at_ms)
            else:
                seen.count += 1
