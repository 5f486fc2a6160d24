"""What both clusters (simulator and Ray) share on top of their drivers: the history's readers
(the cluster view and the invariant checks), the bring-up and the admin calls.

Conditions, steps, the summary and the invariant checks read the cluster view (`view()`), folded
from the event history (observability/projection.py), and the history itself, the same way in
both runtimes: nothing reads a role.
"""

from __future__ import annotations

import json
from typing import Any

from actors.runtime.api import (
    AdminCommand,
    AlterConfig,
    CancelReassignment,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    Elect,
    Reassign,
    StepFailed,
    TopicSettings,
)
from controller_quorum.requests import NONE, NOT_CONTROLLER, TOPIC_ALREADY_EXISTS, AdminError
from observability.checks import OnlineChecks, QuorumDisruption
from observability.committed_history import CommittedHistory
from observability.events import ClusterReady, Fault
from observability.projection import ClusterProjection

ADMIN_RETRY_MS = 100.0
TOPIC_RETRY_MS = 10_000.0  # bootstrap: a topic not committed by then is asked for again


class RoleCluster:
    """Needs `self.sim` (with `trace.sinks`, `record`, `is_running`), `self.settings` (the
    ClusterSettings), `self.topics` (the TopicSettings to create) and `self.clients` (None until
    the clients exist); `watch_history()` before anything runs."""

    sim: Any
    settings: Any
    clients: Any
    fault_backend: str  # the history's `backend` of the faults this cluster makes
    fault_source: str | None = None  # the history's `source` of the faults: "cli" while one is made by hand
    topics: tuple[TopicSettings, ...]
    # False: every check judges the whole cluster at every call (tests compare the two).
    incremental_checks = True

    def watch_history(self, disruption_checks: bool = False) -> None:
        """Fold the history into the cluster view, and check the invariants on it, from the first
        event on (the checks read the view: they come after it). `disruption_checks`: also the
        quorum's liveness checks (QuorumDisruption), reported as violations."""
        self._view = ClusterProjection(self.settings.voters, self.settings.brokers, lambda: self.now_ms)
        self.committed_states = CommittedHistory()
        protocol = self.settings.protocol
        self.checks = OnlineChecks(
            self._view, self.sim.record, self.settings.voters, elr_enabled=protocol.elr, prevote=protocol.prevote,
            incremental=self.incremental_checks,
        )
        self.sim.trace.sinks.extend([self._view, self.committed_states, *self.checks.sinks])
        if disruption_checks:
            self.checks.check_sets.append(QuorumDisruption(self.checks.quorum, lambda: self.now_ms).check)

    def view(self) -> ClusterProjection:
        return self._view

    def check_everything(self) -> None:
        """One full check at the end of the steps: the online checks judged what each event
        touched; this judges every partition, the quorum and the metadata once more, whatever the
        last events touched (the same verdicts: tests/sim/test_incremental_checks.py)."""
        self.sim.report(self.checks.check_all())

    # --- a fault both runtimes make alike ----------------------------------------------------------

    def fail_log_dir(self, broker: int, log_dir: int) -> None:
        """A broker's log directory fails (KIP-858): the broker stops serving the replicas in it
        (its role decides what follows, `BrokerNode.fail_log_dir`). When the directory holds the
        metadata log the broker halts (Kafka's ReplicaManager.handleLogDirFailure calls Exit.halt):
        its process is stopped here as a process crash would stop it (a `crash_process` row)."""
        node = f"b{broker}"
        if not self.sim.is_running(node):
            raise StepFailed(f"{node} is not running")
        self.sim.record(Fault("fail_log_dir", node, backend=self.fault_backend, dir=log_dir, source=self.fault_source))
        if self.invoke(node, lambda role, now, d=log_dir: role.fail_log_dir(d, now)):
            self.crash(node, "process")

    # --- bring-up and admin calls (both runtimes) ------------------------------------------------

    bootstrap_timeout_ms = 60_000.0

    def settle(self) -> None:
        """Hand every event recorded so far to the history's readers (before the summary)."""

    def cluster_ready_fields(self) -> dict[str, Any]:
        return {}

    def bootstrap(self) -> None:
        """Bring the cluster up before the steps: every broker registered and unfenced, then the
        run's topics created through the active controller and given leaders."""
        timeout = self.bootstrap_timeout_ms
        view = self.view()
        if not self.run_until(lambda: all(b.fenced is False for b in view.brokers().values()), timeout):
            raise RuntimeError(f"the cluster did not come up within {timeout:g} ms (brokers not all registered and unfenced)")
        wanted = [(t.name, p) for t in self.topics for p in range(t.partitions)]

        def topics_ready() -> bool:
            return all((ev := view.committed_partition(k)) is not None and ev.leader is not None for k in wanted)

        # The controller proposes a topic's records and answers at once: if it loses the quorum's
        # leadership before they commit (a slow machine's election), they are gone, so a topic
        # whose records did not commit is asked for again (as a Kafka client retries CreateTopics
        # that timed out); "already exists" then means the new controller has them.
        deadline = self.now_ms + timeout
        while True:
            for topic in self.topics:
                if any(view.committed_partition((topic.name, p)) is None for p in range(topic.partitions)):
                    self.create_topic(topic, exists_ok=True)
            if self.run_until(topics_ready, min(TOPIC_RETRY_MS, max(deadline - self.now_ms, 0.0))):
                break
            if self.now_ms >= deadline:
                raise RuntimeError("the run's topics did not get leaders within the bootstrap timeout")
        self.sim.record(ClusterReady(json.dumps(self.cluster_ready_fields(), sort_keys=True)))

    def create_topic(self, topic: TopicSettings, exists_ok: bool = False) -> None:
        def call(ctl, now, out):
            config = dict(topic.config)
            error = ctl.create_topic(topic.name, topic.partitions, topic.replication_factor, topic.assignment, config, now, out)
            return None if exists_ok and error is not None and error.error == TOPIC_ALREADY_EXISTS else error

        error = self.admin(call)
        if error is not None:
            raise StepFailed(f"the controller refused to create topic {topic.name}: {error}")

    def admin_step(self, kind: str, args: AdminCommand) -> None:
        """A scenario's admin step (api.ADMIN_STEPS), the same on both runtimes."""
        match args:
            case Elect(topic=topic, partition=p, type=election):
                call = lambda ctl, now, out: ctl.elect_leaders(topic, p, election, now, out)  # noqa: E731
            case Reassign(topic=topic, partition=p, replicas=replicas):
                target = list(replicas)
                call = lambda ctl, now, out: ctl.reassign(topic, p, target, now, out)  # noqa: E731
            case CancelReassignment(topic=topic, partition=p):
                call = lambda ctl, now, out: ctl.cancel_reassignment(topic, p, now, out)  # noqa: E731
            case AlterConfig(topic=topic, config=config):
                config = dict(config)
                call = lambda ctl, now, out: ctl.alter_config(topic, config, now, out)  # noqa: E731
            case CreateTopic(topic=t):
                call = lambda ctl, now, out: ctl.create_topic(t.name, t.partitions, t.replication_factor, t.assignment, dict(t.config), now, out)  # noqa: E731
            case DeleteTopic(topic=topic):
                call = lambda ctl, now, out: ctl.delete_topic(topic, now, out)  # noqa: E731
            case CreatePartitions(topic=topic, count=count, assignment=assignment):
                call = lambda ctl, now, out: ctl.create_partitions(topic, count, assignment, now, out)  # noqa: E731
            case _:
                raise AssertionError(f"{kind!r} is not an admin step")
        self.admin(call, name=kind, expect_error=args.expect_error)

    def admin(self, call, timeout_ms: float = 60_000.0, name: str = "", expect_error: str | None = None) -> AdminError | None:
        """Run an admin call on the active controller: the quorum's leader as the history tells
        it, asked again (after a pause) while the one asked answers that it is not active.
        Returns the answer (None: carried out). A scenario's admin step (`name`) records the
        answer in the history; with `expect_error` (Kafka's error name, NONE for none) another
        answer fails the step, and without it any answer is accepted (docs/reference, admin steps)."""
        deadline = self.now_ms + timeout_ms
        while True:
            if not self.run_until(lambda: self.view().quorum().leader is not None, max(deadline - self.now_ms, 0.0)):
                raise StepFailed("no active controller to take the admin call")
            leader = f"c{self.view().quorum().leader}"
            if self.sim.is_running(leader):
                error = self.invoke(leader, lambda role, now: _admin(role, call, now, name))
            else:
                error = AdminError(NOT_CONTROLLER)
            if error is None or error.error != NOT_CONTROLLER:
                break
            if self.now_ms >= deadline:
                raise StepFailed("no active controller took the admin call")
            self.run_for(ADMIN_RETRY_MS)
        got = NONE if error is None else error.error
        if expect_error is not None and got != expect_error:
            raise StepFailed(f"expected {expect_error}, the controller answered {error or NONE}")
        return error


def _admin(role, call, now_ms: float, name: str):
    """Carry out the admin call on the role; its answer (None: done) comes back separately."""
    out = role.admin(call, now_ms, name)
    return out, role.last_admin_error
