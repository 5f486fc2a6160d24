"""Scripted tests of one partition replica (actors/replication/replica.py), ported from Kafka's
PartitionTest: each file of tests/unit/testdata/replica/ makes broker 1 the leader of partition
t-0 and feeds it produces, follower fetches, AlterPartition answers and time, printing what it
answered, what it asked the controller and what it became (tests/datadriven.py says the format;
`pytest --rewrite` rewrites the outputs).

Commands (lists are comma-separated broker ids):
- `leader replicas=1,2 isr=1 [leader_epoch=5] [partition_epoch=1] [records=10] [min_isr=1] [key=value]`:
  broker 1 leads with `records` records already in its log (written in epoch leader_epoch - 1);
  other keys are protocol switches (`maximal_isr=false`); brokers 1 to 4 are registered, unfenced,
  with broker epochs 10, 20, 30, 40;
- `fetch follower=2 offset=10 [at=T] [last_epoch=E] [broker_epoch=B]`: a follower's fetch;
- `produce records=N [acks=-1] [at=T]`;
- `alter_partition_response [error=E] [at=T]`: the controller answers the AlterPartition in
  flight: with `error`, that error; else the proposed ISR committed with the next partition epoch;
- `shrink at=T`: the leader's ISR shrink check (Kafka's maybeShrinkIsr);
- `tick at=T`: the replica's timers.

Each prints the answers sent, `to-controller` with each request, the events, and the state:
`leader epoch=5 isr=(1,) maximal_isr=(1, 2) pending=(1, 2) hwm=0 leo=10`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from actors.contract import Output
from actors.replication.messages import FetchPartition, ProduceRequest
from actors.replication.replica import PartitionReplica
from controller_quorum.metadata import BrokerRegistration, MetadataImage, PartitionRecord
from controller_quorum.requests import AlterPartitionRequest, AlterPartitionResponse
from storage.codec import pack
from storage.partition_log import PartitionLog, RecordBatch
from tests import datadriven
from workloads.drivers import cluster_settings
from workloads.scenario.cluster_spec import ClusterSpec

SCRIPTS = Path(__file__).parent / "testdata" / "replica"
EPOCHS = {1: 10, 2: 20, 3: 30, 4: 40}
RESERVED = {"replicas", "isr", "leader_epoch", "partition_epoch", "records", "min_isr", "at"}


class Env:
    """Broker 1 around the replica."""

    def __init__(self, min_isr: int, protocol: dict[str, bool]) -> None:
        self.node_id, self.broker_id, self.broker_epoch = "b1", 1, EPOCHS[1]
        spec = ClusterSpec.model_validate({"config": {"min.insync.replicas": min_isr}, "protocol": protocol})
        self.settings = cluster_settings(spec)
        self.image = MetadataImage(brokers={b: BrokerRegistration(b, e, None, False) for b, e in EPOCHS.items()})
        self.sync_flush = False
        self._min_isr = min_isr
        self.sent: list = []

    def min_isr(self, topic, rf):
        return min(self._min_isr, rf)

    def send_to_controller(self, payload, out):
        self.sent.append(payload)


class ReplicaScript:
    def __init__(self) -> None:
        self.replica: PartitionReplica | None = None
        self.env: Env | None = None
        self.record: PartitionRecord | None = None
        self.last_asked: AlterPartitionRequest | None = None  # the latest AlterPartition sent

    def __call__(self, case: datadriven.Case) -> str:
        out, a = Output(), case.args
        now = float(a.get("at", "0"))
        if case.command == "leader":
            protocol = {k: v == "true" for k, v in a.items() if k not in RESERVED}
            self.env = Env(int(a.get("min_isr", "1")), protocol)
            epoch = int(a.get("leader_epoch", "5"))
            log = PartitionLog("partitions/t-0")
            records = int(a.get("records", "0"))
            if records:
                log.append(RecordBatch.of(pack([f"v{i}" for i in range(records)]), records).stamped(0, epoch - 1), Output())
            self.replica = PartitionReplica(self.env, "t", 0, log, 0)
            self.record = PartitionRecord("t", 0, datadriven.ids(case.arg("replicas")), datadriven.ids(case.arg("isr")), (), (), 1, epoch,
                                          int(a.get("partition_epoch", "1")))
            self.replica.become_leader(self.record, now, out)
        elif self.replica is None:
            raise datadriven.ScriptError(f"{case.where()}: expected `leader` first")
        elif case.command == "fetch":
            follower = int(case.arg("follower"))
            fp = FetchPartition("t", 0, self.replica.leader_epoch, int(case.arg("offset")), int(a.get("last_epoch", "-1")))
            self.replica.on_follower_fetch(fp, follower, int(a.get("broker_epoch", str(EPOCHS[follower]))), now, out)
        elif case.command == "produce":
            n = int(case.arg("records"))
            batch = RecordBatch.of(pack([f"p{i}" for i in range(n)]), n, -1, -1)
            self.replica.on_produce("client", ProduceRequest(1, "t", 0, int(a.get("acks", "-1")), 30_000, batch), now, out)
        elif case.command == "alter_partition_response":
            self._answer(a.get("error"), now, out)
        elif case.command == "shrink":
            self.replica.maybe_shrink_isr(now, out)
        elif case.command == "tick":
            self.replica.tick(now, out)
        else:
            raise datadriven.ScriptError(f"{case.where()}: unknown command {case.command!r}")
        return "\n".join(self._printed(out))

    def _answer(self, error: str | None, now: float, out: Output) -> None:
        req = self.last_asked
        if req is None:
            raise datadriven.ScriptError("alter_partition_response: no AlterPartition was asked")
        state = None
        if error is None:
            self.record = state = replace(self.record, isr=tuple(b for b, _ in req.new_isr), partition_epoch=req.partition_epoch + 1,
                                          reason="alter_partition")
        self.replica.on_alter_partition_response(
            AlterPartitionResponse(error, "t", 0, state, request_leader_epoch=req.leader_epoch, request_partition_epoch=req.partition_epoch),
            now, out)

    def _printed(self, out: Output) -> list[str]:
        r = self.replica
        lines = [f"send {e.dst} {e.payload!r}" for e in out.sends]
        lines += [f"to-controller {p!r}" for p in self.env.sent]
        self.last_asked = next((p for p in reversed(self.env.sent) if isinstance(p, AlterPartitionRequest)), self.last_asked)
        self.env.sent.clear()
        lines += [f"emit {e!r}" for e in out.events]
        pending = None if r.pending_isr is None else tuple(sorted(r.pending_isr))
        lines.append(f"{r.role} epoch={r.leader_epoch} isr={tuple(sorted(r.isr))} maximal_isr={tuple(sorted(r.maximal_isr()))} "
                     f"pending={pending} hwm={r.hwm} leo={r.leo}")
        return lines


test_replica_script = datadriven.scripts_test(SCRIPTS, ReplicaScript)
