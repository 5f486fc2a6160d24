"""The node actor (one kraftlab node: a broker, a voter or a client, in its own process) and the host
agent (an emulated host: its nodes' processes, its disk, its crashes), and their creation on
a host's Ray node."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import ray

from actors.contract import Envelope
from actors.runtime.gc_tuning import tune_for_event_streams
from actors.runtime.network import NetworkFaults
from actors.survivors import survivors
from storage.modes import CrashKind, StorageMode

from .. import file_store, host_addresses
from ...kafka.broker_port import NodeBrokerPort
from ...kafka.listener import KafkaListener
from ..node_process import Clock, NodeProcess
from ..role_specs import RoleSpec
from ..wire import Address, WireLinks, WireListener
from .constants import ACTOR_OPTIONS, HOST_UP_MARKER, KERNEL_WIRE_TIMEOUT_MS, _on_node
from .processes import wait_for_processes_to_end


def create_agent(host: str, node_id: str, root: str, mode: StorageMode, epoch_s: float, token: bytes, kernel: bool = False):
    """`kernel`: the run's faults are the kernel's (`--faults kernel`): its nodes take addresses of
    their own, and crashes are SIGKILLs."""
    return HostAgent.options(**ACTOR_OPTIONS, **_on_node(node_id)).remote(host, node_id, root, mode.value, epoch_s, token, kernel)


def create_client(name: str, spec: RoleSpec, node_id: str, root: str, epoch_s: float, seed: int, token: bytes,
                  kernel: bool = False):
    """A client node: no host agent (clients have no data worth a failure domain). Returns its
    handle and the address it listens on (wire.py)."""
    actor = NodeActor.options(**ACTOR_OPTIONS, **_on_node(node_id)).remote(
        name, spec, str(Path(root) / name), StorageMode.PAGE_CACHE.value, epoch_s, seed, 0
    )
    return actor, ray.get(actor.listen.remote(token, kernel))



async def _answer_or_none(ref, timeout_s: float = 30.0):
    """A call's answer, or None if the actor died first or did not answer in time."""
    try:
        return await asyncio.wait_for(ref, timeout_s)
    except Exception:  # noqa: BLE001 - a dead or stuck actor: no answer
        return None


