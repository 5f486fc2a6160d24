"""Tiny roles for testing the simulator itself (not protocol roles)."""

from __future__ import annotations

from dataclasses import dataclass

from actors.contract import (
    Append,
    Envelope,
    Flush,
    FlushCompleted,
    Output,
    ShutdownRequested,
    StartContext,
    StopProcess,
)
from storage.modes import StorageMode


@dataclass(frozen=True, slots=True)
class Note:
    n: int


@dataclass(frozen=True, slots=True)
class Write:
    value: bytes


@dataclass(frozen=True, slots=True)
class Ack:
    value: bytes


class Recorder:
    """Remembers every delivery as (now_ms, src, payload) and every tick time."""

    def __init__(self, ctx: StartContext) -> None:
        self.node_id = ctx.node_id
        self.ctx = ctx
        self.received: list[tuple[float, str, object]] = []
        self.ticks: list[float] = []
        self.deadlines: list[float] = []

    def start(self, now_ms):
        return Output(next_deadline_ms=self.deadlines.pop(0) if self.deadlines else None)

    def handle(self, env: Envelope, now_ms):
        self.received.append((now_ms, env.src, env.payload))
        return Output()

    def tick(self, now_ms):
        self.ticks.append(now_ms)
        return Output()


class Sender:
    """Sends Note(0..count-1) to `dst` at start."""

    def __init__(self, ctx: StartContext, dst: str, count: int) -> None:
        self.node_id = ctx.node_id
        self.dst, self.count = dst, count

    def start(self, now_ms):
        return Output([Envelope(self.node_id, self.dst, Note(i)) for i in range(self.count)])

    def handle(self, env, now_ms):
        return Output()

    def tick(self, now_ms):
        return Output()


class AckingWriter:
    """Appends each Write to its log and acknowledges it to the sender; in fsync mode the ack
    waits for the write to be durable (docs/explanation/architecture.md: fsync = flush before acknowledging)."""

    def __init__(self, ctx: StartContext, mode: StorageMode) -> None:
        self.node_id = ctx.node_id
        self.mode = mode
        self.recovered = ctx.files.get("log", b"")
        self.clean_start = ctx.clean_shutdown_marker is not None
        self.flushed_tokens: list[object] = []

    def start(self, now_ms):
        return Output()

    def handle(self, env, now_ms):
        out = Output()
        p = env.payload
        if isinstance(p, Write):
            out.write(Append("log", p.value))
            out.send(Envelope(self.node_id, env.src, Ack(p.value), after_flush=self.mode.flush_before_ack))
        elif isinstance(p, FlushCompleted):
            self.flushed_tokens.append(p.token)
        elif isinstance(p, ShutdownRequested):
            out.write(StopProcess(marker=b"bye"))
        elif p == "flush":
            out.write(Flush(token="t1"))
        return out

    def tick(self, now_ms):
        return Output()


class StuckTimer:
    """A role whose deadline stays in the past once it is due: woken, it asks to be woken at the
    same instant again (the kind of liveness bug the simulator's stall guard reports)."""

    def __init__(self, ctx: StartContext) -> None:
        self.node_id = ctx.node_id

    def start(self, now_ms: float) -> Output:
        return Output(next_deadline_ms=now_ms + 5.0)

    def handle(self, env: Envelope, now_ms: float) -> Output:
        return Output()

    def tick(self, now_ms: float) -> Output:
        return Output(next_deadline_ms=now_ms)
