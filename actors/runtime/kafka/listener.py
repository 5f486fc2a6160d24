"""A broker's Kafka listener: a TCP server in the broker's own process, speaking Kafka's binary
protocol (size-prefixed frames) to real clients.

Each connection gets a gateway (gateway.py) and a name of its own, which the role sees as the
requests' source: the role's answers to that name come back here (`route`) instead of going on
the wire. Kafka clients send several requests on a connection without waiting (librdkafka's
max.in.flight); each is handled as it comes and the answers are written in the requests' order,
as Kafka's protocol requires. A request for an API the listener does not serve, or one it cannot
parse, and a frame longer than socket.request.max.bytes close the connection, as Kafka does; the
other connections are served on.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

from actors.contract import Envelope

from .gateway import BrokerPort, Connection, Gateway, UnknownApi

MAX_FRAME_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes, Kafka's default


class KafkaListener:
    def __init__(self, port: BrokerPort, node: str, incarnation: int) -> None:
        self.port = port
        self.node = node
        self.incarnation = incarnation
        self.server: asyncio.Server | None = None
        self.gateways: dict[str, Gateway] = {}
        self.connections = 0
        self.address: tuple[str, int] | None = None

    async def start(self, host: str) -> tuple[str, int]:
        """Listen on `host`, on a port the system picks; returns (host, port)."""
        self.server = await asyncio.start_server(self._serve, host, 0)
        self.address = (host, self.server.sockets[0].getsockname()[1])
        return self.address

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for gateway in self.gateways.values():
            gateway.close()
        self.gateways.clear()

    def route(self, envelope: Envelope) -> bool:
        """Take an answer of the role addressed to one of this listener's connections."""
        gateway = self.gateways.get(envelope.dst)
        if gateway is None:
            return envelope.dst.startswith("kafka:")  # a connection gone since: its answers are dropped
        gateway.on_reply(envelope.payload)
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        self.connections += 1
        n = self.connections
        name = f"kafka:{self.node}.{self.incarnation}.{n}"
        # The records a connection produces are one producer's in the history: the broker, its
        # incarnation and the connection's number make the name unique for the whole run.
        connection = Connection(peer=f"{host}:{port}", name=name, producer=f"{name}@{host}:{port}")
        gateway = Gateway(self.port, connection)
        self.gateways[name] = gateway
        answers: asyncio.Queue[asyncio.Task | None] = asyncio.Queue()
        writing = asyncio.get_running_loop().create_task(self._write_in_order(answers, writer))
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                if not 0 < size <= MAX_FRAME_BYTES:
                    break
                frame = await reader.readexactly(size)
                await answers.put(asyncio.get_running_loop().create_task(gateway.handle(frame)))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            await answers.put(None)
            with contextlib.suppress(Exception):
                await writing
            gateway.close()
            self.gateways.pop(name, None)
            writer.close()

    async def _write_in_order(self, answers: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        while True:
            task = await answers.get()
            if task is None:
                return
            try:
                response = await task
            except (UnknownApi, asyncio.CancelledError):
                writer.close()
                return
            if response is not None:
                writer.write(struct.pack(">i", len(response)) + response)
                await writer.drain()
