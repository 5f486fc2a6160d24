"""Wiring the KRaft quorum invariants to a simulated cluster: what the checker reads of the voters
(their running Raft nodes, and for stopped voters what their disks hold)."""

from __future__ import annotations

from actors.contract import Output
from controller_quorum.invariants import QuorumInvariants
from controller_quorum.messages import LogEntry
from controller_quorum.quorum_state import QUORUM_STATE_FILE, ElectionState
from controller_quorum.raft import RaftNode
from controller_quorum.raft_log import LOG_FILE, RaftLog

from .simulator import Simulator


def watch_quorum(sim: Simulator, voters: tuple[str, ...], *, prevote: bool) -> QuorumInvariants:
    def running() -> dict[str, RaftNode | None]:
        result: dict[str, RaftNode | None] = {}
        for name in voters:
            role = sim.nodes[name].role
            result[name] = getattr(role, "raft", None) if role is not None else None
        return result

    def durable_log(name: str) -> list[LogEntry]:
        disk = sim.nodes[name].host.disk
        return RaftLog.recover({LOG_FILE: disk.read_durable(name, LOG_FILE) or b""}, Output()).entries

    def durable_epoch(name: str) -> int:
        state = ElectionState.decode(sim.nodes[name].host.disk.read_durable(name, QUORUM_STATE_FILE))
        return 0 if state is None else state.epoch

    checker = QuorumInvariants(running, durable_log, durable_epoch, prevote=prevote)
    sim.trace.sinks.append(checker.on_event)
    sim.add_invariant_set(checker.check)
    return checker
