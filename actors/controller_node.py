"""The KRaft controller voter role (nodes c1..cM): a Raft node with the controller on top.

The active controller is the Raft leader; every voter applies the committed metadata log.

Shutdown is Kafka's: ControllerServer.shutdown first shuts the Raft client down gracefully
(SharedServer.ensureNotRaftLeader -> KafkaRaftManager.shutdown -> KafkaRaftClientDriver, whose
thread polls until KafkaRaftClient's GracefulShutdown ends) while the node still serves requests;
only then does the process stop. So a leader keeps running Resigned until it knows the next leader
or the shutdown timeout passes (RaftNode.begin_shutdown), and `StopProcess` is written by whichever
handle or tick ends the Raft shutdown.
"""

from __future__ import annotations

from actors.contract import Envelope, Output, ShutdownRequested, StartContext, StopProcess
from actors.settings import ClusterSettings
from controller_quorum.controller import Controller
from controller_quorum.raft import RaftConfig, RaftNode
from controller_quorum.requests import NONE, NOT_CONTROLLER, AdminError
from observability.events import AdminAnswer


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


class ControllerNode:
    def __init__(self, ctx: StartContext, settings: ClusterSettings) -> None:
        self.node_id = ctx.node_id
        self.voter_id = int(ctx.node_id[1:])
        self.settings = settings
        self._ctx = ctx
        self.controller = Controller(ctx.node_id, settings)
        self.raft: RaftNode | None = None
        self.last_admin_error: AdminError | None = None

    def start(self, now_ms: float) -> Output:
        out = Output()
        ctx = self._ctx
        self.raft = RaftNode(
            ctx.node_id, self.settings.voters, raft_config(self.settings), dict(ctx.files), ctx.rng, self.controller, out, now_ms
        )
        self.controller.raft = self.raft
        self.raft.start(now_ms, out)
        return self._finish(out)

    def _finish(self, out: Output) -> Output:
        if self.raft.shutdown_outcome is not None:
            out.write(StopProcess())
            return out
        deadlines = [d for d in (self.raft.next_deadline(), self.controller.next_deadline()) if d is not None]
        out.next_deadline_ms = min(deadlines) if deadlines else None
        return out

    def handle(self, envelope: Envelope, now_ms: float) -> Output:
        out = Output()
        if isinstance(envelope.payload, ShutdownRequested):
            self.raft.begin_shutdown(now_ms, out)
        elif not self.raft.handle(envelope, now_ms, out):
            self.controller.handle(envelope, now_ms, out)
        return self._finish(out)

    def tick(self, now_ms: float) -> Output:
        out = Output()
        self.raft.tick(now_ms, out)
        self.controller.tick(now_ms, out)
        return self._finish(out)

    def committed_entries(self) -> list:
        """The entries this node has applied (all committed), from its log."""
        return self.raft.log.entries[: self.raft.applied]

    def propose(self, records: list, now_ms: float) -> Output:
        """Append records if this node leads (a local call; tests use it)."""
        out = Output()
        self.raft.append(records, now_ms, out)
        return self._finish(out)

    def admin(self, call, now_ms: float, name: str = "") -> Output:
        """Run an admin call `call(controller, now_ms, out)` on this controller (the runner's
        CreateTopics, ElectLeaders, IncrementalAlterConfigs, ...). Its answer (None, or an
        AdminError) is kept in `last_admin_error`; a named call's answer goes into the history,
        unless it is NOT_CONTROLLER (the caller asks the active controller again)."""
        out = Output()
        error = call(self.controller, now_ms, out)
        self.last_admin_error = error
        if name and not (error is not None and error.error == NOT_CONTROLLER):
            out.emit(AdminAnswer(name, NONE if error is None else error.error, "" if error is None else error.message))
        return self._finish(out)
