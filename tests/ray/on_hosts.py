"""Look at a node's host from a test: a Ray task placed on the Ray node where a kraftlab node
runs. On one machine that is the test's own view; on separate hosts (the testbed tier runs this
tier on three) a node's files and processes are on its host, out of the driver's sight, and this
is the only true view of them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import ray
from ray import cloudpickle

from actors.runtime.ray import adapter


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def on_ray_node(node_id: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` run on the Ray node `node_id`. Functions of test modules travel by value: the
    tests are not installed, so another host could not import them by name."""
    for module in (sys.modules[__name__], sys.modules[fn.__module__]):
        if module.__name__.startswith(("tests.", "test_")):
            cloudpickle.register_pickle_by_value(module)
    task = ray.remote(num_cpus=0)(_call).options(label_selector={adapter.NODE_LABEL: node_id})
    return ray.get(task.remote(fn, *args), timeout=60)


def on_every_ray_node(fn: Callable[..., Any], *args: Any) -> list[Any]:
    return [on_ray_node(n["node_id"], fn, *args) for n in adapter.alive_nodes()]


def _folders_named(folder: str, prefix: str) -> list[str]:
    from pathlib import Path

    path = Path(folder)
    return sorted(p.name for p in path.iterdir() if p.name.startswith(prefix)) if path.is_dir() else []


def left_on_cluster_hosts(folder, prefix: str) -> list[str]:
    """The entries of `folder` named `prefix...` on every host of the cluster RAY_ADDRESS names
    (joined for this and left); [] when the tier runs on an embedded Ray (the test's own view of
    its machine is then the whole truth)."""
    import os

    if not os.environ.get("RAY_ADDRESS"):
        return []
    adapter.connect(None)
    try:
        return sorted({name for names in on_every_ray_node(_folders_named, str(folder), prefix) for name in names})
    finally:
        adapter.shutdown()
