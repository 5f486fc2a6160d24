"""The data plane's wire between node actors: one TCP connection per directed link.

Why not Ray calls: measured here (2 cores, bench/ray_throughput.py prints it each run), an actor
call and its reply cost about 1.7 ms of CPU across the two processes, twelve times a round trip
over a TCP connection between the same two actors (0.14 ms), and the brokers' protocol work is a
small share of either. Kafka's own wire is TCP. So node actors exchange envelopes over connections
they open to each other, while Ray stays what it is good at: placing the actors on nodes, starting
and killing them, and the driver's calls (start, invoke, event polling, crashes).

- A node listens on its Ray node's address (an ephemeral port) from `listen` on; the driver hands
  every node its peers' addresses, and a restarted node's new one.
- A link is one connection, opened on the link's first send and again after it broke. TCP keeps
  a link's frames in order (per-link FIFO, as the simulator's network); a frame is one batch of
  envelopes `[(arrival time, Envelope), ...]` that queued on the link meanwhile.
- A frame is a 4-byte big-endian length and a pickle (protocol 5) of the batch. Pickle is what a
  Ray call would have used for the same objects; like Ray's own ports, the wire trusts the
  cluster's network. A connection starts with the run's token, and a listener drops a connection
  whose first frame is not it, so that a stray client cannot feed a node.
- A sender that crashes leaves on the wire what it wrote (the kernel still delivers it), as in the
  simulator; a receiver that crashes takes with it what it had not read. A broken connection
  raises in `send`: the caller counts the batch as dropped, as a lost TCP connection loses what
  was in flight.

This module imports neither ray nor any role: tests drive it on one event loop.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
from collections.abc import Callable
from typing import Any

HEADER = struct.Struct(">I")
Address = tuple[str, int]


def frame(payload: Any) -> bytes:
    body = pickle.dumps(payload, protocol=5)
    return HEADER.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next frame's payload. Raises `asyncio.IncompleteReadError` at the connection's end
    (a torn last frame included: a sender killed mid-write)."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    return pickle.loads(await reader.readexactly(size))


class WireListener:
    """A node's listening socket: every frame read from an accepted connection goes to `on_batch`
    in the connection's order. `token` is the run's: the first frame must be it."""

    def __init__(self, on_batch: Callable[[Any], None], token: bytes) -> None:
        self.on_batch = on_batch
        self.token = token
        self.server: asyncio.AbstractServer | None = None
        self.rejected = 0  # connections dropped for a wrong token
        self._readers: set[asyncio.Task] = set()

    async def start(self, host: str) -> Address:
        self.server = await asyncio.start_server(self._accept, host, 0)
        return self.server.sockets[0].getsockname()[:2]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._readers.add(task)
        try:
            if await read_frame(reader) != self.token:
                self.rejected += 1
                return
            while True:
                self.on_batch(await read_frame(reader))
        except (asyncio.IncompleteReadError, ConnectionError, pickle.UnpicklingError, EOFError):
            pass  # the sender ended, crashed or sent garbage: the connection is over
        except asyncio.CancelledError:
            # `close` (a crash freezes the process) or the actor's end: the connection is over.
            # Ending quietly: asyncio's stream callback logs a traceback for every reader task
            # that ends cancelled, a dozen per node in the worker logs of every run.
            pass
        finally:
            self._readers.discard(task)
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self._readers):
            task.cancel()


class WireLinks:
    """A node's outgoing connections, one per destination node. `addresses` is where each peer
    listens now (the driver updates it when a peer restarts).

    `local_address`: connect from this address (the node's own, with `--faults kernel`), so that
    the kernel's rules can tell the node's connections apart. `timeout_ms`: give up a connection
    whose data stays unacknowledged this long (TCP_USER_TIMEOUT), and a connect that takes this
    long. Without it, a link the kernel cuts keeps its frames in the socket's buffer and TCP
    retransmits them for minutes, with back-off, after the cut is healed; with it, the link breaks
    as Kafka's clients break a connection whose request timed out: what was in flight is lost
    (counted as dropped), and the next frame opens a new connection."""

    def __init__(self, token: bytes, local_address: str | None = None, timeout_ms: int | None = None) -> None:
        self.token = token
        self.local_address = local_address
        self.timeout_ms = timeout_ms
        self.addresses: dict[str, Address] = {}
        self._open: dict[str, tuple[Address, asyncio.StreamWriter]] = {}

    def set_address(self, name: str, address: Address) -> None:
        address = tuple(address)
        if self.addresses.get(name) != address:
            self.addresses[name] = address
            self._drop(name)  # a new process: the old connection leads nowhere

    async def send(self, dst: str, batch: Any) -> None:
        """Write one frame to `dst` and wait until the kernel took it (the link's order is the
        order of these calls: the caller has at most one in flight per link). Raises
        `ConnectionError` when `dst` has no address or the connection failed."""
        address = self.addresses.get(dst)
        if address is None:
            raise ConnectionError(f"no address for {dst}")
        writer = await self._writer(dst, address)
        try:
            writer.write(frame(batch))
            await writer.drain()
        except (ConnectionError, OSError) as e:
            self._drop(dst)
            raise ConnectionError(f"link to {dst} broke: {e}") from e

    async def _writer(self, dst: str, address: Address) -> asyncio.StreamWriter:
        held = self._open.get(dst)
        if held is not None and held[0] == address and not held[1].is_closing():
            return held[1]
        self._drop(dst)
        local = None if self.local_address is None else (self.local_address, 0)
        timeout_s = None if self.timeout_ms is None else self.timeout_ms / 1000
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(*address, local_addr=local), timeout_s)
        except (OSError, asyncio.TimeoutError) as e:
            raise ConnectionError(f"cannot reach {dst} at {address[0]}:{address[1]}: {e or 'timed out'}") from e
        if self.timeout_ms is not None:
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, self.timeout_ms)
        writer.write(frame(self.token))
        self._open[dst] = (address, writer)
        return writer

    def _drop(self, dst: str) -> None:
        held = self._open.pop(dst, None)
        if held is not None:
            held[1].close()

    def close(self) -> None:
        for dst in list(self._open):
            self._drop(dst)
