"""Which Ray node each emulated host runs on.

Hosts are failure domains. Brokers are spread first (one per Ray node while there are enough of
them), then controller voters, continuing round-robin, so that with at least as many Ray nodes as
brokers no two brokers share a node, and with fewer nodes hosts share them evenly. Clients run on the
first (head) node. Pure function: the adapter reads the nodes, this decides.
"""

from __future__ import annotations


def assign_hosts(brokers: list[str], voters: list[str], ray_nodes: list[str]) -> dict[str, str]:
    if not ray_nodes:
        raise ValueError("no live Ray node to place hosts on")
    out: dict[str, str] = {}
    for i, host in enumerate(brokers + voters):
        out[host] = ray_nodes[i % len(ray_nodes)]
    return out
