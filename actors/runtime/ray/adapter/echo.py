"""The transport ceilings (bench/ray_throughput.py): an echo actor, and round trips per second
over Ray calls or over the wire."""

from __future__ import annotations

import asyncio
import os
import secrets
import time

import ray

from ..wire import Address, WireLinks, WireListener
from .calls import kill
from .constants import ACTOR_OPTIONS

# --- the transport ceilings (bench/ray_throughput.py) -------------------------------------------


@ray.remote
class EchoActor:
    """The far end of a bare actor-to-actor exchange: takes a payload, answers with its length,
    over a Ray actor call or over the node actors' wire (wire.py)."""

    def __init__(self) -> None:
        self.links: WireLinks | None = None
        self.listener: WireListener | None = None
        self._waiting: dict[int, asyncio.Future] = {}

    async def echo(self, payload: bytes) -> int:
        return len(payload)

    async def listen(self, token: bytes) -> Address:
        """Open the wire as a node actor does; every frame `(peer, call id, payload)` is answered
        to `peer` with `(call id, len(payload))`, and every answer wakes its caller."""
        self.links = WireLinks(token)
        self.listener = WireListener(self._on_frame, token)
        return await self.listener.start(ray.util.get_node_ip_address())

    async def set_peer(self, name: str, address: Address) -> None:
        self.links.set_address(name, address)

    def _on_frame(self, frame) -> None:
        if len(frame) == 3:  # a call: answer it on our own link back, in order
            peer, call_id, payload = frame
            asyncio.get_running_loop().create_task(self.links.send(peer, (call_id, len(payload))))
        else:
            call_id, _ = frame
            self._waiting.pop(call_id).set_result(None)

    async def call_loop(self, target, payload_bytes: int, in_flight: int, seconds: float, wire: bool) -> int:
        """Call `target` with `payload_bytes` bytes, `in_flight` calls outstanding at once, for
        `seconds`; the number of calls answered."""
        payload = os.urandom(payload_bytes)
        end = time.monotonic() + seconds
        done = 0
        next_id = 0

        async def over_wire() -> None:
            nonlocal next_id
            call_id, next_id = next_id, next_id + 1
            answered = self._waiting[call_id] = asyncio.get_running_loop().create_future()
            await self.links.send("target", ("caller", call_id, payload))
            await answered

        async def lane() -> None:
            nonlocal done
            while time.monotonic() < end:
                if wire:
                    await over_wire()
                else:
                    await target.echo.remote(payload)
                done += 1

        await asyncio.gather(*(lane() for _ in range(in_flight)))
        return done


def echo_round_trips_per_s(payload_bytes: int, in_flight: int, seconds: float, wire: bool = True) -> float:
    """Actor-to-actor round trips per second (same actor options as the node actors): over the
    node actors' wire (`wire`, what the data path uses) or over a Ray actor call."""
    caller = EchoActor.options(**ACTOR_OPTIONS).remote()
    target = EchoActor.options(**ACTOR_OPTIONS).remote()
    try:
        ray.get([caller.echo.remote(b""), target.echo.remote(b"")])  # both up before timing
        if wire:
            token = secrets.token_bytes(16)
            caller_at, target_at = ray.get([caller.listen.remote(token), target.listen.remote(token)])
            ray.get([caller.set_peer.remote("target", target_at), target.set_peer.remote("caller", caller_at)])
        done = ray.get(caller.call_loop.remote(target, payload_bytes, in_flight, seconds, wire))
        return done / seconds
    finally:
        kill(caller)
        kill(target)
