"""Scripted tests of the controller's partition changes (controller_quorum/partition_change.py),
ported from Kafka's PartitionChangeBuilderTest: each file of tests/unit/testdata/partition_change/
sets a partition, the brokers and the policy, then asks for changes and prints the record each
makes (tests/datadriven.py says the format; `pytest --rewrite` rewrites the outputs).

Commands (lists are comma-separated broker ids, `-` for none):
- `partition replicas=2,1,3 isr=2,1,3 leader=1 [elr=] [lkelr=] [adding=] [removing=]
  [leader_epoch=100] [partition_epoch=200] [recovery=RECOVERED]`;
- `brokers ids=1,2,3 [fenced=3] [shutting_down=]`: the registrations (an active broker may lead
  and join an ISR: Kafka's LeaderAcceptor);
- `policy min_isr=2 [elr=true] [unclean=false] [last_known_leader=false]`;
- `change reason=R [isr=2,1] [remove=3] [election=clean|preferred|unclean] [unclean_shutdown=2]
  [apply=true]`: the record the change makes, or `no change`; with `apply`, it becomes the
  partition for the next commands.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from controller_quorum.metadata import BrokerRegistration, PartitionRecord
from controller_quorum.partition_change import ChangePolicy, change_partition
from tests import datadriven

SCRIPTS = Path(__file__).parent / "testdata" / "partition_change"


def _printed(p: PartitionRecord) -> str:
    return (f"replicas={p.replicas} isr={p.isr} elr={p.elr} lkelr={p.last_known_elr} leader={p.leader} "
            f"leader_epoch={p.leader_epoch} partition_epoch={p.partition_epoch} recovery={p.leader_recovery_state} "
            f"adding={p.adding_replicas} removing={p.removing_replicas} election={p.election}")


class PartitionChangeScript:
    def __init__(self) -> None:
        self.partition: PartitionRecord | None = None
        self.brokers: dict[int, BrokerRegistration] = {}
        self.policy = ChangePolicy(min_isr=2, elr_enabled=True, unclean_leader_election=False)

    def __call__(self, case: datadriven.Case) -> str:
        a = case.args
        if case.command == "partition":
            self.partition = PartitionRecord(
                "foo", 0, datadriven.ids(case.arg("replicas")), datadriven.ids(case.arg("isr")), datadriven.ids(a.get("elr", "")), datadriven.ids(a.get("lkelr", "")),
                None if a.get("leader", "-") == "-" else int(a["leader"]), int(a.get("leader_epoch", "100")),
                int(a.get("partition_epoch", "200")), a.get("recovery", "RECOVERED"),
                adding_replicas=datadriven.ids(a.get("adding", "")), removing_replicas=datadriven.ids(a.get("removing", "")))
            return _printed(self.partition)
        if case.command == "brokers":
            fenced, shutting_down = set(datadriven.ids(a.get("fenced", ""))), set(datadriven.ids(a.get("shutting_down", "")))
            self.brokers = {b: BrokerRegistration(b, 10 + b, None, b in fenced, b in shutting_down) for b in datadriven.ids(case.arg("ids"))}
            return ""
        if case.command == "policy":
            self.policy = ChangePolicy(int(case.arg("min_isr")), datadriven.flag(a.get("elr", "true")), datadriven.flag(a.get("unclean", "false")),
                                       datadriven.flag(a.get("last_known_leader", "false")))
            return ""
        if case.command == "change":
            if self.partition is None:
                raise datadriven.ScriptError(f"{case.where()}: expected `partition` first")
            new = change_partition(
                self.partition, self.brokers, self.policy, reason=case.arg("reason"),
                remove=int(a["remove"]) if "remove" in a else None,
                target_isr=datadriven.ids(a["isr"]) if "isr" in a else None,
                unclean_shutdown=frozenset(datadriven.ids(a.get("unclean_shutdown", ""))),
                election=a.get("election", "clean"))
            if new is None:
                return "no change"
            if datadriven.flag(a.get("apply", "false")):
                self.partition = replace(new, election=None)
            return _printed(new)
        raise datadriven.ScriptError(f"{case.where()}: unknown command {case.command!r}")


test_partition_change_script = datadriven.scripts_test(SCRIPTS, PartitionChangeScript)