@ray.remote
class NodeActor:
    """One broker, controller voter or client: a thin shell around `NodeProcess`."""

    def __init__(self, name: str, spec: RoleSpec, directory: str, mode: str, epoch_s: float, seed: int, incarnation: int) -> None:
        tune_for_event_streams()  # this process carries the node's messages and events
        self.name = name
        # The data plane's wire (wire.py): set up by `listen`, before `start`.
        self.listener: WireListener | None = None
        self.links: WireLinks | None = None
        self.address: str | None = None  # the address the node listens on (wire and Kafka listener)
        self.kafka: KafkaListener | None = None  # a broker's Kafka listener (`cluster.listeners: [kafka]`)
        self.incarnation = incarnation
        files = file_store.NodeFiles(Path(directory), StorageMode(mode), dirty_expire_ms=spec.dirty_expire_ms)
        self.process = NodeProcess(
            name, spec.factory(), files, Clock(epoch_s), self._transport, seed=seed, incarnation=incarnation,
            background_flush_interval_ms=spec.background_flush_interval_ms,
        )

    def __repr__(self) -> str:  # Ray's state API and dashboard show it (`repr_name`): which node this is
        return f"NodeActor({self.name})"

    async def _transport(self, dst: str, batch: list[tuple[float, Envelope]]) -> None:
        await self.links.send(dst, batch)

    async def listen(self, token: bytes, kernel: bool = False) -> Address:
        """Open the node's wire: listen on this Ray node's address, or with `kernel` on an address
        of the node's own, claimed from the host's pool for the process's life
        (host_addresses.py); returns it (host, port)."""
        if kernel:
            address, self._address_claim = host_addresses.claim()
            self.links = WireLinks(token, local_address=address, timeout_ms=KERNEL_WIRE_TIMEOUT_MS)
        else:
            address = ray.util.get_node_ip_address()
            self.links = WireLinks(token)
        self.address = address
        self.listener = WireListener(self.process.deliver, token)
        return await self.listener.start(address)

    async def listen_kafka(self) -> Address:
        """Open the broker's Kafka listener on the node's address (after `listen`); returns it."""
        port = NodeBrokerPort(self.process, int(self.name[1:]))
        self.kafka = KafkaListener(port, self.name, self.incarnation)
        self.process.local_route = self.kafka.route
        return await self.kafka.start(self.address)

    async def set_kafka_listeners(self, listeners: dict[int, Address]) -> None:
        """Every broker's Kafka listener, as Metadata answers advertise them."""
        if self.kafka is not None:
            self.kafka.port.listeners = {int(b): (a[0], int(a[1])) for b, a in listeners.items()}

    async def start(self, peers: dict[str, Address], faults: NetworkFaults) -> dict[str, Any]:
        for name, address in peers.items():
            if name != self.name:
                self.links.set_address(name, address)
        self.process.set_faults(faults)
        ray_node = ray.get_runtime_context().get_node_id()
        info = self.process.start(ray_node, os.getpid())
        info["ray_node"] = ray_node
        info["pid"] = os.getpid()
        return info

    async def pid(self) -> int:
        return os.getpid()

    async def set_peer(self, name: str, address: Address) -> None:
        """`name` runs a new process, listening at `address`."""
        self.links.set_address(name, address)

    async def set_faults(self, faults: NetworkFaults) -> None:
        self.process.set_faults(faults)

    async def invoke(self, fn) -> Any:
        return self.process.invoke(fn)

    async def set_recording(self, on: bool) -> None:
        self.process.recording = on
        if not on:
            self.process.events.clear()

    async def freeze(self) -> list:
        """Stop the process where it is (a crash is about to kill it) and hand over its events.
        It reads nothing more from the wire: what reaches it now dies with it."""
        if self.listener is not None:
            self.listener.close()
        if self.kafka is not None:
            self.kafka.close()
        return self.process.freeze()

    async def request_shutdown(self) -> None:
        self.process.request_shutdown()

    async def poll(self, cursor: int) -> dict[str, Any]:
        """The events from row `cursor` on (those before it are acknowledged: the driver has
        them), the process's clock now (the driver orders the history by it), whether it ended a
        controlled shutdown, and its counters. No role state travels: the history is the record."""
        p = self.process
        return {
            "events": p.events_since(cursor),
            "now_ms": p.clock.now_ms(),
            "stopped": p.stopped,
            "links_idle": p.links_idle(),
            "counters": self._counters(),
        }

    def _counters(self) -> dict[str, Any]:
        p = self.process
        user_s, sys_s = os.times()[:2]
        return {"sent": p.sent, "dropped": p.dropped, "delivered": p.delivered, "frames_sent": p.frames_sent, "frames_received": p.frames_received, "fsyncs": p.files.fsyncs, "fsync_ms": p.files.fsync_ms, "flushes": p.files.flushes,
                # CPU seconds (user + system) of this actor's process: what the node costs the machine;
                # the system part alone: the kernel's share (writes, fsyncs, sockets)
                "cpu_s": user_s + sys_s, "cpu_sys_s": sys_s}

    async def counters(self) -> dict[str, Any]:
        """The transport and storage counters alone (no role copy: cheap under load)."""
        return self._counters()


