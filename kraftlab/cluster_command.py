"""`kraftlab cluster up|fault|status|down`: an emulated cluster on Ray that serves real Kafka
clients until told to stop, with faults made by hand from another terminal.

`up` runs a scenario as `kraftlab run` does (its cluster with Kafka listeners on every broker,
then its steps), and once the steps are done keeps the cluster serving: the history is collected
and checked as during a `wait` step. Meanwhile it answers commands on a Unix socket of its own
(`~/.kraftlab/clusters/<name>.sock`, one JSON object per line each way): `status`, a `step` (a
fault, carried out as the scenario step of the same name would be, and recorded as a `fault` row
with `source: cli`) and `down`. After `down` (or Ctrl-C) the run ends as a run does: the clients
settle, every log is read, and the summary is written with the verdict.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from observability.states import plain
from workloads.scenario.loading import ScenarioError, validate

# How long `up` lets the cluster run between two looks at its socket.
SERVE_POLL_MS = 200.0
DEFAULT_NAME = "default"

# The cluster `kraftlab cluster up` starts without a scenario.
DEFAULT_SCENARIO: dict[str, Any] = {
    "name": "cluster",
    "runtime": "ray",
    "cluster": {"brokers": 3, "controllers": 3, "listeners": ["kafka"], "config": {"min.insync.replicas": 2}},
    "topics": [{"name": "t", "partitions": 3, "replication_factor": 3}],
}

class NoCluster(Exception):
    """No cluster of that name is up."""


def state_dir() -> Path:
    return Path(os.environ.get("KRAFTLAB_STATE_DIR", Path.home() / ".kraftlab")) / "clusters"


def socket_path(name: str) -> Path:
    return state_dir() / f"{name}.sock"


def state_path(name: str) -> Path:
    return state_dir() / f"{name}.json"


def fault_step(kind: str, args: tuple[str, ...], mode: str, drop: float, delay_ms: float) -> dict[str, Any]:
    """The scenario step a `kraftlab cluster fault` command is (docs/reference/steps-and-conditions.md).
    Raises ValueError naming what is missing."""
    def one(what: str) -> str:
        if len(args) != 1:
            raise ValueError(f"{kind}: expected one {what}, got {len(args)} arguments")
        return args[0]

    if kind == "isolate":
        return {"isolate": one("node")}
    if kind == "heal":
        if len(args) > 1:
            raise ValueError(f"heal: expected at most one node, got {len(args)}")
        return {"heal": args[0] if args else "all"}
    if kind == "crash":
        return {"crash": {"node": one("node"), "mode": mode}}
    if kind == "restart":
        return {"restart": one("node")}
    if kind == "partition":
        if len(args) < 2:
            raise ValueError("partition: expected two or more groups of nodes, each comma-separated (b1,c1 b2,b3)")
        return {"partition": [group.split(",") for group in args]}
    if kind == "link":
        if len(args) != 2:
            raise ValueError("link: expected the two ends, FROM TO")
        return {"link": {"from": args[0], "to": args[1], "drop": drop, "delay_ms": delay_ms}}
    raise ValueError(f"unknown fault {kind!r} (expected isolate, heal, crash, restart, partition or link)")


class ControlServer:
    """`up`'s side: the socket, the state file, and the serving loop."""

    def __init__(self, name: str, run_dir: Path, scenario: Any) -> None:
        self.name = name
        self.run_dir = run_dir
        # The served scenario, as a mapping: a fault by hand is checked as a step of it would be
        # (its nodes exist, its selectors name topics and partitions that do).
        self.scenario = scenario.model_dump(by_alias=True)
        self.path = socket_path(name)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            try:
                request(name, {"op": "ping"}, timeout_s=2.0)
            except NoCluster:
                self.path.unlink()  # left by an `up` that died
            else:
                raise RuntimeError(f"a cluster named {name!r} is up already: `kraftlab cluster down --name {name}` first, or pick "
                                   "another --name")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.bootstrap_servers: str | None = None
        self.done = False

    def announce(self, bootstrap_servers: str | None) -> None:
        self.bootstrap_servers = bootstrap_servers
        state_path(self.name).write_text(json.dumps({"pid": os.getpid(), "run_dir": str(self.run_dir), "bootstrap_servers": bootstrap_servers}))

    def close(self) -> None:
        self.sock.close()
        for path in (self.path, state_path(self.name)):
            path.unlink(missing_ok=True)

    def serve(self, runtime: Any, steps: Any, on_command: Callable[[str], None] | None = None) -> None:
        """Keep the cluster running (its history collected and checked, as in a `wait` step) and
        answer commands until `down`."""
        while not self.done:
            steps.faults.run_for(SERVE_POLL_MS)
            if runtime.bootstrap_servers != self.bootstrap_servers:
                self.announce(runtime.bootstrap_servers)  # a broker restarted: its listener's new port
            while not self.done:
                try:
                    conn, _ = self.sock.accept()
                except BlockingIOError:
                    break
                with conn:
                    conn.setblocking(True)
                    conn.settimeout(10.0)
                    try:
                        line = conn.makefile("r").readline()
                        reply = self._answer(json.loads(line), runtime, steps, on_command)
                    except Exception as exc:  # noqa: BLE001 - a bad request is answered, never the end of the cluster
                        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                    try:
                        conn.sendall((json.dumps(plain(reply)) + "\n").encode())
                    except OSError:
                        pass

    def _answer(self, req: dict[str, Any], runtime: Any, steps: Any, on_command: Callable[[str], None] | None) -> dict[str, Any]:
        op = req.get("op")
        if op == "ping":
            return {"ok": True}
        if op == "status":
            view = runtime.view()
            return {"ok": True, "bootstrap_servers": self.bootstrap_servers, "run_dir": str(self.run_dir),
                    "running": {n: bool(r) for n, r in sorted(view.running.items())},
                    "partitions": view.partitions(), "quorum": view.quorum()}
        if op == "down":
            self.done = True
            if on_command is not None:
                on_command("down")
            return {"ok": True, "run_dir": str(self.run_dir)}
        if op == "step":
            try:
                [step] = validate({**self.scenario, "steps": [req["step"]]}, "kraftlab cluster fault").steps
            except ScenarioError as exc:
                return {"ok": False, "error": "; ".join(str(p).removeprefix("steps[0].") for p in exc.problems)}
            runtime.fault_source = "cli"
            try:
                steps.run_step(step)
            finally:
                runtime.fault_source = None
            if on_command is not None:
                on_command(f"fault {json.dumps(req['step'])}")
            return {"ok": True}
        return {"ok": False, "error": f"unknown command {op!r}"}


def request(name: str, req: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
    """Send one command to the cluster `name` and return its answer. Raises NoCluster."""
    path = socket_path(name)
    if not path.exists():
        raise NoCluster(f"no cluster named {name!r} is up (start one with `kraftlab cluster up`)")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise NoCluster(f"no cluster named {name!r} answers ({exc}); its `up` has stopped") from None
        sock.sendall((json.dumps(req) + "\n").encode())
        line = sock.makefile("r").readline()
    if not line:
        raise NoCluster(f"the cluster named {name!r} closed the connection")
    return json.loads(line)


def wait_until_down(name: str, run_dir: Path, timeout_s: float = 600.0) -> dict[str, Any] | None:
    """After `down`: the summary once `up` has written it and left (None: not within the timeout)."""
    deadline = time.monotonic() + timeout_s
    summary = run_dir / "summary.json"
    while time.monotonic() < deadline:
        if not state_path(name).exists() and summary.exists():
            return json.loads(summary.read_text())
        time.sleep(0.5)
    return None
