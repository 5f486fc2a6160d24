"""The driver's copy of a Ray cluster, shaped like the simulator's world for the shared readers.

The invariant checks (partition_watch, quorum_watch, metadata_invariants), the cluster view and the
clients read `sim.nodes[name].role`, `node.host.disk`, `sim.trace.sinks`... In the simulator those
are the live objects. On Ray the driver polls every actor for a copy of its role and the events it
emitted since the last poll (`NodeActor.snapshot`), and keeps them here, so the very same checkers
run on Ray, once per poll rather than after every event.

What that changes: a check sees the cluster at poll instants (every `poll_interval_ms`), and the
copies of different actors are taken a few milliseconds apart, not at one instant. The protocol's
invariants are about states that persist (a leader without committed data, an ISR member behind
the true HWM), so a poll sees them; a violation that would last less than a poll can go unseen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.runtime.sim.simulator import Violation
from storage.modes import StorageMode

EventRecord = tuple[float, str, str, dict[str, Any]]
FetchFiles = Callable[[str, bool], dict[str, bytes]]


class MirrorDisk:
    """A host's disk as the checks ask about it: which files were dirty at the last poll, and what a
    stopped node's directory holds (fetched from the host agent, cached per incarnation)."""

    def __init__(self, mode: StorageMode, fetch: FetchFiles) -> None:
        self.mode = mode
        self._fetch = fetch
        self.dirty: dict[str, set[str]] = {}
        self._cache: dict[tuple[str, bool], dict[str, bytes]] = {}

    def forget(self) -> None:
        self._cache.clear()

    def is_dirty(self, owner: str, path: str) -> bool:
        return path in self.dirty.get(owner, ())

    def _files(self, owner: str, durable: bool) -> dict[str, bytes]:
        key = (owner, durable)
        if key not in self._cache:
            self._cache[key] = self._fetch(owner, durable)
        return self._cache[key]

    def files_of(self, owner: str) -> dict[str, bytes]:
        return self._files(owner, False)

    def read_durable(self, owner: str, path: str) -> bytes | None:
        return self._files(owner, True).get(path)


class MirrorHost:
    def __init__(self, name: str, disk: MirrorDisk) -> None:
        self.name = name
        self.disk = disk


class MirrorNode:
    """Invariant: `role` is None exactly while the node's process is down."""

    def __init__(self, name: str, host: MirrorHost) -> None:
        self.name = name
        self.host = host
        self.role: Any = None
        self.handle: Any = None
        self.starts = 0
        self.incarnation = 0
        self.ray_node: str | None = None
        self.counters: dict[str, int] = {}


class MirrorTrace:
    def __init__(self) -> None:
        self.sinks: list[Callable[[EventRecord], None]] = []
        self.event_count = 0

    def event(self, record: EventRecord) -> None:
        self.event_count += 1
        for sink in self.sinks:
            sink(record)


class MirrorWorld:
    """The subset of `Simulator` the shared readers use."""

    def __init__(self, clock_ms: Callable[[], float]) -> None:
        self._clock_ms = clock_ms
        self.nodes: dict[str, MirrorNode] = {}
        self.hosts: dict[str, MirrorHost] = {}
        self.trace = MirrorTrace()
        self.invariant_sets: list[Callable[[], dict[str, str]]] = []
        self.violations: dict[str, Violation] = {}
        self.event_node: str | None = None  # unknown on Ray: checks never skip work by it

    @property
    def now_ms(self) -> float:
        return self._clock_ms()

    def add_invariant_set(self, check: Callable[[], dict[str, str]]) -> None:
        self.invariant_sets.append(check)

    def is_running(self, name: str) -> bool:
        return self.nodes[name].role is not None

    def record(self, source: str, kind: str, **fields: Any) -> None:
        self.trace.event((self.now_ms, source, kind, fields))

    def check_invariants(self) -> None:
        for check_set in self.invariant_sets:
            for name, detail in check_set().items():
                seen = self.violations.get(name)
                if seen is None:
                    self.violations[name] = Violation(name, round(self.now_ms, 3), detail)
                    self.record("runner", "invariant_violated", invariant=name, detail=detail)
                else:
                    seen.count += 1
