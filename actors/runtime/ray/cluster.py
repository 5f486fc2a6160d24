"""A scenario's cluster on Ray: the `ClusterRuntime` the scenario runner drives with `--runtime ray`.

Every broker and controller voter is a host of its own (a failure domain with its own data
directory and host agent), placed on a Ray node by `placement.assign_hosts`; clients are node
actors on the head node. The driver polls the actors (`refresh`) for copies of their roles and
their events; conditions, the summary and the invariant checks read those copies (mirror.py).
Time is real: `wait` sleeps, `wait_for` polls until its condition holds or its timeout passes.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from actors.runtime.clients import Clients
from actors.runtime.network import NetworkFaults
from actors.runtime.readout import RoleCluster, RoleClusterView
from actors.runtime.sim.partition_watch import PartitionInvariants
from actors.runtime.sim.quorum_watch import watch_quorum
from actors.settings import ClusterSettings
from controller_quorum.metadata_invariants import MetadataInvariants
from kraftlab.scenario.schema import Scenario, split_partition_ref
from storage.modes import CrashKind, StorageMode
from workloads.runtime_api import StepFailed

from . import adapter, file_store
from .mirror import MirrorDisk, MirrorHost, MirrorNode, MirrorWorld
from .placement import assign_hosts
from .role_specs import RoleSpec

BOOTSTRAP_TIMEOUT_MS = 90_000.0
POLL_INTERVAL_MS = 50.0
CALL_TIMEOUT_S = 30.0
# An `expect` whose values the polled copies cannot tell yet waits this long for them (steps.py).
UNKNOWN_GRACE_MS = 2_000.0


class RayCluster(RoleCluster):
    unknown_grace_ms = UNKNOWN_GRACE_MS
    bootstrap_timeout_ms = BOOTSTRAP_TIMEOUT_MS

    def __init__(
        self,
        scenario: Scenario,
        event_sinks: Sequence[Callable] = (),
        *,
        address: str | None = None,
        data_root: Path | None = None,
        poll_interval_ms: float = POLL_INTERVAL_MS,
        check_invariants: bool = True,
    ) -> None:
        self.scenario = scenario
        spec = scenario.cluster
        self.settings = ClusterSettings.from_spec(spec)
        self.mode = StorageMode(spec.storage)
        self.poll_interval_ms = poll_interval_ms
        self.connection = adapter.connect(address)
        self._own_data_root = data_root is None
        self.data_root = Path(data_root) if data_root is not None else Path(tempfile.mkdtemp(prefix="kraftlab-data-"))
        self.epoch_s = time.time()
        self.sim = MirrorWorld(lambda: (time.time() - self.epoch_s) * 1000.0)
        self.sim.trace.sinks.extend(event_sinks)
        self.faults = NetworkFaults()
        self.quorum_elections = 0
        self.sim.trace.sinks.append(self._count)
        self.clients: Clients | None = None
        self._view = RoleClusterView(self)
        self._next_seed = scenario.seed * 1_000_003
        self._closed = False
        self.observing = True

        brokers = [f"b{i}" for i in range(1, self.settings.brokers + 1)]
        voters = list(self.settings.voters)
        ray_nodes = [n["node_id"] for n in adapter.alive_nodes()]
        self.head_node = ray_nodes[0]
        self.placement = assign_hosts(brokers, voters, ray_nodes)
        self.agents: dict[str, Any] = {}
        self.specs: dict[str, RoleSpec] = {}
        disk = spec.disk
        for name in brokers + voters:
            self.agents[name] = adapter.create_agent(name, self.placement[name], str(self.data_root), self.mode, self.epoch_s)
            host = MirrorHost(name, MirrorDisk(self.mode, lambda owner, durable, host=name: self._fetch_files(host, owner, durable)))
            self.sim.hosts[name] = host
            self.sim.nodes[name] = MirrorNode(name, host)
            kind = "broker" if name.startswith("b") else "controller"
            self.specs[name] = RoleSpec(kind, self.settings, dirty_expire_ms=disk.dirty_expire_ms, background_flush_interval_ms=disk.background_flush_interval_ms)
        try:
            handles = adapter.get([self.agents[n].create_node.remote(n, self.specs[n], self._seed()) for n in brokers + voters], CALL_TIMEOUT_S)
            for name, handle in zip(brokers + voters, handles, strict=True):
                self.sim.nodes[name].handle = handle
            self._start_nodes(brokers + voters)
            quorum = watch_quorum(self.sim, self.settings.voters, prevote=self.settings.protocol.prevote)
            self.quorum_invariants = quorum
            metadata_checks = MetadataInvariants(
                self._view.image, lambda topic, img, rf: self.any_controller().policy(topic, img, rf), elr_enabled=self.settings.protocol.elr
            )
            self.sim.add_invariant_set(metadata_checks.check)
            self.bootstrap()
            self.clients = Clients(self)
            self.partition_invariants = PartitionInvariants(self)
            self.sim.add_invariant_set(self.partition_invariants.check)
            if not check_invariants:
                self.sim.invariant_sets.clear()
        except BaseException:
            self.close()
            raise

    def _seed(self) -> int:
        self._next_seed += 1
        return self._next_seed

    def _count(self, record) -> None:
        if record[2] == "raft_leader_elected":
            self.quorum_elections += 1

    # --- processes ----------------------------------------------------------------------------

    def _peers(self) -> dict[str, Any]:
        return {name: node.handle for name, node in self.sim.nodes.items() if node.handle is not None}

    def _start_nodes(self, names: list[str]) -> None:
        peers = self._peers()
        infos = adapter.get([self.sim.nodes[n].handle.start.remote(peers, self.faults) for n in names], CALL_TIMEOUT_S)
        for name, info in zip(names, infos, strict=True):
            node = self.sim.nodes[name]
            node.starts += 1
            node.incarnation += 1
            node.ray_node = info["ray_node"]
            node.host.disk.forget()
            self.sim.record(name, "process_start", clean=info["clean"], incarnation=node.incarnation, ray_node=info["ray_node"], pid=info["pid"])
        self.refresh()

    def _announce(self, name: str) -> None:
        """Tell every other running node where `name`'s new process is."""
        handle = self.sim.nodes[name].handle
        refs = [n.handle.set_peer.remote(name, handle) for other, n in self.sim.nodes.items() if other != name and n.role is not None]
        adapter.wait_quietly(refs, CALL_TIMEOUT_S)

    def _fetch_files(self, host: str, owner: str, durable: bool) -> dict[str, bytes]:
        agent = self.agents[host]
        if agent is None:  # the host's Ray node is gone: read its folder if this machine sees it
            folder = self.data_root / host / owner
            return file_store.durable_view(folder) if durable else file_store.visible_view(folder)
        return adapter.get(agent.files.remote(owner, durable), CALL_TIMEOUT_S)

    def _mark_down(self, name: str) -> None:
        node = self.sim.nodes[name]
        node.role = None
        node.handle = None
        node.incarnation += 1
        node.host.disk.forget()

    # --- polling --------------------------------------------------------------------------------

    def stop_observing(self) -> None:
        """From now on nothing is polled and no event is kept: the actors run unwatched. For
        benchmarks, once the cluster is up (a role copy per poll would cost more than the load);
        the mirror keeps the last copies and checks nothing more; `invoke` no longer polls."""
        self.observing = False
        adapter.wait_quietly([n.handle.set_recording.remote(False) for n in self.sim.nodes.values() if n.handle is not None], CALL_TIMEOUT_S)

    def counters(self, name: str) -> dict[str, Any]:
        """`name`'s transport and storage counters (messages, fsyncs and the time they took)."""
        return adapter.get(self.sim.nodes[name].handle.counters.remote(), CALL_TIMEOUT_S)

    def refresh(self) -> None:
        """Collect every running actor's role copy and events; feed the events to the sinks in time
        order; run the invariant checks once."""
        if not self.observing:
            return
        running = [(name, node) for name, node in self.sim.nodes.items() if node.handle is not None]
        snaps = adapter.wait_quietly([node.handle.snapshot.remote() for _, node in running], CALL_TIMEOUT_S)
        events = []
        stopped = []
        lost_hosts = set()
        for (name, node), snap in zip(running, snaps, strict=True):
            if snap is None:
                # Died under us. If its Ray node is gone, its host went down as in an OS crash.
                if name in self.agents and not adapter.node_is_alive(self.placement[name]):
                    lost_hosts.add(name)
                continue
            node.role = snap["role"]
            node.counters = snap["counters"]
            node.host.disk.dirty[name] = set(snap["dirty"])
            events.extend(snap["events"])
            if snap["stopped"] and snap["links_idle"]:
                stopped.append(name)
        events.sort(key=lambda e: e[0])
        for record in events:
            self.sim.trace.event(record)
        for host in sorted(lost_hosts):
            self._host_lost(host)
        for name in stopped:
            if name in self.agents:
                adapter.get(self.agents[name].stopped.remote(name), CALL_TIMEOUT_S)
            self._mark_down(name)
        self.sim.check_invariants()

    def _host_lost(self, host: str) -> None:
        """The Ray node under `host` left the cluster: every process of the host died with its page
        cache (an OS crash). A restart brings the host up on another node, from its directory."""
        self.sim.record(host, "crash", mode=CrashKind.OS.value, host=host, cause="ray_node_lost", ray_node=self.placement[host])
        self._mark_down(host)
        self.agents[host] = None

    def _replace_agent(self, host: str) -> None:
        alive = [n["node_id"] for n in adapter.alive_nodes()]
        load = {n: sum(1 for h, where in self.placement.items() if where == n and self.agents.get(h) is not None) for n in alive}
        target = min(alive, key=lambda n: (load[n], alive.index(n)))
        self.placement[host] = target
        self.agents[host] = adapter.create_agent(host, target, str(self.data_root), self.mode, self.epoch_s)
        info = adapter.get(self.agents[host].where.remote(), CALL_TIMEOUT_S)
        self.sim.record(host, "host_moved", ray_node=target, recovered_from_os_crash=info["recovered_from_os_crash"])

    # --- bring-up -------------------------------------------------------------------------------

    def cluster_ready_fields(self) -> dict[str, Any]:
        return {"placement": self.placement_report()}

    def admin(self, call) -> None:
        """Run an admin call on the active controller, waiting (bounded) for one to exist."""
        if not self.run_until(lambda: self.active_controller()[0] is not None, BOOTSTRAP_TIMEOUT_MS):
            raise StepFailed("no active controller to take the admin call")
        name, _ = self.active_controller()
        self.invoke(name, lambda role, now: role.admin(call, now))
        error = self.invoke(name, lambda role, now: role.last_admin_error)
        if error is not None:
            raise StepFailed(f"the controller refused: {error}")

    def placement_report(self) -> dict[str, str]:
        """Which Ray node each node's process runs on now (the summary's placement)."""
        return {name: node.ray_node or "?" for name, node in sorted(self.sim.nodes.items())}

    # --- what the shared clients need -------------------------------------------------------------

    def add_client(self, name: str, kind: str, producer_id: int = 0) -> None:
        host = MirrorHost(name, MirrorDisk(StorageMode.PAGE_CACHE, lambda owner, durable: {}))
        node = self.sim.nodes[name] = MirrorNode(name, host)
        self.specs[name] = RoleSpec(kind, self.settings, producer_id=producer_id)
        node.handle = adapter.create_client(name, self.specs[name], self.head_node, str(self.data_root / "clients"), self.epoch_s, self._seed())
        self._announce(name)
        self._start_nodes([name])

    def invoke(self, name: str, fn) -> Any:
        node = self.sim.nodes[name]
        if node.handle is None:
            raise StepFailed(f"{name} is not running")
        result = adapter.get(node.handle.invoke.remote(fn), CALL_TIMEOUT_S)
        self.refresh()
        return result

    # --- ClusterRuntime -----------------------------------------------------------------------

    @property
    def now_ms(self) -> float:
        return self.sim.now_ms

    def run_for(self, duration_ms: float) -> None:
        end = time.monotonic() + duration_ms / 1000.0
        while True:
            self.refresh()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.poll_interval_ms / 1000.0))

    def run_until(self, condition: Callable[[], bool], timeout_ms: float) -> bool:
        end = time.monotonic() + timeout_ms / 1000.0
        while True:
            self.refresh()
            if condition():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(self.poll_interval_ms / 1000.0)

    def crash(self, node: str, mode: str) -> None:
        kind = CrashKind(mode)
        if not self.sim.is_running(node) and kind is CrashKind.PROCESS:
            raise StepFailed(f"{node} is not running")
        if node not in self.agents:
            raise StepFailed(f"{node} has no host to crash (clients do not crash)")
        if self.agents[node] is None:
            raise StepFailed(f"{node}'s host is down (its Ray node left the cluster)")
        self.refresh()  # the checks judge the crash on the newest copies of the roles
        self.sim.record(node, "crash", mode=kind.value, host=node)
        lost = adapter.get(self.agents[node].crash.remote(kind.value, node), CALL_TIMEOUT_S)
        self._mark_down(node)
        self.sim.record("runner", "crash_done", node=node, mode=kind.value, bytes_lost=sum(lost.values()))

    def restart(self, node: str) -> None:
        if self.sim.is_running(node):
            raise StepFailed(f"{node} is already running")
        mirror = self.sim.nodes[node]
        if self.agents.get(node) is None:
            self._replace_agent(node)
        mirror.handle = adapter.get(self.agents[node].create_node.remote(node, self.specs[node], self._seed()), CALL_TIMEOUT_S)
        self._announce(node)
        self._start_nodes([node])

    def shutdown(self, node: str, timeout_ms: float) -> None:
        if not self.sim.is_running(node):
            raise StepFailed(f"{node} is not running")
        self.sim.record(node, "shutdown_requested")
        adapter.get(self.sim.nodes[node].handle.request_shutdown.remote(), CALL_TIMEOUT_S)
        if not self.run_until(lambda: not self.sim.is_running(node), timeout_ms):
            raise StepFailed(f"{node} did not finish its controlled shutdown within {timeout_ms:g} ms")

    def _push_faults(self) -> None:
        refs = [n.handle.set_faults.remote(self.faults) for n in self.sim.nodes.values() if n.handle is not None]
        adapter.wait_quietly(refs, CALL_TIMEOUT_S)

    def isolate(self, node: str) -> None:
        self.faults.isolate(node)
        self._push_faults()
        self.sim.record("runner", "fault_isolate", node=node)

    def partition(self, groups: Sequence[Sequence[str]]) -> None:
        self.faults.partition(groups)
        self._push_faults()
        self.sim.record("runner", "fault_partition", groups=[list(g) for g in groups])

    def link(self, src: str, dst: str, drop: float, delay_ms: float) -> None:
        self.faults.link(src, dst, drop=drop, delay_ms=delay_ms)
        self._push_faults()
        self.sim.record("runner", "fault_link", src=src, dst=dst, drop=drop, delay_ms=delay_ms)

    def heal(self, node: str | None) -> None:
        self.faults.heal(node)
        self._push_faults()
        self.sim.record("runner", "heal", node=node)

    def protocol_step(self, kind: str, args: Any) -> None:
        if kind == "elect":
            topic, p = split_partition_ref(args.partition)
            self.admin(lambda ctl, now, out: ctl.elect_leaders(topic, p, args.type, now, out))
        elif kind == "alter_config":
            config = dict(args.config)
            self.admin(lambda ctl, now, out: ctl.alter_config(args.topic, config, now, out))
        elif kind == "reassign":
            topic, p = split_partition_ref(args.partition)
            target = list(args.replicas)
            self.admin(lambda ctl, now, out: ctl.reassign(topic, p, target, now, out))
        elif kind == "produce":
            self.clients.produce(args)
        elif kind == "list_offsets":
            state = self._view.partitions().get(args.partition)
            self.clients.list_offsets(args, None if state is None else state.leader)
        elif kind == "consume":
            self.clients.consume(args)
        elif kind == "load":
            self.clients.load(args, {t.name: t.partitions for t in self.scenario.topics})
        else:
            raise StepFailed(f"step `{kind}` is not supported on Ray")

    def record(self, kind: str, **fields: Any) -> None:
        self.sim.record("runner", kind, **fields)

    def violations(self) -> list[dict[str, Any]]:
        return [v.as_dict() for v in self.sim.violations.values()]

    def stats(self) -> dict[str, Any]:
        counters = [n.counters for n in self.sim.nodes.values()]
        return {
            "events": self.sim.trace.event_count,
            "messages_delivered": sum(c.get("delivered", 0) for c in counters),
            "messages_dropped": sum(c.get("dropped", 0) for c in counters),
            "sim_ms": round(self.now_ms, 3),
            "trace_hash": None,  # real time and real scheduling: a Ray run does not replay exactly
            "placement": self.placement_report(),
        }

    def close(self) -> None:
        """Stop every actor of the run and remove its data (unless the caller gave the folder)."""
        if self._closed:
            return
        self._closed = True
        for node in self.sim.nodes.values():
            if node.handle is not None:
                adapter.kill(node.handle)
        for agent in self.agents.values():
            if agent is not None:
                adapter.kill(agent)
        if self._own_data_root:
            shutil.rmtree(self.data_root, ignore_errors=True)
