"""The driver-side calls on a joined cluster: tasks, answers, kills, the live nodes and the node
this process runs on."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import ray


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



def this_node() -> str:
    """The Ray node this process runs on (a driver's, or a task's: a campaign's row names it)."""
    return ray.get_runtime_context().get_node_id()


def this_node_resource() -> str:
    """The custom resource only this process's Ray node has (`node:<its address>`, capacity 1):
    asking for a sliver of it places an actor on this node."""
    return f"node:{ray.util.get_node_ip_address()}"


def node_is_alive(node_id: str) -> bool:
    return any(n["node_id"] == node_id for n in alive_nodes())
