"""What the adapter's modules share: where actors go (a host's Ray node, by its label), the
options every actor gets, and how long to wait for a killed process or a kernel wire."""

from __future__ import annotations

from typing import Any

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


def _on_node(node_id: str) -> dict[str, Any]:
    return {"label_selector": {NODE_LABEL: node_id}}
