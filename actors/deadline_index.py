"""Each key's next deadline and the earliest of them, for a role with many timers (a producer's
partitions, a broker's replicas), so that a wake-up costs what is due, not the number of keys.

A heap of (deadline, key) entries, checked lazily against the key's actual deadline (the owner's
`deadline_of`): the owner calls `schedule` wherever a key's deadline may have moved earlier, and
nothing when it moved later or went away; `earliest` and `pop_due` find out, dropping or moving the
entries concerned on the way. Invariant: every key with a deadline has a live entry (the one
`_scheduled` names) at or before that deadline; other entries are superseded and skipped.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class DeadlineIndex(Generic[K]):
    def __init__(self, deadline_of: Callable[[K], float | None], on_idle: Callable[[K], None] | None = None) -> None:
        """`deadline_of(key)`: the key's deadline now (None: it has none); `on_idle(key)`: told when
        a key is found to have no deadline any more."""
        self._deadline_of = deadline_of
        self._on_idle = on_idle
        self._heap: list[tuple[float, K]] = []
        self._scheduled: dict[K, float] = {}  # key -> the deadline of its live entry

    def schedule(self, key: K) -> None:
        """The key's deadline may have moved earlier."""
        d = self._deadline_of(key)
        if d is not None and d < self._scheduled.get(key, float("inf")):
            self._scheduled[key] = d
            heapq.heappush(self._heap, (d, key))

    def earliest(self) -> float | None:
        """The earliest deadline of any key: the heap's top once checked against its key."""
        heap = self._heap
        while heap:
            d, key = heap[0]
            if self._scheduled.get(key) != d:
                heapq.heappop(heap)  # superseded by an earlier entry
                continue
            actual = self._deadline_of(key)
            if actual == d:
                return d
            heapq.heappop(heap)
            self._moved(key, actual)
        return None

    def pop_due(self, now_ms: float) -> list[K]:
        """The keys whose deadline is due at `now_ms`, in deadline order, their entries taken (the
        owner schedules them again after handling them); entries found early move to the key's
        actual deadline."""
        heap, due = self._heap, []
        while heap and heap[0][0] <= now_ms:
            d, key = heapq.heappop(heap)
            if self._scheduled.get(key) != d:
                continue  # superseded
            del self._scheduled[key]
            actual = self._deadline_of(key)
            if actual is None:
                self._idle(key)
            elif actual > now_ms:
                self._scheduled[key] = actual
                heapq.heappush(heap, (actual, key))
            else:
                due.append(key)
        return due

    def clear(self) -> None:
        self._heap.clear()
        self._scheduled.clear()

    def _moved(self, key: K, actual: float | None) -> None:
        if actual is None:
            del self._scheduled[key]
            self._idle(key)
        else:
            self._scheduled[key] = actual
            heapq.heappush(self._heap, (actual, key))

    def _idle(self, key: K) -> None:
        if self._on_idle is not None:
            self._on_idle(key)
