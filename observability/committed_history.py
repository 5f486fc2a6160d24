"""Every committed partition and broker state, in the order the controller voters reported them.

A `wait_for` on a partition or a broker waits for a state of the controller's committed metadata
(docs/reference/steps-and-conditions.md, "Conditions"). Both drivers judge a wait's condition on the cluster view after each
role output: the simulator after every event, Ray after each batch of one node's events of one
instant (actors/runtime/ray/world.py). But one output can carry several committed states of one
subject, and the view shows only the last: a voter whose high watermark passes several records at
once reports them together, e.g.
- KIP-966's step 7, a leader elected from the ELR with ISR [2], which the ISR expansion of the
  old leader, caught up at once, can follow in the same advance;
- a broker fenced when its old session expired and, its registration retried at once, unfenced
  again by the next record (the protocol description §6.5.1).
Each voter reports every partition record it commits as a `partition_change` event and every broker
registration record as a `broker_change` event (controller.py, `_report_committed`), and both
drivers hand every event to their sinks: so a wait also holds once a state reported since it began
matches.

Which conditions these states can judge, and how, is the reader's business: a `wait_for`
(workloads/conditions.py, `reported_from_now`) passes the subject it waits on and a test of a
state's attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from observability.events import EventRecord
from observability.states import UNKNOWN, PartitionState

# A subject: ("partition", "t-0") or ("broker", 2).
Subject = tuple[str, Any]
# A test of one committed state's attributes (a partition's: those of `PartitionState`, its `hwm`
# UNKNOWN; a broker's: `fenced`, `epoch`, `in_controlled_shutdown` and `offline_log_dirs`).
Accepts = Callable[[dict[str, Any]], bool]


class CommittedHistory:
    """An event sink. Invariant: `states` holds each committed state once, in arrival order, as
    (subject, attributes). Every voter reports each one; a metadata offset names one committed
    state (a partition record, a MinISR config change, a broker record), so a report no newer than the
    subject's newest adds nothing."""

    def __init__(self) -> None:
        self.states: list[tuple[Subject, dict[str, Any]]] = []
        self._newest: dict[Subject, int] = {}

    def __call__(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.kind == "partition_change":
            self._keep(("partition", f"{ev.topic}-{ev.partition}"), ev.metadata_offset, vars(PartitionState.from_change(ev, hwm=UNKNOWN)))
        elif ev.kind == "broker_change":
            self._keep(("broker", ev.broker), ev.metadata_offset, {"fenced": ev.fenced, "epoch": ev.epoch, "in_controlled_shutdown": bool(ev.in_controlled_shutdown),
                                                                  "offline_log_dirs": list(ev.offline_log_dirs or ())})

    def _keep(self, subject: Subject, version: int, attributes: dict[str, Any]) -> None:
        if version <= self._newest.get(subject, -1):
            return
        self._newest[subject] = version
        self.states.append((subject, attributes))

    def reported_from_now(self, subject: Subject, accepts: Accepts) -> Callable[[], bool]:
        """A check that turns (and stays) true once a state of `subject` reported after this call
        is accepted by `accepts`."""
        position = len(self.states)
        seen = False

        def check() -> bool:
            nonlocal position, seen
            while not seen and position < len(self.states):
                reported, attributes = self.states[position]
                position += 1
                seen = reported == subject and accepts(attributes)
            return seen

        return check
