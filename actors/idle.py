"""`IdleNode`: the role every broker and controller node runs until the protocol roles land.

It is honest about what it is: a process that starts (recovering nothing but knowing whether its
last stop was clean), answers a controlled shutdown by stopping cleanly, and otherwise does
nothing. It lets the scenario runner, the simulator's crash and restart machinery and the storage
model be exercised end to end before the KRaft controller (issue 3) and the brokers' data plane
(issue 4) exist. Conditions about fencing, partitions or the quorum read as "unknown" with it.
"""

from __future__ import annotations

from actors.contract import Envelope, Output, ShutdownRequested, StartContext, StopProcess


class IdleNode:
    def __init__(self, ctx: StartContext) -> None:
        self.node_id = ctx.node_id
        self.clean_start = ctx.clean_shutdown_marker is not None

    def start(self, now_ms: float) -> Output:
        out = Output()
        out.emit("idle_node_started", clean=self.clean_start)
        return out

    def handle(self, envelope: Envelope, now_ms: float) -> Output:
        out = Output()
        if isinstance(envelope.payload, ShutdownRequested):
            out.write(StopProcess())
        return out

    def tick(self, now_ms: float) -> Output:
        return Output()
