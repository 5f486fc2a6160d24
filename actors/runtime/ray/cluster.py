"""A scenario's cluster on Ray: the `ClusterRuntime` the scenario runner drives with `--runtime ray`,
built from plain `RunSettings` (workloads/drivers.py makes them from a scenario).

Every broker and controller voter is a host of its own (a failure domain with its own data
directory and host agent), placed on a Ray node by `placement.assign_hosts`; clients are node
actors on the head node. The driver collects the actors' events (`refresh`: each actor's events
since the driver's cursor, and its clock) and hands them, in time order, to the cluster view and
the invariant checks (world.py): the same readers as in the simulator, fed the same history. No
role is ever copied. Time is real: `wait` sleeps, `wait_for` collects until its condition holds or
its timeout passes.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from actors.runtime import interrupts, kernel_rules
from actors.runtime.api import ADMIN_STEPS, ProtocolCommand, RunSettings, StepFailed
from actors.runtime.clients import Clients
from actors.runtime.kafka.load_join import LoadJoin
from actors.runtime.network import NetworkFaults
from actors.runtime.readout import RoleCluster
from actors.survivors import survivors
from observability.events import CrashLost, Fault, HostMoved
from observability.fault_rows import link_target, network_fault_target, partition_target, undone_target
from storage.modes import CrashKind

from . import adapter, file_store
from .placement import assign_hosts
from .role_specs import RoleSpec
from .world import RayNode, RayWorld

BOOTSTRAP_TIMEOUT_MS = 90_000.0
POLL_INTERVAL_MS = 50.0
CALL_TIMEOUT_S = 30.0
STOPPING_TIMEOUT_S = 1.5  # close() after Ctrl-C or SIGTERM: the signal may have ended Ray's processes too
# Creating a node's process (a new Python worker that imports Ray, pyarrow and the roles) and
# starting its role (which recovers its files). A dozen at once on a loaded 2-core machine took
# longer than CALL_TIMEOUT_S (three test clusters brought up together beside a busy process);
# waiting longer costs nothing when all is well.
PROCESS_START_TIMEOUT_S = 120.0
# An `expect` whose values the history cannot tell yet waits this long for them (steps.py).
UNKNOWN_GRACE_MS = 2_000.0


class RayCluster(RoleCluster):
    unknown_grace_ms = UNKNOWN_GRACE_MS
    bootstrap_timeout_ms = BOOTSTRAP_TIMEOUT_MS

    def __init__(
        self,
        run: RunSettings,
        event_sinks: Sequence[Callable] = (),
        *,
        address: str | None = None,
        data_root: Path | None = None,
        poll_interval_ms: float = POLL_INTERVAL_MS,
        check_invariants: bool = True,
        fault_backend: str = "emulated",
    ) -> None:
        """`fault_backend`: who makes the network faults and crashes: "emulated", kraftlab's own
        send path and Ray's kill; "kernel", the hosts' packet filters (kernel_rules.py; every node
        on an address of its own) and SIGKILL."""
        if fault_backend not in ("emulated", "kernel"):
            raise ValueError(f"fault_backend: expected emulated or kernel, got {fault_backend!r}")
        self.settings = run.cluster
        self.topics = run.topics
        self.mode = self.settings.storage
        self.poll_interval_ms = poll_interval_ms
        self.connection = adapter.connect(address)
        self._own_data_root = data_root is None
        self.data_root = Path(data_root) if data_root is not None else Path(tempfile.mkdtemp(prefix="kraftlab-data-"))
        self.epoch_s = time.time()
        # The run's wire token: a node accepts envelopes only from connections that show it (wire.py).
        self.wire_token = secrets.token_bytes(16)
        self.sim = RayWorld(lambda: (time.time() - self.epoch_s) * 1000.0)
        self.sim.trace.sinks.extend(event_sinks)
        self.faults = NetworkFaults()
        self.fault_backend = fault_backend  # also the `fault` rows' backend
        # The `fault` rows' source: "cli" while a fault made by hand (`kraftlab cluster fault`) is applied.
        self.fault_source: str | None = None
        self.kernel = fault_backend == "kernel"
        # What the nodes' send paths apply: the faults in force, unless the kernel makes them.
        self._send_path_faults = NetworkFaults() if self.kernel else self.faults
        # The run's table in every host's packet filter, and the agents that load it there.
        self.kernel_table = kernel_rules.table_name(secrets.token_hex(6))
        self.kernel_agents: dict[str, Any] = {}
        self.clients: Clients | None = None
        self.watch_history(run.disruption_checks)
        self._next_seed = run.seed * 1_000_003
        self._closed = False
        self.observing = True
        # Every broker's Kafka listener (`cluster.listeners: [kafka]`): broker id -> (host, port).
        self.kafka = run.kafka_listeners
        self.kafka_listeners: dict[int, Any] = {}
        if self.kafka:  # real load clients' rows, completed with their listeners' (load_join.py)
            self.sim.trace.transform = LoadJoin()

        brokers = [f"b{i}" for i in range(1, self.settings.brokers + 1)]
        voters = list(self.settings.voters)
        ray_nodes = [n["node_id"] for n in adapter.alive_nodes()]
        self.head_node = ray_nodes[0]
        self.placement = assign_hosts(brokers, voters, ray_nodes)
        self.agents: dict[str, Any] = {}
        self.specs: dict[str, RoleSpec] = {}
        if self.kernel:
            self.kernel_agents = adapter.create_kernel_fault_agents(ray_nodes)
        for name in brokers + voters:
            self.agents[name] = adapter.create_agent(name, self.placement[name], str(self.data_root), self.mode, self.epoch_s,
                                                     self.wire_token, self.kernel)
            self.sim.nodes[name] = RayNode(name)
            kind = "broker" if name.startswith("b") else "controller"
            self.specs[name] = RoleSpec(kind, self.settings, dirty_expire_ms=run.dirty_expire_ms, background_flush_interval_ms=run.background_flush_interval_ms)
        try:
            created = adapter.get([self.agents[n].create_node.remote(n, self.specs[n], self._seed(), 0) for n in brokers + voters], PROCESS_START_TIMEOUT_S)
            for name, (handle, address) in zip(brokers + voters, created, strict=True):
                self.sim.nodes[name].handle = handle
                self.sim.nodes[name].address = address
            if check_invariants:
                for check in self.checks.check_sets:
                    self.sim.add_invariant_set(check)
            self._start_nodes(brokers + voters)
            if self.kafka:
                self._open_kafka_listeners(brokers)
            self.bootstrap()
            self.clients = Clients(self)
        except BaseException:
            self.close()
            raise

    def _seed(self) -> int:
        self._next_seed += 1
        return self._next_seed

    # --- processes ----------------------------------------------------------------------------

    def _peers(self) -> dict[str, Any]:
        """Where each running node listens (wire.py)."""
        return {name: node.address for name, node in self.sim.nodes.items() if node.handle is not None}

    def _start_nodes(self, names: list[str]) -> None:
        peers = self._peers()
        infos = adapter.get([self.sim.nodes[n].handle.start.remote(peers, self._send_path_faults) for n in names], PROCESS_START_TIMEOUT_S)
        for name, info in zip(names, infos, strict=True):
            node = self.sim.nodes[name]
            node.starts += 1
            node.ray_node = info["ray_node"]
            node.pid = info["pid"]
        self.refresh()

    def _open_kafka_listeners(self, brokers: list[str]) -> None:
        """Open the Kafka listener of each broker's new process, and tell every running broker
        where each listener is (Metadata answers advertise them)."""
        addresses = adapter.get([self.sim.nodes[b].handle.listen_kafka.remote() for b in brokers], CALL_TIMEOUT_S)
        for broker, address in zip(brokers, addresses, strict=True):
            self.kafka_listeners[int(broker[1:])] = tuple(address)
        running = [n.handle for name, n in self.sim.nodes.items() if name.startswith("b") and n.handle is not None]
        adapter.wait_quietly([h.set_kafka_listeners.remote(dict(self.kafka_listeners)) for h in running], CALL_TIMEOUT_S)

    @property
    def bootstrap_servers(self) -> str | None:
        """host:port of every broker's Kafka listener, as a Kafka client's bootstrap.servers."""
        if not self.kafka_listeners:
            return None
        return ",".join(f"{host}:{port}" for _, (host, port) in sorted(self.kafka_listeners.items()))

    def _announce(self, name: str) -> None:
        """Tell every other running node where `name`'s new process is."""
        address = self.sim.nodes[name].address
        refs = [n.handle.set_peer.remote(name, address) for other, n in self.sim.nodes.items() if other != name and n.handle is not None]
        adapter.wait_quietly(refs, CALL_TIMEOUT_S)

    def _mark_down(self, name: str) -> None:
        self.sim.nodes[name].handle = None

    # --- polling --------------------------------------------------------------------------------

    def stop_observing(self) -> None:
        """From now on nothing is collected and no event is kept: the actors run unwatched. For
        benchmarks, once the cluster is up (their events would cost more than the load); the view
        keeps what it had and nothing more is checked; `invoke` no longer collects."""
        self.observing = False
        adapter.wait_quietly([n.handle.set_recording.remote(False) for n in self.sim.nodes.values() if n.handle is not None], CALL_TIMEOUT_S)

    def counters(self, name: str) -> dict[str, Any]:
        """`name`'s transport and storage counters (messages, fsyncs and the time they took)."""
        return adapter.get(self.sim.nodes[name].handle.counters.remote(), CALL_TIMEOUT_S)

    def refresh(self) -> None:
        """Collect every running actor's events since the driver's cursor, and hand the history
        to its readers up to the watermark: the earliest clock the actors answered with (no event
        older than that can still come)."""
        if not self.observing:
            return
        running = [(name, node) for name, node in self.sim.nodes.items() if node.handle is not None]
        trace = self.sim.trace
        polls = adapter.wait_quietly([node.handle.poll.remote(trace.cursor(name, node.generation)) for name, node in running], CALL_TIMEOUT_S)
        watermark = self.now_ms
        stopped = []
        lost_hosts = set()
        for (name, node), poll in zip(running, polls, strict=True):
            if poll is None:
                # Died under us. If its Ray node is gone, its host went down as in an OS crash.
                if name in self.agents and not adapter.node_is_alive(self.placement[name]):
                    lost_hosts.add(name)
                continue
            node.counters = poll["counters"]
            for record in poll["events"]:
                trace.collected(record)
            watermark = min(watermark, poll["now_ms"])
            if poll["stopped"] and poll["links_idle"]:
                stopped.append(name)
        trace.release(watermark)
        for host in sorted(lost_hosts):
            self._host_lost(host)
        for name in stopped:
            if name in self.agents:
                adapter.get(self.agents[name].stopped.remote(name), CALL_TIMEOUT_S)
            self._mark_down(name)

    def settle(self) -> None:
        """Hand every event collected so far to the history's readers (the end of a run)."""
        self.refresh()
        self.sim.trace.release_all()

    def _host_lost(self, host: str) -> None:
        """The Ray node under `host` left the cluster: every process of the host died with its page
        cache (an OS crash). A restart brings the host up on another node, from its directory."""
        self.sim.record(Fault("crash_os", host, backend=self.fault_backend, source=self.fault_source))
        self._mark_down(host)
        # The host's disk is on a machine that left: what an OS crash leaves there, if this
        # machine can read it (one machine's test clusters), else nothing is known to survive.
        left = file_store.durable_view(self.data_root / host / host)
        for event in survivors(host, left, left):
            self.sim.record(event)
        self.agents[host] = None

    def _replace_agent(self, host: str) -> None:
        alive = [n["node_id"] for n in adapter.alive_nodes()]
        load = {n: sum(1 for h, where in self.placement.items() if where == n and self.agents.get(h) is not None) for n in alive}
        target = min(alive, key=lambda n: (load[n], alive.index(n)))
        self.placement[host] = target
        if self.kernel and target not in self.kernel_agents:  # a Ray node that joined since: its packet filter too
            self.kernel_agents.update(adapter.create_kernel_fault_agents([target]))
            self._push_faults()
        self.agents[host] = adapter.create_agent(host, target, str(self.data_root), self.mode, self.epoch_s, self.wire_token, self.kernel)
        info = adapter.get(self.agents[host].where.remote(), CALL_TIMEOUT_S)
        self.sim.record(HostMoved(host, target, not info["recovered_from_os_crash"]))

    # --- bring-up -------------------------------------------------------------------------------

    def cluster_ready_fields(self) -> dict[str, Any]:
        return {"placement": self.placement_report()}

    def placement_report(self) -> dict[str, str]:
        """Which Ray node each node's process runs on now (the summary's placement)."""
        return {name: node.ray_node or "?" for name, node in sorted(self.sim.nodes.items())}

    # --- what the shared clients need -------------------------------------------------------------

    def add_client(self, name: str, kind: str, producer_id: int = 0) -> None:
        node = self.sim.nodes[name] = RayNode(name)
        self.specs[name] = RoleSpec(kind, self.settings, producer_id=producer_id, bootstrap_servers=self.bootstrap_servers)
        node.handle, node.address = adapter.create_client(name, self.specs[name], self.head_node, str(self.data_root / "clients"),
                                                          self.epoch_s, self._seed(), self.wire_token, self.kernel)
        self._announce(name)
        self._start_nodes([name])
        if self.kernel and self.faults.active:
            self._push_faults()  # a client on a new address: the rules of an isolation name it too

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
            interrupts.raise_if_abandoned()  # a campaign's run in a thread, abandoned by a second Ctrl-C
            self.refresh()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.poll_interval_ms / 1000.0))

    def run_until(self, condition: Callable[[], bool], timeout_ms: float) -> bool:
        """`condition` is judged after each batch of events a refresh hands to the cluster view
        (world.py), not only once the refresh is done: so it holds, as in the simulator, if it held
        at any moment of the history since the wait began, even one that lasted less than a poll
        (a replica's high watermark passing a value, a voter's state during an election)."""
        end = time.monotonic() + timeout_ms / 1000.0
        with self.sim.watching(condition) as held:
            while True:
                interrupts.raise_if_abandoned()
                self.refresh()
                if held() or condition():
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
        # The agent freezes the process (the crash happens there), takes its last events, kills
        # it and cuts its files; the crash joins the history after the process's last event.
        result = adapter.get(self.agents[node].crash.remote(kind.value, node), CALL_TIMEOUT_S)
        trace = self.sim.trace
        for record in result["events"]:
            trace.collected(record)
        at_ms = max([self.now_ms, *(r.time_ms for r in result["events"])])
        self._mark_down(node)
        self.sim.record(Fault(f"crash_{kind.value}", node, backend=self.fault_backend, source=self.fault_source), at_ms)
        for owner, n in sorted(result["lost"].items()):
            if n:
                self.sim.record(CrashLost(owner, n), at_ms)
        for event in result["survived"]:
            self.sim.record(event, at_ms)
        self.refresh()

    def restart(self, node: str) -> None:
        if self.sim.is_running(node):
            raise StepFailed(f"{node} is already running")
        slot = self.sim.nodes[node]
        self.sim.record(Fault("restart", node, backend=self.fault_backend, source=self.fault_source))
        if self.agents.get(node) is None:
            self._replace_agent(node)
        slot.handle, slot.address = adapter.get(self.agents[node].create_node.remote(node, self.specs[node], self._seed(), slot.starts), PROCESS_START_TIMEOUT_S)
        self._announce(node)
        if self.kernel and self.faults.active:
            self._push_faults()  # the node's new address and port: the rules in force follow it
        self._start_nodes([node])
        if self.kafka and node.startswith("b"):
            self._open_kafka_listeners([node])

    def shutdown(self, node: str, timeout_ms: float, wait: bool = True) -> None:
        if not self.sim.is_running(node):
            raise StepFailed(f"{node} is not running")
        self.sim.record(Fault("shutdown", node, backend=self.fault_backend, source=self.fault_source))
        adapter.get(self.sim.nodes[node].handle.request_shutdown.remote(), CALL_TIMEOUT_S)
        if not wait:
            return
        # Done when the history says so (its process_stop reached the view), not just the actor.
        if not self.run_until(lambda: not self.sim.is_running(node) and not self.view().running.get(node, False), timeout_ms):
            raise StepFailed(f"{node} did not finish its controlled shutdown within {timeout_ms:g} ms")

    def _push_faults(self) -> None:
        """Make the faults in force: in every node's send path, or (kernel) as the rules of every
        host's packet filter, naming each running node by its wire's address and port."""
        if not self.kernel:
            refs = [n.handle.set_faults.remote(self.faults) for n in self.sim.nodes.values() if n.handle is not None]
            adapter.wait_quietly(refs, CALL_TIMEOUT_S)
            return
        endpoints = {name: tuple(n.address) for name, n in self.sim.nodes.items() if n.handle is not None and n.address is not None}
        try:
            script = kernel_rules.ruleset(self.kernel_table, self.faults, endpoints)
        except kernel_rules.KernelFaultUnsupported as exc:
            raise StepFailed(f"--faults kernel: {exc}") from None
        adapter.get([agent.apply.remote(script) for agent in self.kernel_agents.values()], CALL_TIMEOUT_S)

    def isolate(self, node: str) -> None:
        self.faults.isolate(node)
        self._push_faults()
        self.sim.record(Fault("isolate", node, backend=self.fault_backend, source=self.fault_source))

    def partition(self, groups: Sequence[Sequence[str]]) -> None:
        self.faults.partition(groups)
        self._push_faults()
        self.sim.record(Fault("partition", partition_target(groups), backend=self.fault_backend, source=self.fault_source))

    def link(self, src: str, dst: str, drop: float, delay_ms: float) -> None:
        self.faults.link(src, dst, drop=drop, delay_ms=delay_ms)
        self._push_faults()
        self.sim.record(Fault("link", link_target(src, dst), drop, delay_ms, backend=self.fault_backend, source=self.fault_source))

    def heal(self, node: str | None) -> None:
        self.faults.heal(node)
        self._push_faults()
        self.sim.record(Fault("heal", node or "all", backend=self.fault_backend, source=self.fault_source))

    def undo_network_fault(self, fault: str, target: tuple) -> None:
        self.faults.undo(fault, target)
        self._push_faults()
        self.sim.record(Fault("heal", undone_target(fault, network_fault_target(fault, target)), backend=self.fault_backend, source=self.fault_source))

    def protocol_step(self, kind: str, args: ProtocolCommand) -> None:
        if kind in ADMIN_STEPS:
            self.admin_step(kind, args)
        elif kind == "produce":
            self.clients.produce(args)
        elif kind == "list_offsets":
            state = self.view().partition(f"{args.topic}-{args.partition}")
            self.clients.list_offsets(args, None if state is None else state.leader)
        elif kind == "consume":
            self.clients.consume(args)
        elif kind == "load":
            self.clients.load(args, {t.name: t.partitions for t in self.topics})
        elif kind == "pause_load":
            self.clients.pause_load(args)
        else:
            raise StepFailed(f"step `{kind}` is not supported on Ray")

    def record(self, event: Any) -> None:
        self.sim.record(event)

    def violations(self) -> list[dict[str, Any]]:
        return [v.as_dict() for v in self.sim.violations.values()]

    def stats(self) -> dict[str, Any]:
        counters = [n.counters for n in self.sim.nodes.values()]
        return {
            "events": self.sim.trace.event_count,
            "events_missing": self.sim.trace.gaps,
            "messages_delivered": sum(c.get("delivered", 0) for c in counters),
            "messages_dropped": sum(c.get("dropped", 0) for c in counters),
            "sim_ms": round(self.now_ms, 3),
            "trace_hash": None,  # real time and real scheduling: a Ray run does not replay exactly
            "placement": self.placement_report(),
            **({"bootstrap_servers": self.bootstrap_servers} if self.kafka_listeners else {}),
        }

    def close(self) -> None:
        """Stop every actor of the run, then remove its data (unless the caller gave the folder).

        In that order: a killed actor's process lives on for some milliseconds and could write
        again into a folder just removed. Each host agent stops its nodes and waits for their
        processes to end, then removes its host's folder, which lives on its own Ray node's
        machine; the driver removes the rest, on this machine: the clients' folders, those of
        hosts whose Ray node left, and the root."""
        if self._closed:
            return
        self._closed = True
        agents = [agent for agent in self.agents.values() if agent is not None]
        # A command stopping on Ctrl-C or SIGTERM does not wait the full call timeout for agents
        # its own signal may have ended (sent to the process group, it reaches the embedded Ray's
        # processes). A cluster joined is out of the signal's reach: its agents are waited for,
        # else their hosts would keep the run's folders for good.
        stopping = interrupts.interrupted() and adapter.runs_embedded_ray()
        timeout_s = STOPPING_TIMEOUT_S if stopping else CALL_TIMEOUT_S
        try:
            self._stop_clients()
            if self.kernel_agents:  # the run's rules leave the hosts' packet filters
                adapter.wait_quietly([agent.apply.remote(kernel_rules.removal(self.kernel_table))
                                      for agent in self.kernel_agents.values()], timeout_s)
            closing = [agent.close.remote() for agent in agents]
            answered = adapter.finished(closing, timeout_s)
            if self._own_data_root:
                # An agent that did not answer is gone (or its Ray node is): the driver removes
                # what it can below, rather than waiting for it again.
                adapter.wait_quietly([agent.remove_data.remote() for agent, ref in zip(agents, closing, strict=True) if ref in answered],
                                     timeout_s)
        finally:
            for agent in [*agents, *self.kernel_agents.values()]:
                adapter.kill(agent)
            for node in self.sim.nodes.values():  # whatever an agent that did not answer left running
                if node.handle is not None:
                    adapter.kill(node.handle)
            if self._own_data_root:
                shutil.rmtree(self.data_root, ignore_errors=True)

    def _stop_clients(self) -> None:
        """Kill the clients (they have no host agent) and wait for the end of those on this machine,
        where their folders are."""
        clients = [node for name, node in self.sim.nodes.items() if name not in self.agents and node.handle is not None]
        for node in clients:
            adapter.kill(node.handle)
        here = adapter.this_node()
        adapter.wait_for_processes_to_end([node.pid for node in clients if node.ray_node == here and node.pid is not None],
                                          STOPPING_TIMEOUT_S if interrupts.interrupted() else adapter.PROCESS_END_TIMEOUT_S)
