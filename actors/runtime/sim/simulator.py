"""The deterministic simulator: one seed, virtual time, seeded faults.

Everything that could vary between two runs goes through `self.rng`, one `random.Random` seeded
from the run's seed: message latencies, random drops, fsync latencies, and (through streams derived
from it at each process start) the roles' own randomness. Events wait in a heap ordered by
`(virtual time, sequence number)`, so simultaneous events run in the order they were scheduled and
the virtual clock never goes back. The same seed and code give the same trace (see `trace.py`).

The world:
- *hosts* are failure domains, each with one `SimDisk` (the page cache and the durable layer);
- *nodes* are processes on a host, each running one role (see `actors.contract`);
- the *network* delivers envelopes with a sampled latency, per-link FIFO as over TCP (a message
  never overtakes an earlier one on the same directed link), subject to `NetworkFaults`.

A message addressed to a process that has since died or restarted is dropped (its TCP connection
is gone); messages already on the wire when their sender dies are still delivered.

After every event the registered invariants (global-state checks over all nodes) run; violations
are recorded with their time and the run goes on (campaigns want every violation; a role's own
broken assertion raises and stops the simulation).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from actors.contract import (
    Append,
    Delete,
    Envelope,
    Flush,
    FlushCompleted,
    Output,
    Replace,
    Role,
    RoleFactory,
    ShutdownRequested,
    StartContext,
    StopProcess,
    Truncate,
)
from actors.runtime.network import LatencyModel, NetworkFaults
from observability.events import (
    DRIVER,
    CrashLost,
    Fault,
    HostBoot,
    InvariantViolated,
    ProcessStart,
    ProcessStop,
    StorageFlushed,
)
from storage.disk import FlushTicket, SimDisk
from storage.modes import CrashKind, StorageMode

from .trace import TraceRecorder

# Heap entry kinds (small ints: compared only when time and sequence tie, which they never do).
_DELIVER, _TICK, _FLUSH_DONE, _CALL, _BACKGROUND_FLUSH = range(5)

RUNNER = "runner"
"""The pseudo-node scenario steps and tests send from (it is never a destination)."""
DRIVER_INCARNATION = 0


@dataclass(frozen=True)
class SimConfig:
    seed: int = 0
    latency: LatencyModel = field(default_factory=LatencyModel)
    # fsync takes this long; flushes on one disk are served one after another.
    fsync_latency: LatencyModel = field(default_factory=lambda: LatencyModel("uniform", 0.5, 2.0))
    # How often the OS writeback (page_cache, fsync) or the process's own buffer flush
    # (process_buffer) runs on each host; page_cache writes back data dirty >= dirty_expire_ms.
    background_flush_interval_ms: float = 5_000.0
    dirty_expire_ms: float = 30_000.0


@dataclass
class Violation:
    invariant: str
    at_ms: float
    detail: str
    count: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "at_ms": self.at_ms, "detail": self.detail, "count": self.count}


class SimHost:
    __slots__ = ("disk", "disk_free_at_ms", "name", "nodes", "up")

    def __init__(self, name: str, disk: SimDisk) -> None:
        self.name = name
        self.disk = disk
        self.up = True
        self.nodes: list[str] = []
        self.disk_free_at_ms = 0.0  # flushes queue on the disk: the next one starts no earlier


class _FlushBatch:
    """A flush in flight and what waits for it: sends held back and a token to report."""

    __slots__ = ("report", "sends", "ticket", "token")

    def __init__(self, ticket: FlushTicket) -> None:
        self.ticket = ticket
        self.sends: list[Envelope] = []
        self.token: Any = None
        self.report = False


class SimNode:
    """A process slot on a host. `role` is None while the process is down.

    Invariant: `incarnation` grows by one at every stop and every start, so anything scheduled for
    an earlier incarnation (messages, timers, flush completions) is recognised as stale. The
    history numbers a node's processes differently (docs/reference): `generation` is 0 for the first
    process and grows by one at each restart.
    """

    __slots__ = ("factory", "flushes", "host", "incarnation", "name", "role", "starts", "timer_seq")

    @property
    def generation(self) -> int:
        return max(self.starts - 1, 0)

    def __init__(self, name: str, host: SimHost, factory: RoleFactory) -> None:
        self.name = name
        self.host = host
        self.factory = factory
        self.role: Role | None = None
        self.incarnation = 0
        self.timer_seq = 0
        self.flushes: deque[_FlushBatch] = deque()
        self.starts = 0


# How many events may fall at one instant of virtual time before the simulator calls it stalled:
# every role asks to be woken at a time after its last wake-up when it has nothing due, so a run of
# this many at one instant is a role whose deadline stays in the past (it would spin a CPU on Ray)
# and time would never reach the next step. A real instant holds a few thousand at most (a
# thousand partitions' fetches answered together).
STALL_EVENTS = 200_000


class TimeStalled(RuntimeError):
    """Virtual time stopped: `STALL_EVENTS` events at one instant (a liveness bug of a role)."""


class Simulator:
    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.seed = self.config.seed
        self.rng = random.Random(self.config.seed)
        self.now_ms = 0.0
        self._heap: list[tuple] = []
        self._seq = 0
        self.hosts: dict[str, SimHost] = {}
        self.nodes: dict[str, SimNode] = {}
        self.network = NetworkFaults()
        self.trace = TraceRecorder()
        self._latency = self.config.latency.sampler(self.rng)
        self._fsync_latency = self.config.fsync_latency.sampler(self.rng)
        # Per directed link, the time the last message on it is delivered (FIFO as over TCP).
        self._link_clock: dict[tuple[str, str], float] = {}
        self.invariants: list[tuple[str, Callable[[Simulator], str | None]]] = []
        self.invariant_sets: list[Callable[[], dict[str, str]]] = []
        self.violations: dict[str, Violation] = {}
        self.events_processed = 0
        # Called as `observer(node, kind)` for each node a crash took down, once its disk has
        # taken the crash (the cluster reports what survived: actors/survivors.py).
        self.crash_observers: list[Callable[[str, CrashKind], None]] = []

    # --- building the world -----------------------------------------------------------------

    def add_host(self, name: str, mode: StorageMode) -> SimHost:
        if name in self.hosts:
            raise ValueError(f"host {name!r} already exists")
        host = self.hosts[name] = SimHost(name, SimDisk(mode, dirty_expire_ms=self.config.dirty_expire_ms))
        self._schedule(self.now_ms + self.config.background_flush_interval_ms, _BACKGROUND_FLUSH, host, None)
        return host

    def add_node(self, name: str, host: str, factory: RoleFactory, *, start: bool = True) -> SimNode:
        if name in self.nodes or name == RUNNER:
            raise ValueError(f"node {name!r} already exists")
        h = self.hosts[host]
        node = self.nodes[name] = SimNode(name, h, factory)
        h.nodes.append(name)
        if start:
            self.start(name)
        return node

    def add_invariant(self, name: str, check: Callable[[Simulator], str | None]) -> None:
        """`check(sim)` returns None when the invariant holds, else a one-line description."""
        self.invariants.append((name, check))

    def add_invariant_set(self, check: Callable[[], dict[str, str]]) -> None:
        """`check()` returns the invariants violated since its last call (name -> description)."""
        self.invariant_sets.append(check)

    # --- scheduling -------------------------------------------------------------------------

    def _schedule(self, at_ms: float, kind: int, a: Any, b: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at_ms, self._seq, kind, a, b))

    def call_at(self, at_ms: float, fn: Callable[[], None]) -> None:
        """Run `fn()` at virtual time `at_ms` (used by scenario steps and tests)."""
        self._schedule(max(at_ms, self.now_ms), _CALL, fn, None)

    def next_event_ms(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    # --- running ----------------------------------------------------------------------------

    def step(self) -> bool:
        """Process the next event; False when none is left."""
        if not self._heap:
            return False
        at_ms, _, kind, a, b = heapq.heappop(self._heap)
        # Invariant: virtual time never goes back (the heap pops in time order).
        self.now_ms = at_ms
        self.events_processed += 1
        if kind == _DELIVER:
            self._deliver(a, b)
        elif kind == _TICK:
            node = a
            if node.role is not None and b == node.timer_seq:
                self._apply(node, node.role.tick(at_ms))
        elif kind == _FLUSH_DONE:
            self._flush_done(a, b)
        elif kind == _CALL:
            a()
        else:
            self._background_flush(a)
        if self.invariants or self.invariant_sets:
            self._check_invariants()
        return True

    def run_until(self, until_ms: float, stop: Callable[[], bool] | None = None) -> bool:
        """Run events up to and including time `until_ms`; then the clock reads `until_ms`.

        With `stop`, it is checked before the first event and after each; the run halts as soon as
        it returns True, and run_until returns True. Otherwise returns False.
        """
        heap = self._heap
        if stop is not None and stop():
            return True
        instant, at_instant = self.now_ms, 0
        while heap and heap[0][0] <= until_ms:
            if heap[0][0] == instant:
                at_instant += 1
                if at_instant >= STALL_EVENTS:
                    raise TimeStalled(self._stalled(instant))
            else:
                instant, at_instant = heap[0][0], 0
            self.step()
            if stop is not None and stop():
                return True
        self.now_ms = max(self.now_ms, until_ms)
        return False

    def _stalled(self, instant: float) -> str:
        due = [e for e in self._heap if e[0] == instant]
        woken = sorted({e[3].name for e in due if isinstance(e[3], SimNode)})
        return (f"virtual time stopped at {instant:.3f} ms: {STALL_EVENTS} events at that instant"
                + (f"; nodes woken again and again: {', '.join(woken)}" if woken else ""))

    def run_for(self, duration_ms: float, stop: Callable[[], bool] | None = None) -> bool:
        return self.run_until(self.now_ms + duration_ms, stop)

    def _check_invariants(self) -> None:
        for name, check in self.invariants:
            detail = check(self)
            if detail is not None:
                self._violated(name, detail)
        for check_set in self.invariant_sets:
            self.report(check_set())

    def report(self, found: dict[str, str]) -> None:
        """Violations found (invariant -> detail), now."""
        for name, detail in found.items():
            self._violated(name, detail)

    def _violated(self, name: str, detail: str) -> None:
        seen = self.violations.get(name)
        if seen is None:
            self.violations[name] = Violation(name, self.now_ms, detail)
            self.record(InvariantViolated(name, detail))
        else:
            seen.count += 1

    # --- the network ------------------------------------------------------------------------

    def transmit(self, env: Envelope) -> None:
        """Put an envelope on the wire (or lose it, by the faults in force)."""
        src, dst = env.src, env.dst
        node = self.nodes.get(dst)
        if node is None:
            raise KeyError(f"{src} sent {type(env.payload).__name__} to unknown node {dst!r}")
        extra = 0.0
        if self.network.active:
            extra = self.network.fate(src, dst, self.rng.random)
            if extra is None:
                self.trace.dropped(self.now_ms, src, dst, env.payload, "network")
                return
        at = self.now_ms + self._latency() + extra
        key = (src, dst)
        last = self._link_clock.get(key, 0.0)
        at = max(at, last)
        self._link_clock[key] = at
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, _DELIVER, env, node.incarnation))

    def invoke(self, name: str, fn: Callable[[Role, float], Output | None]) -> None:
        """Call `fn(role, now_ms)` on a running node and carry out the Output it returns (a local
        API call on the process, e.g. an admin command handled in place)."""
        node = self.nodes[name]
        if node.role is None:
            raise RuntimeError(f"{name} is not running")
        self._apply(node, fn(node.role, self.now_ms))

    def send_from_runner(self, dst: str, payload: Any) -> None:
        """Hand a local command to a node (a client's produce request, an admin call...)."""
        self.transmit(Envelope(RUNNER, dst, payload))

    def _deliver(self, env: Envelope, incarnation: int) -> None:
        node = self.nodes[env.dst]
        if node.role is None or node.incarnation != incarnation:
            self.trace.dropped(self.now_ms, env.src, env.dst, env.payload, "receiver down")
            return
        self.trace.delivered(self.now_ms, env.src, env.dst, env.payload)
        self._apply(node, node.role.handle(env, self.now_ms))

    # --- carrying out a role's output -------------------------------------------------------

    def _apply(self, node: SimNode, out: Output | None) -> None:
        if out is None:
            return
        stop: StopProcess | None = None
        if out.storage:
            stop = self._apply_storage(node, out.storage)
            if node.role is None:  # the output came from a process that was stopped meanwhile
                return
        if out.events:
            record, generation = self.trace.event, node.generation
            for ev in out.events:
                record(self.now_ms, node.name, generation, ev)
        for env in out.sends:
            if node.flushes:
                # A flush is in flight with sends waiting on it: queue behind them so that no
                # message overtakes an earlier one from this node.
                if env.after_flush and node.host.disk.dirty_bytes(node.name):
                    self._begin_flush(node).sends.append(env)
                else:
                    node.flushes[-1].sends.append(env)
            elif env.after_flush and node.host.disk.dirty_bytes(node.name):
                self._begin_flush(node).sends.append(env)
            else:
                self.transmit(env)
        if out.next_deadline_ms is not None:
            node.timer_seq += 1
            self._schedule(max(out.next_deadline_ms, self.now_ms), _TICK, node, node.timer_seq)
        if stop is not None:
            self._stop_cleanly(node, stop.marker)

    def _apply_storage(self, node: SimNode, ops: Iterable) -> StopProcess | None:
        disk, owner, now = node.host.disk, node.name, self.now_ms
        stop = None
        for op in ops:
            kind = type(op)
            if kind is Append:
                disk.append(owner, op.path, op.data, now)
            elif kind is Truncate:
                disk.truncate(owner, op.path, op.size, now)
            elif kind is Replace:
                disk.replace(owner, op.path, op.data, now)
            elif kind is Delete:
                disk.delete(owner, op.path)
            elif kind is Flush:
                batch = self._begin_flush(node)
                batch.token, batch.report = op.token, True
            elif kind is StopProcess:
                stop = op
            else:
                raise TypeError(f"{owner} returned an unknown storage operation {op!r}")
        return stop

    def _begin_flush(self, node: SimNode) -> _FlushBatch:
        host = node.host
        batch = _FlushBatch(host.disk.begin_flush(node.name))
        start = max(self.now_ms, host.disk_free_at_ms)
        done = start + self._fsync_latency()
        host.disk_free_at_ms = done
        node.flushes.append(batch)
        self._schedule(done, _FLUSH_DONE, node, (node.incarnation, batch))
        return batch

    def _flush_done(self, node: SimNode, payload: tuple[int, _FlushBatch]) -> None:
        incarnation, batch = payload
        if node.incarnation != incarnation or node.role is None:
            return  # the process died first: the data did not become durable through this flush
        node.host.disk.complete_flush(batch.ticket)
        if batch.ticket.pending:
            self.trace.event(self.now_ms, node.name, node.generation, StorageFlushed(len(batch.ticket.pending), "fsync"))
        # Flushes on one disk complete in order, so this batch is the oldest in flight.
        popped = node.flushes.popleft()
        assert popped is batch, "flush completions out of order"
        for env in batch.sends:
            self.transmit(env)
        if batch.report:
            self._apply(node, node.role.handle(Envelope(node.name, node.name, FlushCompleted(batch.token)), self.now_ms))

    def _background_flush(self, host: SimHost) -> None:
        if host.up:
            for owner, files in sorted(host.disk.background_flush_by_owner(self.now_ms).items()):
                node = self.nodes.get(owner)
                if node is not None and node.role is not None:  # as on Ray: a running process tells
                    self.trace.event(self.now_ms, owner, node.generation, StorageFlushed(files, "writeback"))
        self._schedule(self.now_ms + self.config.background_flush_interval_ms, _BACKGROUND_FLUSH, host, None)

    # --- process lifecycle and crashes ------------------------------------------------------

    def start(self, name: str) -> None:
        """Start (or restart) a node's process, recovering its role from what its disk kept."""
        node = self.nodes[name]
        if node.role is not None:
            raise RuntimeError(f"{name} is already running")
        host = node.host
        if not host.up:
            host.up = True
            self.record(HostBoot(host.name))
        marker = host.disk.take_clean_shutdown_marker(name)
        ctx = StartContext(
            node_id=name,
            files=host.disk.files_of(name),
            clean_shutdown_marker=marker,
            rng=random.Random(self.rng.getrandbits(64)),
        )
        node.incarnation += 1
        node.starts += 1
        node.role = node.factory(ctx)
        self.trace.event(self.now_ms, name, node.generation, ProcessStart(marker is not None))
        self._apply(node, node.role.start(self.now_ms))

    def _kill(self, node: SimNode) -> None:
        node.role = None
        node.incarnation += 1
        node.timer_seq += 1
        node.flushes.clear()

    def crash(self, name: str, kind: CrashKind) -> None:
        """Crash a node: its process, its whole host (OS), or its host's disk."""
        node = self.nodes[name]
        host = node.host
        self.record(Fault(f"crash_{kind.value}", name, backend="sim"))
        if kind is CrashKind.PROCESS:
            if node.role is not None:
                self._kill(node)
                self._record_lost(host.disk.crash(CrashKind.PROCESS, owner=name))
                self._crashed([name], kind)
            return
        crashed = [other for other in host.nodes if self.nodes[other].role is not None]
        for other in crashed:
            self._kill(self.nodes[other])
        host.up = False
        host.disk_free_at_ms = self.now_ms
        self._record_lost(host.disk.crash(kind))
        self._crashed(crashed, kind)

    def _crashed(self, names: list[str], kind: CrashKind) -> None:
        for name in names:
            for observer in self.crash_observers:
                observer(name, kind)

    def _record_lost(self, lost: dict[str, int]) -> None:
        for owner, n in sorted(lost.items()):
            self.record(CrashLost(owner, n))

    def request_shutdown(self, name: str) -> None:
        """Ask a node's role for a controlled shutdown; it ends with a `StopProcess` output."""
        node = self.nodes[name]
        if node.role is None:
            raise RuntimeError(f"{name} is not running")
        self.record(Fault("shutdown", name, backend="sim"))
        self._apply(node, node.role.handle(Envelope(RUNNER, name, ShutdownRequested()), self.now_ms))

    def _stop_cleanly(self, node: SimNode, marker: bytes) -> None:
        # A clean shutdown flushes everything first, so what waited on a flush can go out now.
        node.host.disk.write_clean_shutdown_marker(node.name, marker, self.now_ms)
        for batch in node.flushes:
            for env in batch.sends:
                self.transmit(env)
        self.trace.event(self.now_ms, node.name, node.generation, ProcessStop(True))
        self._kill(node)

    def is_running(self, name: str) -> bool:
        return self.nodes[name].role is not None

    # --- the record -------------------------------------------------------------------------

    def record(self, event: Any) -> None:
        """Add an event of the driver's (a fault, a step, a check's finding) to the history."""
        self.trace.event(self.now_ms, DRIVER, DRIVER_INCARNATION, event)

    def trace_hash(self) -> str:
        return self.trace.hexdigest()
