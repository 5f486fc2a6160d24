"""The node actors' wire (actors/runtime/ray/wire.py) on one event loop, over real sockets: a
link keeps its frames in order, a listener refuses a connection without the run's token, a
restarted peer is reached at its new address, and a dead peer's link raises (the sender counts
the batch dropped)."""

from __future__ import annotations

import asyncio

import pytest

from actors.runtime.ray.wire import WireLinks, WireListener, frame

TOKEN = b"run-token-0123456"


async def _eventually(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_link_delivers_its_batches_in_order_large_ones_included():
    async def scenario():
        got: list = []
        listener = WireListener(got.append, TOKEN)
        address = await listener.start("127.0.0.1")
        links = WireLinks(TOKEN)
        links.set_address("b2", address)
        batches = [[(float(i), f"envelope {i}")] for i in range(200)]
        batches.append([(200.0, b"x" * 3_000_000)])  # one frame far larger than a socket buffer
        for batch in batches:
            await links.send("b2", batch)
        await _eventually(lambda: len(got) == len(batches))
        links.close()
        listener.close()
        return got, batches

    got, batches = asyncio.run(scenario())
    assert got == batches


def test_a_connection_without_the_run_token_is_dropped_unread():
    async def scenario():
        got: list = []
        listener = WireListener(got.append, TOKEN)
        host, port = await listener.start("127.0.0.1")
        _, writer = await asyncio.open_connection(host, port)
        writer.write(frame(b"another run") + frame([(0.0, "forged")]))
        await writer.drain()
        await _eventually(lambda: listener.rejected == 1)
        writer.close()
        listener.close()
        return got

    assert asyncio.run(scenario()) == []


def test_a_restarted_peer_is_reached_at_its_new_address_and_a_dead_one_raises():
    async def scenario():
        first: list = []
        second: list = []
        old = WireListener(first.append, TOKEN)
        links = WireLinks(TOKEN)
        links.set_address("b2", await old.start("127.0.0.1"))
        await links.send("b2", ["before the crash"])
        await _eventually(lambda: first == [["before the crash"]])
        old.close()  # the process is gone: its port refuses, its connections end
        await asyncio.sleep(0.05)
        with pytest.raises(ConnectionError):
            for _ in range(50):  # the first writes may still land in the kernel's buffer
                await links.send("b2", ["into the void"])
                await asyncio.sleep(0.01)
        new = WireListener(second.append, TOKEN)
        links.set_address("b2", await new.start("127.0.0.1"))
        await links.send("b2", ["after the restart"])
        await _eventually(lambda: second == [["after the restart"]])
        links.close()
        new.close()
        return first

    assert asyncio.run(scenario()) == [["before the crash"]]


def test_a_peer_without_an_address_raises():
    async def scenario():
        await WireLinks(TOKEN).send("b9", ["x"])

    with pytest.raises(ConnectionError, match="no address for b9"):
        asyncio.run(scenario())


def test_closing_a_listener_ends_its_open_connections_without_a_logged_error():
    """A crash freezes the process by closing its listener: the reader tasks end quietly (asyncio
    reports a reader task that ends cancelled as an error, which filled every run's worker logs)."""

    async def scenario():
        reported: list = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: reported.append(context))
        got: list = []
        listener = WireListener(got.append, TOKEN)
        address = await listener.start("127.0.0.1")
        links = WireLinks(TOKEN)
        links.set_address("b2", address)
        await links.send("b2", [(0.0, "hello")])
        await _eventually(lambda: len(got) == 1)
        readers = list(listener._readers)
        listener.close()
        await asyncio.sleep(0.05)
        links.close()
        return reported, readers

    reported, readers = asyncio.run(scenario())
    assert len(readers) == 1 and readers[0].done() and not readers[0].cancelled()
    assert reported == []


def test_a_link_with_an_address_of_its_own_connects_from_it_with_a_user_timeout():
    """`--faults kernel`: a node's connections come from its own address (the kernel's rules name
    it), and carry TCP_USER_TIMEOUT, after which unacknowledged data breaks the link (that part
    needs a real cut: tests/testbed)."""
    import socket

    async def scenario():
        peers: list = []

        async def accept(reader, writer):
            peers.append(writer.get_extra_info("peername")[0])
            await reader.read()  # until the link closes
            writer.close()

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        links = WireLinks(TOKEN, local_address="127.0.0.3", timeout_ms=1500)
        links.set_address("b2", server.sockets[0].getsockname()[:2])
        await links.send("b2", [(0.0, "hello")])
        await _eventually(lambda: peers)
        _, writer = links._open["b2"]
        timeout = writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
        links.close()
        server.close()
        return peers, timeout

    peers, timeout = asyncio.run(scenario())
    assert peers == ["127.0.0.3"] and timeout == 1500
