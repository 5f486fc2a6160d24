"""What the simulator adds to the history on behalf of the world it owns: after a crash, what each
crashed broker's or voter's disk kept (actors/survivors.py), read from its simulated disk."""

from __future__ import annotations

from actors.survivors import survivors
from storage.modes import CrashKind

from .simulator import Simulator


def report_survivors(sim: Simulator) -> None:
    def observer(node: str, kind: CrashKind) -> None:
        if node[:1] in ("b", "c"):  # brokers and voters have logs; clients have none
            disk = sim.nodes[node].host.disk
            for event in survivors(node, disk.files_of(node), disk.durable_files_of(node)):
                sim.record(event)

    sim.crash_observers.append(observer)
