"""Every `ray.*` call of kraftlab, in one place (docs/explanation/architecture.md): the node actor, the host agent and
the few driver-side calls (connect, place, call, kill).

Actors ask for no CPU (`num_cpus=0`): a cluster is a dozen mostly idle processes, and a 2-core
machine must hold them all. Hosts are failure domains: each emulated host is pinned to one Ray node
with a node-label selector (`ray.io/node-id`), and every actor of the host (its agent and its
nodes) runs there; `placement.assign_hosts` decides which host goes to which node.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import ray

from actors.contract import Envelope
from actors.runtime import interrupts
from actors.runtime.gc_tuning import tune_for_event_streams
from actors.runtime.network import NetworkFaults
from actors.survivors import survivors
from storage.modes import CrashKind, StorageMode

from . import file_store, host_addresses
from .node_process import Clock, NodeProcess
from .role_specs import RoleSpec
from .wire import Address, WireLinks, WireListener

NODE_LABEL = "ray.io/node-id"
HOST_UP_MARKER = ".host_up"
ACTOR_OPTIONS = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": 1000}
# `ray.kill` returns while the actor's process lives on for some milliseconds (tens, on a loaded
# machine), still able to write: whoever cuts or removes its files first waits for its end.
PROCESS_END_TIMEOUT_S = 10.0
# With `--faults kernel`: how long a wire connection may keep data unacknowledged, or take to
# connect, before it is given up (wire.py); Kafka's KRaft requests time out after 2 s
# (controller.quorum.request.timeout.ms).
KERNEL_WIRE_TIMEOUT_MS = 3_000


# The logs folder of the Ray session this process started (None when it joined a cluster, whose
# logs stay on its machines): an embedded run copies what Ray wrote there into its run directory.
_embedded_logs: Path | None = None


def _on_node(node_id: str) -> dict[str, Any]:
    return {"label_selector": {NODE_LABEL: node_id}}


# --- driver side ------------------------------------------------------------------------------


def ray_init_arguments(address: str | None, environ: Mapping[str, str],
                       worker_niceness: int | None = None) -> dict[str, Any]:
    """`ray.init`'s arguments: join `address` (or RAY_ADDRESS); with neither, start an embedded
    local Ray. Its address is "local", not None: a plain `ray.init()` joins the cluster that
    `ray start` last recorded on this machine (docs/reference: only `--address` or RAY_ADDRESS join).
    `worker_niceness`: the embedded Ray's workers' niceness (Ray's default is 15, so that its
    workers yield to the driver); a cluster joined keeps its own setting."""
    address = address or environ.get("RAY_ADDRESS") or None
    if address is None:
        arguments = {"address": "local", "include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
        if worker_niceness is not None:
            arguments["_system_config"] = {"worker_niceness": worker_niceness}
        return arguments
    return {"address": address, "logging_level": "ERROR", "log_to_driver": False}


ADDRESS_EXPECTED = ("expected the address of a running Ray cluster (host:port, as `ray start --head` prints it; "
                    "ray://host:port for Ray Client; auto for the cluster started on this machine), "
                    "or no address for an embedded local Ray")


def address_problem(address: str | None, environ: Mapping[str, str], timeout_s: float = 3.0) -> str | None:
    """Why the Ray cluster named by `address` (or RAY_ADDRESS) cannot be joined, found before
    anything runs; None when something answers there, or when none is named (an embedded Ray).

    Checked here because `ray.init` does not fail on an address where nothing listens: it retries
    for minutes, printing only Ray's own C++ warnings, and ignores SIGTERM meanwhile. Only that
    something accepts connections is checked; joining can still fail, and says why."""
    given, source = (address, "--address") if address else (environ.get("RAY_ADDRESS") or None, "RAY_ADDRESS")
    if given is None or given == "local":
        return None
    target = given.removeprefix("ray://")
    if target == "auto":
        from ray._private import services

        try:
            target = services.canonicalize_bootstrap_address("auto")
        except Exception as exc:  # noqa: BLE001 - Ray's lookup failing is the answer
            return f"{source} {given}: no Ray cluster found on this machine ({exc}); {ADDRESS_EXPECTED}"
        if target is None:
            return f"{source} {given}: no Ray cluster found on this machine; {ADDRESS_EXPECTED}"
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return f"{source} {given}: not host:port; {ADDRESS_EXPECTED}"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return f"{source} {given}: no Ray cluster answers at {host}:{port} ({why}); {ADDRESS_EXPECTED}"


def connect(address: str | None, worker_niceness: int | None = None) -> dict[str, Any]:
    """Join the cluster at `address` (or RAY_ADDRESS); with neither, start an embedded local Ray
    (its workers at `worker_niceness`, see `ray_init_arguments`)."""
    if ray.is_initialized():
        return {"address": "already connected", "embedded": False}
    global _embedded_logs
    arguments = ray_init_arguments(address, os.environ, worker_niceness)
    if arguments["address"] == "local":
        _token_of_this_process()
    if interrupts.installed():
        # While it starts, Ray puts in SIGTERM handlers of its own (the node's, then the driver's:
        # `sys.exit(15)` once a 30 s wait for a raylet the same signal killed is over): keep the
        # command's, so that SIGTERM stops the start at once. Ray looks the function up at each call.
        set_sigterm_handler = ray._private.utils.set_sigterm_handler
        ray._private.utils.set_sigterm_handler = lambda _handler: None
        try:
            ray.init(**arguments)
        finally:
            ray._private.utils.set_sigterm_handler = set_sigterm_handler
    else:
        ray.init(**arguments)
    interrupts.reclaim()  # and ray.init leaves Ray's C++ SIGTERM handler, which aborts the process
    _keep_ray_off_the_console()
    embedded = arguments["address"] == "local"
    if embedded:
        _embedded_logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    return {"address": arguments["address"], "embedded": embedded}


AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
_auth_environment_before: dict[str, str | None] | None = None


def _token_of_this_process() -> None:
    """Token authentication for an embedded Ray, with a token of this process's own (in its
    environment, which Ray's processes inherit), unless the user chose the mode or a token.

    Ray's default would write a token to ~/.ray/auth_token, for good; and from then on every
    driver of this machine that joins a cluster with `auto` turns token authentication on, so a
    cluster started without one (`ray up`, `ray start`) drops every actor it creates ("cancelled
    before it started running"): one `kraftlab demo` on a head node broke every later run there."""
    global _auth_environment_before
    if any(os.environ.get(name) for name in AUTH_VARIABLES):
        return
    _auth_environment_before = {name: os.environ.get(name) for name in AUTH_VARIABLES}
    # The mode stays unset: `ray.init` then turns token authentication on itself (and refreshes
    # its cached configuration), and finds this token instead of writing one.
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def _restore_auth_environment() -> None:
    """After an embedded Ray: this process joins a cluster next as if it had never started one."""
    global _auth_environment_before
    if _auth_environment_before is None:
        return
    for name, value in _auth_environment_before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _auth_environment_before = None
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _keep_ray_off_the_console() -> None:
    """A Ray driver prints on stdout whatever the raylets push to it, whatever `log_to_driver`
    says: with a dozen actors per run on few CPUs, warnings such as "N PYTHON worker processes
    have been started" by the dozen. Turn that printing off, as Ray's own debugger does
    (ray/util/rpdb.py). The same lines stay in Ray's session logs (raylet.out), which an embedded
    run copies into its run directory; Ray's errors in this process still reach stderr
    (`logging_level="ERROR"`), and a dead actor shows in the run's own results."""
    ray._private.worker._worker_logs_enabled = False


def runs_embedded_ray() -> bool:
    """This process started the Ray it is connected to (no address): Ray's processes are then its
    children, in its process group, and a Ctrl-C or SIGTERM sent to the group reaches them too."""
    return _embedded_logs is not None


def copy_embedded_logs(destination: Path, since: float) -> bool:
    """Copy into `destination` the log files the embedded Ray wrote since `since` (a `time.time()`):
    Ray's session logs, those of its system processes and of every worker, this run's among them.
    False when this process started no Ray."""
    if _embedded_logs is None:
        return False
    for folder, _, files in os.walk(_embedded_logs):
        for name in files:
            source = Path(folder) / name
            target = destination / source.relative_to(_embedded_logs)
            try:
                if not source.is_file() or source.stat().st_mtime < since:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
            except OSError:  # rotated or removed meanwhile: Ray goes on writing its logs
                continue
    return True


def task_submitter(fn: Callable[..., Any], num_cpus: float = 1) -> Callable[..., Future]:
    """`fn` as a Ray task: calling the result starts one (on any node with `num_cpus` free) and
    returns a `concurrent.futures.Future` of its value. No retry: a task whose worker dies (killed,
    out of memory) fails, and its caller records why, rather than running it twice."""
    remote = ray.remote(num_cpus=num_cpus, max_retries=0)(fn)
    return lambda *args: remote.remote(*args).future()


def cluster_cpus() -> int:
    return int(ray.cluster_resources().get("CPU", 1))


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's live Ray nodes: id and address, in a stable order (head first)."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    nodes.sort(key=lambda n: (not n.get("Resources", {}).get("node:__internal_head__"), n["NodeID"]))
    return [{"node_id": n["NodeID"], "address": n.get("NodeManagerAddress", "?")} for n in nodes]


def get(refs, timeout_s: float | None = None):
    return ray.get(refs, timeout=timeout_s)


def finished(refs, timeout_s: float) -> set:
    """The calls among `refs` that finished (answered or failed) within the timeout."""
    if not refs:
        return set()
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    return set(ready)


def wait_quietly(refs, timeout_s: float) -> list[Any]:
    """The results of the calls that finished within the timeout (None for the failed ones)."""
    done = finished(refs, timeout_s)
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


def create_kernel_fault_agents(node_ids: list[str]) -> dict[str, Any]:
    """One `KernelFaultAgent` on each of the Ray nodes (the hosts whose packet filters carry a
    run's rules)."""
    return {node_id: KernelFaultAgent.options(**ACTOR_OPTIONS, **_on_node(node_id)).remote() for node_id in node_ids}


def kernel_fault_problems(timeout_s: float = 60.0) -> list[str]:
    """Why the live Ray nodes cannot make a run's kernel faults (none: they can)."""
    agents = create_kernel_fault_agents([n["node_id"] for n in alive_nodes()])
    try:
        answers = ray.get([agent.problem.remote() for agent in agents.values()], timeout=timeout_s)
    finally:
        for agent in agents.values():
            kill(agent)
    return [problem for problem in answers if problem]


def this_node() -> str:
    """The Ray node this process runs on (a driver's, or a task's: a campaign's row names it)."""
    return ray.get_runtime_context().get_node_id()


def this_node_resource() -> str:
    """The custom resource only this process's Ray node has (`node:<its address>`, capacity 1):
    asking for a sliver of it places an actor on this node."""
    return f"node:{ray.util.get_node_ip_address()}"


def node_is_alive(node_id: str) -> bool:
    return any(n["node_id"] == node_id for n in alive_nodes())


def process_is_running(pid: int) -> bool:
    """Whether process `pid` of this machine still runs (a zombie has ended: it runs no code).
    Read from /proc: Linux only; elsewhere every process counts as ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # the state follows the command name


def wait_for_processes_to_end(pids, timeout_s: float = PROCESS_END_TIMEOUT_S) -> list[int]:
    """Wait until none of `pids` runs (at most `timeout_s`); the ones still running."""
    deadline = time.monotonic() + timeout_s
    running = [pid for pid in pids if process_is_running(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.005)
        running = [pid for pid in running if process_is_running(pid)]
    return running


def shutdown() -> None:
    global _embedded_logs
    if ray.is_initialized():
        ray.shutdown()
    _embedded_logs = None
    _restore_auth_environment()


# --- the actors ---------------------------------------------------------------------------------


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
        self.listener = WireListener(self.process.deliver, token)
        return await self.listener.start(address)

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


@ray.remote
class KernelFaultAgent:
    """Loads a run's packet-filter rules (actors/runtime/kernel_rules.py) into its host's kernel
    with `nft`: as root, or through passwordless `sudo -n nft` (on machines you own)."""

    def __init__(self) -> None:
        self.nft = ["nft"] if os.geteuid() == 0 else ["sudo", "-n", "nft"]
        self.where = f"{socket.gethostname()} ({ray.util.get_node_ip_address()})"

    def __repr__(self) -> str:
        return "KernelFaultAgent"

    def _nft(self, script: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.nft, "-f", "-"], input=script, text=True, capture_output=True)

    async def problem(self) -> str | None:
        """Why this host cannot make kernel faults, or None."""
        try:
            listed = subprocess.run([*self.nft, "list", "tables"], text=True, capture_output=True)
        except FileNotFoundError:
            return f"{self.where}: `{self.nft[0]}` is missing" + (" (the Debian package nftables)" if self.nft[0] == "nft" else "")
        if listed.returncode != 0:
            return (f"{self.where}: `{' '.join(self.nft)} list tables` failed ({listed.stderr.strip()}): "
                    "kernel faults need root, or passwordless `sudo nft` for this user")
        try:
            if host_addresses.free_count() == 0:
                return f"{self.where}: every node address of {host_addresses.HOST_FILE} is taken"
        except host_addresses.NoNodeAddress as exc:
            return f"{self.where}: {exc}"
        return None

    async def apply(self, script: str) -> None:
        done = self._nft(script)
        if done.returncode != 0:
            raise RuntimeError(f"{self.where}: nft -f failed: {done.stderr.strip()}\n{script}")


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
