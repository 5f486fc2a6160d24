"""Simulator speed: delivered messages per wall-clock second with trivial actors.

Ten nodes, each keeping four messages in flight to its peers (every delivery triggers one send),
uniform 0.5-2 ms latency, trace hashing on (as in every run). Printed for three cases: no faults,
faults active on some links (the slower send path), and a clean network with an invariant hook.
Target (issue 2): >= 200,000 delivered messages per second on the 2-core CI machine.

    python bench/sim_throughput.py [--virtual-ms 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

from actors.contract import Envelope, Output
from actors.runtime.sim.simulator import SimConfig, Simulator
from storage.modes import StorageMode


@dataclass(frozen=True, slots=True)
class Ping:
    hops: int


class PingPong:
    """Keeps `in_flight` messages circulating: every message received is passed on to a peer."""

    def __init__(self, ctx, peers: list[str], in_flight: int = 4) -> None:
        self.node_id = ctx.node_id
        self.peers = peers
        self.in_flight = in_flight
        self.next_peer = 0

    def _peer(self) -> str:
        self.next_peer = (self.next_peer + 1) % len(self.peers)
        return self.peers[self.next_peer]

    def start(self, now_ms: float) -> Output:
        return Output([Envelope(self.node_id, self._peer(), Ping(0)) for _ in range(self.in_flight)])

    def handle(self, env: Envelope, now_ms: float) -> Output:
        return Output([Envelope(self.node_id, self._peer(), Ping(env.payload.hops + 1))])

    def tick(self, now_ms: float) -> Output:
        return Output()


def build(seed: int, nodes: int) -> Simulator:
    sim = Simulator(SimConfig(seed=seed))
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        sim.add_host(name, StorageMode.PAGE_CACHE)
    for name in names:
        peers = [p for p in names if p != name]
        sim.add_node(name, name, lambda ctx, peers=peers: PingPong(ctx, peers), start=False)
    for name in names:
        sim.start(name)
    return sim


def measure(case: str, virtual_ms: float, nodes: int) -> tuple[int, float]:
    sim = build(seed=1, nodes=nodes)
    if case == "link faults":
        sim.network.link("n0", "n1", delay_ms=5.0)
        sim.network.link("n2", "n3", drop=0.01)
    elif case == "invariant hook":
        sim.add_invariant("Trivial", lambda s: None)
    started = time.perf_counter()
    sim.run_until(virtual_ms)
    wall = time.perf_counter() - started
    return sim.trace.delivery_count, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--virtual-ms", type=float, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=10)
    args = parser.parse_args()
    print(f"simulator throughput: {args.nodes} trivial actors, {args.virtual_ms:g} virtual ms, best and median of {args.repeat}")
    for case in ("clean network", "link faults", "invariant hook"):
        rates = []
        for _ in range(args.repeat):
            delivered, wall = measure(case, args.virtual_ms, args.nodes)
            rates.append(delivered / wall)
        print(
            f"  {case:15s} {delivered:>9,d} delivered  best {max(rates):>10,.0f} msg/s  "
            f"median {statistics.median(rates):>10,.0f} msg/s"
        )


if __name__ == "__main__":
    main()
