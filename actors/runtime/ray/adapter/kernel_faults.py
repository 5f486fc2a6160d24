"""The kernel fault agent: one on each Ray node whose packet filter carries a run's kernel faults
(`--faults kernel`), and the check that the live nodes can make them."""

from __future__ import annotations

import os
import socket
import subprocess
from typing import Any

import ray

from .. import host_addresses
from .calls import alive_nodes, kill
from .constants import ACTOR_OPTIONS, _on_node


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
