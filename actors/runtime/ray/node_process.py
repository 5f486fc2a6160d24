"""One node's process on real time: the event loop around a role (the Ray actor's body).

It does for one node what the simulator does for all of them, on asyncio and real files:

- inputs: envelopes delivered in batches (`deliver`), the role's single timer, local calls
  (`invoke`: a client command, an admin call), flush completions;
- outputs: storage operations applied to `NodeFiles` at once; sends queued per destination link;
  events numbered (`node_seq`, per incarnation, one number per history row) and kept until the
  driver acknowledges them (`events_since`: the driver's cursor, not a drain, so an answer lost on
  the way loses nothing).

Durability before acknowledgement (actors/contract.py): after a batch of inputs, if any send is
marked `after_flush` and files are dirty (or the role asked for a `Flush`), the batch's sends wait
for a flush. The fsync runs on a worker thread, as the simulator's modelled fsync runs on its disk:
the node goes on handling inputs meanwhile, and everything that needs a flush while one is in
flight shares the next one (group commit). Sends that need no flush wait behind those that do, so
they stay in their order on each link.

Per-link FIFO: Ray orders nothing across senders, and not even one sender's calls to an async
actor. Each link has one sender task with at most one call in flight; envelopes that queue up
meanwhile travel together in the next call (one Ray call per batch of requests, never per record).
Network faults are applied here, in the send path, from the driver's `NetworkFaults` copy: a lost
envelope is never sent; a delayed one is sent at once with its arrival time, and the receiver holds
it (and what follows it on the link, as TCP would) until then. A delayed message is therefore on
the wire, not in its sender: it still arrives if the sender crashes meanwhile, as in the simulator.

This module does not import ray: `transport(dst, envelopes)` is the coroutine that carries a batch,
so tests drive nodes over an in-process transport.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
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
from actors.runtime.network import NetworkFaults
from observability.events import EventRecord, ProcessStart, ProcessStop, StorageFlushed

from .file_store import FileFlush, NodeFiles

Transport = Callable[[str, list[tuple[float, Envelope]]], Awaitable[None]]


class Clock:
    """Milliseconds since the run's start (`epoch_s`, shared by every process of the run)."""

    def __init__(self, epoch_s: float) -> None:
        self.epoch_s = epoch_s

    def now_ms(self) -> float:
        return (time.time() - self.epoch_s) * 1000.0


class _Link:
    """The queue of one directed link. Invariant: release times are non-decreasing (FIFO)."""

    __slots__ = ("last_release", "queue", "task", "wakeup")

    def __init__(self) -> None:
        self.queue: deque[tuple[float, Envelope]] = deque()
        self.wakeup = asyncio.Event()
        self.last_release = 0.0
        self.task: asyncio.Task | None = None


class _FlushBatch:
    """A flush and what waits for it: the sends held back and the tokens to report. `flush` is None
    while the batch is still open (not begun: later requests join it)."""

    __slots__ = ("flush", "sends", "tokens")

    def __init__(self) -> None:
        self.flush: FileFlush | None = None
        self.sends: list[Envelope] = []
        self.tokens: list[Any] = []


