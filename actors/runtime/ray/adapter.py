"""Every `ray.*` call of kraftlab, in one place (DESIGN.md): the node actor, the host agent and
the few driver-side calls (connect, place, call, kill).

Actors ask for no CPU (`num_cpus=0`): a cluster is a dozen mostly idle processes, and a 2-core
machine must hold them all. Hosts are failure domains: each emulated host is pinned to one Ray node
with a node-label selector (`ray.io/node-id`), and every actor of the host (its agent and its
nodes) runs there; `placement.assign_hosts` decides which host goes to which node.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

from actors.contract import Envelope
from actors.runtime.network import NetworkFaults
from storage.modes import CrashKind, StorageMode

from . import file_store
from .node_process import Clock, NodeProcess
from .role_specs import RoleSpec

NODE_LABEL = "ray.io/node-id"
HOST_UP_MARKER = ".host_up"
ACTOR_OPTIONS = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": 1000}


def _on_node(node_id: str) -> dict[str, Any]:
    return {"label_selector": {NODE_LABEL: node_id}}


# --- driver side ------------------------------------------------------------------------------


def connect(address: str | None) -> dict[str, Any]:
    """Join the cluster at `address` (or RAY_ADDRESS); with neither, start an embedded local Ray."""
    if ray.is_initialized():
        return {"address": "already connected", "embedded": False}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None:
        ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    else:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    return {"address": address or "local", "embedded": address is None}


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's live Ray nodes: id and address, in a stable order (head first)."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    nodes.sort(key=lambda n: (not n.get("Resources", {}).get("node:__internal_head__"), n["NodeID"]))
    return [{"node_id": n["NodeID"], "address": n.get("NodeManagerAddress", "?")} for n in nodes]


def get(refs, timeout_s: float | None = None):
    return ray.get(refs, timeout=timeout_s)


def wait_quietly(refs, timeout_s: float) -> list[Any]:
    """The results of the calls that finished within the timeout (None for the failed ones)."""
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    done = set(ready)
    out = []
    for ref in refs:
        if ref not in done:
            out.append(None)
            continue
        try:
            out.append(ray.get(ref))
        except Exception:  # noqa: BLE001 - a dead actor's answer: none
            out.append(None)
    return out


def kill(handle) -> None:
    try:
        ray.kill(handle, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone
        pass


def create_agent(host: str, node_id: str, root: str, mode: StorageMode, epoch_s: float):
    return HostAgent.options(**ACTOR_OPTIONS, **_on_node(node_id)).remote(host, node_id, root, mode.value, epoch_s)


def create_client(name: str, spec: RoleSpec, node_id: str, root: str, epoch_s: float, seed: int):
    """A client node: no host agent (clients have no data worth a failure domain)."""
    return NodeActor.options(**ACTOR_OPTIONS, **_on_node(node_id)).remote(
        name, spec, str(Path(root) / name), StorageMode.PAGE_CACHE.value, epoch_s, seed
    )


def node_is_alive(node_id: str) -> bool:
    return any(n["node_id"] == node_id for n in alive_nodes())


def shutdown() -> None:
    if ray.is_initialized():
        ray.shutdown()


# --- the actors ---------------------------------------------------------------------------------


@ray.remote
class NodeActor:
    """One broker, controller voter or client: a thin shell around `NodeProcess`."""

    def __init__(self, name: str, spec: RoleSpec, directory: str, mode: str, epoch_s: float, seed: int) -> None:
        self.name = name
        self.peers: dict[str, Any] = {}
        files = file_store.NodeFiles(Path(directory), StorageMode(mode), dirty_expire_ms=spec.dirty_expire_ms)
        self.process = NodeProcess(
            name, spec.factory(), files, Clock(epoch_s), self._transport, seed=seed,
            background_flush_interval_ms=spec.background_flush_interval_ms,
        )

    async def _transport(self, dst: str, batch: list[tuple[float, Envelope]]) -> None:
        handle = self.peers.get(dst)
        if handle is None:
            raise RayActorError()
        await handle.deliver.remote(batch)

    async def start(self, peers: dict[str, Any], faults: NetworkFaults) -> dict[str, Any]:
        self.peers = dict(peers)
        self.process.set_faults(faults)
        info = self.process.start()
        info["ray_node"] = ray.get_runtime_context().get_node_id()
        info["pid"] = os.getpid()
        return info

    async def deliver(self, batch: list[tuple[float, Envelope]]) -> None:
        self.process.deliver(batch)

    async def set_peer(self, name: str, handle) -> None:
        self.peers[name] = handle

    async def set_faults(self, faults: NetworkFaults) -> None:
        self.process.set_faults(faults)

    async def invoke(self, fn) -> Any:
        return self.process.invoke(fn)

    async def set_recording(self, on: bool) -> None:
        self.process.recording = on
        if not on:
            self.process.events.clear()

    async def request_shutdown(self) -> None:
        self.process.request_shutdown()

    async def snapshot(self) -> dict[str, Any]:
        """The role as it is now (a copy travels to the driver), with the events since the last
        snapshot and the files a crash could cut now."""
        p = self.process
        return {
            "role": p.role,
            "events": p.drain_events(),
            "dirty": p.files.dirty_paths(),
            "stopped": p.stopped,
            "links_idle": p.links_idle(),
            "counters": self._counters(),
        }

    def _counters(self) -> dict[str, Any]:
        p = self.process
        user_s, sys_s = os.times()[:2]
        return {"sent": p.sent, "dropped": p.dropped, "delivered": p.delivered, "fsyncs": p.files.fsyncs, "fsync_ms": p.files.fsync_ms, "flushes": p.files.flushes,
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

    def __init__(self, host: str, node_id: str, root: str, mode: str, epoch_s: float) -> None:
        self.host = host
        self.node_id = node_id
        self.root = Path(root) / host
        self.root.mkdir(parents=True, exist_ok=True)
        self.mode = StorageMode(mode)
        self.epoch_s = epoch_s
        self.nodes: dict[str, Any] = {}
        # A host that was up when its previous agent vanished (its Ray node was removed) went
        # down like an OS crash: its page cache is gone, so what was not flushed is lost.
        self.recovered_from_os_crash = (self.root / HOST_UP_MARKER).exists()
        if self.recovered_from_os_crash:
            for node_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
                file_store.os_crash(node_dir)
        (self.root / HOST_UP_MARKER).write_bytes(b"")

    def _dir(self, name: str) -> Path:
        return self.root / name

    async def where(self) -> dict[str, Any]:
        return {"ray_node": ray.get_runtime_context().get_node_id(), "recovered_from_os_crash": self.recovered_from_os_crash}

    async def close(self) -> None:
        """The host goes down cleanly (end of run): no crash to apply at the next agent's start."""
        await self._kill(list(self.nodes))
        (self.root / HOST_UP_MARKER).unlink(missing_ok=True)

    async def create_node(self, name: str, spec: RoleSpec, seed: int):
        """Create `name`'s process on this host (the driver starts it once its peers are known)."""
        if name in self.nodes:
            raise RuntimeError(f"{name} is already running on {self.host}")
        actor = NodeActor.options(**ACTOR_OPTIONS, **_on_node(self.node_id)).remote(
            name, spec, str(self._dir(name)), self.mode.value, self.epoch_s, seed
        )
        self.nodes[name] = actor
        return actor

    async def _kill(self, names) -> None:
        for name in list(names):
            actor = self.nodes.pop(name, None)
            if actor is not None:
                ray.kill(actor, no_restart=True)

    async def stopped(self, name: str) -> None:
        """A node finished a clean shutdown: its process exits."""
        await self._kill([name])

    async def crash(self, kind: str, name: str | None = None) -> dict[str, int]:
        crash = CrashKind(kind)
        if crash is CrashKind.PROCESS:
            await self._kill([name])
            if not self.mode.unflushed_survives_process_crash:
                return file_store.os_crash(self._dir(name))  # its buffer was process memory
            return {}
        await self._kill(list(self.nodes))
        if crash is CrashKind.DISK:
            file_store.wipe(self.root)
            self.root.mkdir(parents=True, exist_ok=True)
            return {}
        lost: dict[str, int] = {}
        for node_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for rel, n in file_store.os_crash(node_dir).items():
                lost[f"{node_dir.name}/{rel}"] = n
        return lost

    async def files(self, name: str, durable: bool) -> dict[str, bytes]:
        """A stopped node's files: as they are, or as an OS crash would leave them."""
        d = self._dir(name)
        return file_store.durable_view(d) if durable else file_store.visible_view(d)

    async def running(self) -> list[str]:
        return sorted(self.nodes)