@ray.remote
class HostAgent:
    """An emulated host: owns its data directory (`root/<host>/<node>`) and its nodes' processes.

    Crashes are carried out here, where the files are: a process crash kills one actor (and, in
    process_buffer mode, the process's unflushed writes); an OS crash kills every actor of the
    host, then cuts every file to what was flushed; a disk loss kills them and wipes the directory.
    """

    def __init__(self, host: str, node_id: str, root: str, mode: str, epoch_s: float, token: bytes, kernel: bool = False) -> None:
        self.host = host
        self.token = token  # the run's wire token (wire.py), handed to the nodes it creates
        self.kernel = kernel  # `--faults kernel`: nodes on addresses of their own; crashes are SIGKILLs
        self.node_id = node_id
        self.root = Path(root) / host
        self.root.mkdir(parents=True, exist_ok=True)
        self.mode = StorageMode(mode)
        self.epoch_s = epoch_s
        self.nodes: dict[str, Any] = {}
        # Each node's process id, asked for at its creation: `_kill` waits for the process's end.
        self.pids: dict[str, Any] = {}
        # A host that was up when its previous agent vanished (its Ray node was removed) went
        # down like an OS crash: its page cache is gone, so what was not flushed is lost.
        self.recovered_from_os_crash = (self.root / HOST_UP_MARKER).exists()
        if self.recovered_from_os_crash:
            for node_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
                file_store.os_crash(node_dir)
        (self.root / HOST_UP_MARKER).write_bytes(b"")

    def __repr__(self) -> str:  # as NodeActor's: the host's name in Ray's state API
        return f"HostAgent({self.host})"

    def _dir(self, name: str) -> Path:
        return self.root / name

    async def where(self) -> dict[str, Any]:
        return {"ray_node": ray.get_runtime_context().get_node_id(), "recovered_from_os_crash": self.recovered_from_os_crash}

    async def close(self) -> None:
        """The host goes down cleanly (end of run): no crash to apply at the next agent's start.
        Returns once its nodes' processes have ended."""
        await self._kill(list(self.nodes))
        (self.root / HOST_UP_MARKER).unlink(missing_ok=True)

    async def remove_data(self) -> None:
        """Remove the host's folder (end of run, after `close`; only when the data root is the
        run's own): it is on this agent's machine, which on a multi-node cluster is not the
        driver's. There the agents alone made the root, so the last one to leave removes it (an
        `rmdir`: while another host's folder or the driver's clients are in it, it stays)."""
        file_store.wipe(self.root)
        with contextlib.suppress(OSError):
            self.root.parent.rmdir()

    async def create_node(self, name: str, spec: RoleSpec, seed: int, incarnation: int) -> tuple[Any, Address]:
        """Create `name`'s process on this host (the driver starts it once its peers are known).
        Returns its handle and the address it listens on."""
        if name in self.nodes:
            raise RuntimeError(f"{name} is already running on {self.host}")
        actor = NodeActor.options(**ACTOR_OPTIONS, **_on_node(self.node_id)).remote(
            name, spec, str(self._dir(name)), self.mode.value, self.epoch_s, seed, incarnation
        )
        self.nodes[name] = actor
        self.pids[name] = actor.pid.remote()  # answered once the process is up
        return actor, await actor.listen.remote(self.token, self.kernel)

    async def _kill(self, names) -> list:
        """Kill the processes; returns the events each had not handed over yet (frozen first, so
        that nothing happens between the last event and the kill). Returns once the processes
        have ended: one that outlives `ray.kill` by some milliseconds could still write into files
        a crash is about to cut or a folder about to be removed."""
        events: list = []
        pids = []
        for name in list(names):
            actor = self.nodes.pop(name, None)
            if actor is not None:
                pids.append(await _answer_or_none(self.pids.pop(name)))
                try:
                    events += await actor.freeze.remote()
                except Exception:  # noqa: BLE001 - already dead: its last events are gone with it
                    pass
                if self.kernel and pids[-1] is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pids[-1], signal.SIGKILL)  # the kernel ends it, as it ends a crashed process
                ray.kill(actor, no_restart=True)
        await asyncio.to_thread(wait_for_processes_to_end, [pid for pid in pids if pid is not None])
        return events

    async def stopped(self, name: str) -> None:
        """A node finished a clean shutdown: its process exits."""
        await self._kill([name])

    async def crash(self, kind: str, name: str | None = None) -> dict[str, Any]:
        """Crash one process or the whole host. Returns the killed processes' last `events` and,
        per node, the bytes the crash took (`lost`)."""
        crash = CrashKind(kind)
        if crash is CrashKind.PROCESS:
            events = await self._kill([name])
            lost = {}
            if not self.mode.unflushed_survives_process_crash:
                lost = {name: sum(file_store.os_crash(self._dir(name)).values())}  # its buffer was process memory
            return {"events": events, "lost": lost, "survived": self._survivors([name])}
        killed = list(self.nodes)
        events = await self._kill(killed)
        lost: dict[str, int] = {}
        if crash is CrashKind.DISK:
            lost = {d.name: file_store.bytes_on_disk(d) for d in sorted(self.root.iterdir()) if d.is_dir()}
            file_store.wipe(self.root)
            self.root.mkdir(parents=True, exist_ok=True)
        else:
            for node_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
                lost[node_dir.name] = sum(file_store.os_crash(node_dir).values())
        return {"events": events, "lost": lost, "survived": self._survivors(killed)}

    def _survivors(self, names: list[str]) -> list:
        """What each crashed node's files hold now, as the history tells it (actors/survivors.py)."""
        return [ev for name in names for ev in survivors(name, file_store.visible_view(self._dir(name)), file_store.durable_view(self._dir(name)))]

    async def files(self, name: str, durable: bool) -> dict[str, bytes]:
        """A stopped node's files: as they are, or as an OS crash would leave them."""
        d = self._dir(name)
        return file_store.durable_view(d) if durable else file_store.visible_view(d)

    async def running(self) -> list[str]:
        return sorted(self.nodes)