class NodeProcess:
    def __init__(
        self,
        name: str,
        factory: RoleFactory,
        files: NodeFiles,
        clock: Clock,
        transport: Transport,
        *,
        seed: int,
        incarnation: int = 0,
        background_flush_interval_ms: float = 5_000.0,
    ) -> None:
        self.name = name
        self.incarnation = incarnation
        self.factory = factory
        self.files = files
        self.clock = clock
        self.transport = transport
        self.rng = random.Random(seed)
        self.faults = NetworkFaults()
        self.background_flush_interval_ms = background_flush_interval_ms
        self.role: Role | None = None
        self.stopped = False
        # Invariant: `events` holds, in order, every event numbered from `events[0].node_seq` on
        # that the driver has not acknowledged; `next_seq` is the number of the next row.
        self.events: deque[EventRecord] = deque()
        self.next_seq = 0
        # False while nobody collects events (a benchmark's measured phase): they are numbered
        # but not kept (the history shows the gap).
        self.recording = True
        self._links: dict[str, _Link] = {}
        self._inbound: dict[str, deque[tuple[float, Envelope]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._flush_task: asyncio.Task | None = None
        # Flushes in order: the head is in flight (or about to be), the tail may be open.
        # Invariant: only the tail can be open, and every send held here was produced after every
        # send of the batches before it.
        self._flushes: deque[_FlushBatch] = deque()
        self._flusher: asyncio.Task | None = None
        self._fsync_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fsync-{name}")
        # Envelopes for names served in this process rather than over the wire (a Kafka
        # listener's client connections, actors/runtime/kafka/listener.py): True when taken.
        self.local_route: Callable[[Envelope], bool] | None = None
        self.sent = self.dropped = self.delivered = 0
        # Transport calls made (each carries what queued on one link meanwhile) and batches received
        self.frames_sent = self.frames_received = 0

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self, ray_node: str | None = None, pid: int | None = None) -> dict[str, Any]:
        marker = self.files.take_clean_shutdown_marker()
        ctx = StartContext(self.name, self.files.read_all(), marker, random.Random(self.rng.getrandbits(64)))
        # The start and what the role recovers share one instant: the readers judge a node's
        # events of one instant together, never a started broker whose logs are not yet told.
        now = self.clock.now_ms()
        self._record(now, ProcessStart(marker is not None, ray_node, pid))
        self.role = self.factory(ctx)
        self._flush_task = asyncio.get_running_loop().create_task(self._background_flush_loop())
        self._run(lambda now: self.role.start(now), at_ms=now)
        return {"clean": marker is not None}

    async def _background_flush_loop(self) -> None:
        while not self.stopped:
            await asyncio.sleep(self.background_flush_interval_ms / 1000.0)
            if not self.stopped:
                now = self.clock.now_ms()
                files = self.files.background_flush(now)
                if files:
                    self._record(now, StorageFlushed(files, "writeback"))

    # --- inputs ---------------------------------------------------------------------------------

    def deliver(self, items: list[tuple[float, Envelope]]) -> None:
        """A batch from one link: (arrival time, envelope), arrival times non-decreasing. What may
        arrive now is handled now; the rest waits behind the link's earlier messages."""
        self.frames_received += 1
        if self.role is None or self.stopped or not items:
            return
        src = items[0][1].src
        now = self.clock.now_ms()
        held = self._inbound.get(src)
        ready: list[Envelope] = []
        for i, (at, env) in enumerate(items):
            if held or at > now:
                if held is None:
                    held = self._inbound[src] = deque()
                    asyncio.get_running_loop().create_task(self._release(src, held))
                held.extend(items[i:])
                break
            ready.append(env)
        self._handle(ready)

    def _handle(self, envelopes: list[Envelope]) -> None:
        if envelopes and self.role is not None and not self.stopped:
            self.delivered += len(envelopes)
            self._run_many([lambda now, e=e: self.role.handle(e, now) for e in envelopes])

    async def _release(self, src: str, held: deque[tuple[float, Envelope]]) -> None:
        """Hand over a link's delayed messages at their arrival times, in order."""
        while held and not self.stopped:
            wait_ms = held[0][0] - self.clock.now_ms()
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000.0)
            now = self.clock.now_ms()
            ready = []
            while held and held[0][0] <= now:
                ready.append(held.popleft()[1])
            self._handle(ready)
        del self._inbound[src]

    def invoke(self, fn: Callable[[Role, float], Any]) -> Any:
        """A local call on the role; an `Output` it returns is carried out, anything else returned
        (from `(Output, value)`, the output carried out and the value returned)."""
        if self.role is None or self.stopped:
            raise RuntimeError(f"{self.name} is not running")
        result: list[Any] = []

        def call(now: float) -> Output | None:
            value = fn(self.role, now)
            if isinstance(value, Output):
                return value
            if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], Output):
                result.append(value[1])
                return value[0]
            result.append(value)
            return None

        self._run(call)
        return result[0] if result else None

    def request_shutdown(self) -> None:
        self._run(lambda now: self.role.handle(Envelope("runner", self.name, ShutdownRequested()), now))

    def _on_timer(self) -> None:
        self._timer = None
        if self.role is not None and not self.stopped:
            self._run(lambda now: self.role.tick(now))

    # --- carrying out outputs -------------------------------------------------------------------

    def _run(self, step: Callable[[float], Output | None], at_ms: float | None = None) -> None:
        self._run_many([step], at_ms)

    def _run_many(self, steps: list[Callable[[float], Output | None]], at_ms: float | None = None) -> None:
        """Feed inputs to the role, apply storage, then send (after a flush if a send waits on it)."""
        sends: list[Envelope] = []
        tokens: list[Any] = []
        deadline: float | None = None
        stop: StopProcess | None = None
        for step in steps:
            now = self.clock.now_ms() if at_ms is None else at_ms
            at_ms = None  # only the first step is given its instant
            out = step(now)
            if out is None:
                continue
            for op in out.storage:
                kind = type(op)
                if kind is Append:
                    self.files.append(op.path, op.data, now)
                elif kind is Truncate:
                    self.files.truncate(op.path, op.size, now)
                elif kind is Replace:
                    self.files.replace(op.path, op.data, now)
                elif kind is Delete:
                    self.files.delete(op.path)
                elif kind is Flush:
                    tokens.append(op.token)
                elif kind is StopProcess:
                    stop = op
                else:
                    raise TypeError(f"{self.name} returned an unknown storage operation {op!r}")
            for ev in out.events:
                self._record(now, ev)
            sends.extend(out.sends)
            if out.next_deadline_ms is not None:
                deadline = out.next_deadline_ms
        if tokens or (self.files.is_dirty() and any(e.after_flush for e in sends)):
            batch = self._open_flush()
            batch.sends.extend(sends)
            batch.tokens.extend(t for t in tokens if t is not None)
        elif self._flushes:
            self._flushes[-1].sends.extend(sends)  # behind what waits for a flush
        else:
            for env in sends:
                self._enqueue(env)
        if deadline is not None:
            self._set_timer(deadline)
        if stop is not None:
            self._stop_cleanly(stop.marker)

    def _open_flush(self) -> _FlushBatch:
        """The open flush batch (begun later, so it covers every write made until then)."""
        if not self._flushes or self._flushes[-1].flush is not None:
            self._flushes.append(_FlushBatch())
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_in_order())
        return self._flushes[-1]

    async def _flush_in_order(self) -> None:
        """Serve the flush batches one at a time: begin (here), fsync (worker thread), complete
        (here), then release the batch's sends and report its tokens."""
        loop = asyncio.get_running_loop()
        try:
            while self._flushes and not self.stopped:
                batch = self._flushes[0]
                batch.flush = self.files.begin_flush()
                await loop.run_in_executor(self._fsync_thread, batch.flush.sync)
                if self.stopped:
                    return
                files = self.files.complete_flush(batch.flush)
                if files:
                    self._record(self.clock.now_ms(), StorageFlushed(files, "fsync"))
                self._flushes.popleft()
                for env in batch.sends:
                    self._enqueue(env)
                if batch.tokens:
                    self._run_many([lambda now, t=t: self.role.handle(Envelope(self.name, self.name, FlushCompleted(t)), now) for t in batch.tokens])
        finally:
            self._flusher = None

    def _set_timer(self, deadline_ms: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        delay_s = max(deadline_ms - self.clock.now_ms(), 0.0) / 1000.0
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _stop_cleanly(self, marker: bytes) -> None:
        # A clean shutdown flushes everything first, so what waited on a flush can go out now
        # (as the simulator's `_stop_cleanly`); tokens are not reported to a stopped role.
        self.files.write_clean_shutdown_marker(marker)
        self.stopped = True
        for batch in self._flushes:
            for env in batch.sends:
                self._enqueue(env)
        self._flushes.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._record(self.clock.now_ms(), ProcessStop(True))

    # --- the network ----------------------------------------------------------------------------

    def set_faults(self, faults: NetworkFaults) -> None:
        self.faults = faults

    def _enqueue(self, env: Envelope) -> None:
        if self.local_route is not None and self.local_route(env):
            return
        extra = 0.0
        if self.faults.active:
            extra = self.faults.fate(env.src, env.dst, self.rng.random)
            if extra is None:
                self.dropped += 1
                return
        link = self._links.get(env.dst)
        if link is None:
            link = self._links[env.dst] = _Link()
            link.task = asyncio.get_running_loop().create_task(self._pump(env.dst, link))
        release = max(self.clock.now_ms() + extra, link.last_release)
        link.last_release = release
        link.queue.append((release, env))
        link.wakeup.set()

    async def _pump(self, dst: str, link: _Link) -> None:
        queue = link.queue
        while True:
            if not queue:
                link.wakeup.clear()
                await link.wakeup.wait()
                continue
            batch = list(queue)
            queue.clear()
            try:
                self.frames_sent += 1
                await self.transport(dst, batch)
                self.sent += len(batch)
            except Exception:  # the receiver is down or restarting: its connection is gone
                self.dropped += len(batch)

    # --- what the driver reads ------------------------------------------------------------------

    def links_idle(self) -> bool:
        """Nothing waits to be sent (a stopped process may exit without losing a message)."""
        return not self._flushes and all(not link.queue for link in self._links.values())

    def record(self, event: Any) -> None:
        """An event of this node recorded from outside its role (a Kafka listener's requests)."""
        self._record(self.clock.now_ms(), event)

    def _record(self, now: float, event: Any) -> None:
        seq = self.next_seq
        self.next_seq = seq + event.row_count
        if self.recording:
            self.events.append(EventRecord(now, self.name, self.incarnation, seq, event))

    def events_since(self, cursor: int) -> list[EventRecord]:
        """Every kept event from row `cursor` on. The driver has everything before `cursor`, so
        those are forgotten now (the acknowledgement); the rest stay until a later cursor passes
        them."""
        events = self.events
        while events and events[0].node_seq + events[0].event.row_count <= cursor:
            events.popleft()
        return list(events)

    def freeze(self) -> list[EventRecord]:
        """Stop handling anything (the process is about to be killed: a crash happens here) and
        return every event not acknowledged yet, so that the history ends where the process did."""
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for link in self._links.values():  # what was not on the wire yet dies with the process
            link.queue.clear()
            if link.task is not None:
                link.task.cancel()
        return list(self.events)

    def close(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for link in self._links.values():
            if link.task is not None:
                link.task.cancel()
        if self._flush_task is not None:
            self._flush_task.cancel()
        self._fsync_thread.shutdown(wait=True)  # no fsync may run on a descriptor closed below
        self.files.close()