# --- the transport ceiling (bench/ray_throughput.py) --------------------------------------------


@ray.remote
class EchoActor:
    """The far end of a bare actor-to-actor call: takes a payload, answers with its length."""

    async def echo(self, payload: bytes) -> int:
        return len(payload)

    async def call_loop(self, target, payload_bytes: int, in_flight: int, seconds: float) -> int:
        """Call `target.echo` with `payload_bytes` bytes, `in_flight` calls outstanding at once,
        for `seconds`; the number of calls answered."""
        payload = os.urandom(payload_bytes)
        end = time.monotonic() + seconds
        done = 0

        async def lane() -> None:
            nonlocal done
            while time.monotonic() < end:
                await target.echo.remote(payload)
                done += 1

        await asyncio.gather(*(lane() for _ in range(in_flight)))
        return done


def echo_round_trips_per_s(payload_bytes: int, in_flight: int, seconds: float) -> float:
    """Actor-to-actor round trips per second (same actor options as the node actors)."""
    caller = EchoActor.options(**ACTOR_OPTIONS).remote()
    target = EchoActor.options(**ACTOR_OPTIONS).remote()
    try:
        ray.get([caller.echo.remote(b""), target.echo.remote(b"")])  # both up before timing
        done = ray.get(caller.call_loop.remote(target, payload_bytes, in_flight, seconds))
        return done / seconds
    finally:
        kill(caller)
        kill(target)
