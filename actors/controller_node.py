"""The KRaft controller voter role (nodes c1..cM): a Raft node with the controller on top.

The active controller is the Raft leader. Until the controller's metadata logic lands, the state
machine on top only records what commits (enough to test the quorum on its own).
"""

from __future__ import annotations

from actors.contract import Envelope, Output, ShutdownRequested, StartContext, StopProcess
from actors.settings import ClusterSettings
from controller_quorum.messages import LogEntry
from controller_quorum.raft import RaftConfig, RaftNode


def raft_config(settings: ClusterSettings) -> RaftConfig:
    c, p = settings.config, settings.protocol
    return RaftConfig(
        election_timeout_ms=c.controller_quorum_election_timeout_ms,
        fetch_timeout_ms=c.controller_quorum_fetch_timeout_ms,
        election_backoff_max_ms=c.controller_quorum_election_backoff_max_ms,
        append_linger_ms=c.controller_quorum_append_linger_ms,
        prevote=p.prevote,
        check_quorum=p.check_quorum,
        raft_fsync=p.raft_fsync,
    )


class CommitRecorder:
    """A RaftListener that keeps what commits, in order."""

    def __init__(self) -> None:
        self.committed: list[LogEntry] = []
        self.leading = False

    def on_commit(self, entries: list[LogEntry], now_ms: float, out: Output) -> None:
        self.committed.extend(entries)

    def on_become_leader(self, epoch: int, now_ms: float, out: Output) -> None:
        self.leading = True

    def on_lose_leadership(self, now_ms: float, out: Output) -> None:
        self.leading = False


class ControllerNode:
    def __init__(self, ctx: StartContext, settings: ClusterSettings) -> None:
        self.node_id = ctx.node_id
        self.voter_id = int(ctx.node_id[1:])
        self.settings = settings
        self._ctx = ctx
        self.listener = CommitRecorder()
        self.raft: RaftNode | None = None

    def start(self, now_ms: float) -> Output:
        out = Output()
        ctx = self._ctx
        self.raft = RaftNode(
            ctx.node_id, self.settings.voters, raft_config(self.settings), dict(ctx.files), ctx.rng, self.listener, out, now_ms
        )
        self.raft.start(now_ms, out)
        out.next_deadline_ms = self.raft.next_deadline()
        return out

    def handle(self, envelope: Envelope, now_ms: float) -> Output:
        out = Output()
        if isinstance(envelope.payload, ShutdownRequested):
            self.raft.resign_for_shutdown(now_ms, out)
            out.write(StopProcess())
            return out
        self.raft.handle(envelope, now_ms, out)
        out.next_deadline_ms = self.raft.next_deadline()
        return out

    def tick(self, now_ms: float) -> Output:
        out = Output()
        self.raft.tick(now_ms, out)
        out.next_deadline_ms = self.raft.next_deadline()
        return out

    def propose(self, records: list, now_ms: float) -> Output:
        """Append records if this node leads (a local call; tests and the controller use it)."""
        out = Output()
        self.raft.append(records, now_ms, out)
        out.next_deadline_ms = self.raft.next_deadline()
        return out
