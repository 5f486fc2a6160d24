"""The metrics model: Kafka's and kraftlab's series (docs/reference/metrics.md), folded from the
event history one event at a time, so that the simulator and Ray give the same series.

An event sink; `samples()` reads the current value of every series. Nothing here reads a role:
the committed metadata, the brokers' roles, the voters' quorum states, the producers' outcomes,
faults and violations all come from events, and `kraftlab_records_lost` from the cluster view
(observability/projection.py, itself folded from the same events; lost.py).

Where Kafka measures a thing, the series has Kafka's JMX name in the Prometheus JMX exporter's form
(as Strimzi's exporter rules write it: lower case, `PerSec` dropped, counters ending in `_total`),
with the value Kafka's MBean would have on that node:

| series | node | from |
|---|---|---|
| kafka_server_replicamanager_leadercount | broker | partitions whose latest role event on the broker is `become_leader` (none while the process is down) |
| kafka_server_replicamanager_underreplicatedpartitions | broker | of those, partitions whose committed ISR is smaller than the replicas |
| kafka_server_replicamanager_underminisrpartitioncount | broker | of those, partitions whose committed record says `under_min_isr` |
| kafka_controller_kafkacontroller_activecontrollercount | voter | 1 from its `controller_active` until it leaves the leader state or stops |
| kafka_controller_kafkacontroller_offlinepartitionscount | voter | on the active controller, committed partitions without a leader (0 elsewhere, as in Kafka) |
| kafka_controller_kafkacontroller_fencedbrokercount | voter | on the active controller, brokers fenced in the committed metadata |
| kafka_controller_controllerstats_uncleanleaderelections_total | voter | committed elections of kind unclean or last_known_leader the voter applied |
| kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total | voter | committed elections of kind elr the voter applied |
| kafka_server_raftmetrics_current_epoch | voter | the epoch of its latest quorum state |
| kafka_server_raftmetrics_current_leader | voter | itself while leader, else the leader elected in its epoch, -1 when it knows none |

Kafka counts elections on the active controller only; here every voter counts the committed
election records it applies, so every running voter shows the cluster's count (query with `max`).
What Kafka does not measure has a `kraftlab_` name: partition sizes and leader, the leader's HWM,
records by outcome, records lost, produce latency, elections by kind, faults active and invariant
violations. With ELR off, the Last Replica Standing loses acknowledged records through an election
Kafka counts as clean: `uncleanleaderelections_total` stays 0 while `kraftlab_records_lost` shows
the loss.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from observability.checks.invariants import INVARIANT_NAMES
from observability.events import CLEAN_ELECTIONS, UNCLEAN_ELECTIONS, EventRecord
from observability.fault_rows import NETWORK_FAULTS, RESTART_ENDED_FAULTS, fault_undone_by

from .lost import LostRecords

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Labels, float]  # (sample name, labels, value)

# Produce latency buckets (seconds): from a millisecond to a minute, as the demo's faults stretch it.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True)
class Family:
    name: str  # the family's name: a counter's samples add `_total`, a histogram's `_bucket`...
    type: str  # gauge | counter | histogram
    help: str


FAMILIES = {f.name: f for f in (
    Family("kafka_server_replicamanager_leadercount", "gauge", "Partitions the broker leads"),
    Family("kafka_server_replicamanager_underreplicatedpartitions", "gauge", "Partitions the broker leads whose ISR is smaller than the replicas"),
    Family("kafka_server_replicamanager_underminisrpartitioncount", "gauge", "Partitions the broker leads whose ISR is below min.insync.replicas"),
    Family("kafka_controller_kafkacontroller_activecontrollercount", "gauge", "1 on the active controller"),
    Family("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge", "Partitions without a leader (active controller)"),
    Family("kafka_controller_kafkacontroller_fencedbrokercount", "gauge", "Fenced brokers (active controller)"),
    Family("kafka_controller_controllerstats_uncleanleaderelections", "counter", "Unclean leader elections applied"),
    Family("kafka_controller_controllerstats_electionfromeligibleleaderreplicas", "counter", "Leader elections from the ELR applied"),
    Family("kafka_server_raftmetrics_current_epoch", "gauge", "The voter's quorum epoch"),
    Family("kafka_server_raftmetrics_current_leader", "gauge", "The quorum leader the voter knows, -1 for none"),
    Family("kraftlab_partition_isr_size", "gauge", "Committed ISR size"),
    Family("kraftlab_partition_elr_size", "gauge", "Committed ELR size (KIP-966)"),
    Family("kraftlab_partition_last_known_elr_size", "gauge", "Committed LastKnownELR size (KIP-966)"),
    Family("kraftlab_partition_leader", "gauge", "Committed leader, -1 for none"),
    Family("kraftlab_partition_high_watermark", "gauge", "The committed leader's high watermark, as it last reported it"),
    Family("kraftlab_records", "counter", "Records by produce outcome: ok (acknowledged), fail (surely not written), info (unknown)"),
    Family("kraftlab_records_lost", "gauge", "Acknowledged acks=all records missing from the committed log now"),
    Family("kraftlab_produce_latency_seconds", "histogram", "Produce latency of records acknowledged ok, handed over to acknowledged"),
    Family("kraftlab_elections", "counter", "Committed partition leader elections by kind"),
    Family("kraftlab_fault_active", "gauge", "1 while a fault the driver applied is active"),
    Family("kraftlab_invariant_violations", "counter", "Invariant violations found by the online checker"),
)}


def _bid(node: str) -> int | None:
    return int(node[1:]) if node[:1] == "b" and node[1:].isdigit() else None


class MetricsModel:
    """An event sink, and the current value of every series.

    `lost`: the records lost (lost.py), which reads the cluster view once one is given to it
    (`lost.view`); without a view the series stays 0."""

    def __init__(self, voters: tuple[str, ...], brokers: int) -> None:
        self.voters = voters
        self.brokers = tuple(f"b{i}" for i in range(1, brokers + 1))
        self.lost = LostRecords()
        self._metadata_offset = -1  # the newest committed partition record taken
        self.partitions: dict[tuple[str, int], Any] = {}  # committed partition_change
        self._broker_offset = -1
        self.fenced: dict[int, bool] = {}
        self.leading: dict[str, set[tuple[str, int]]] = {b: set() for b in self.brokers}
        self.hwm: dict[tuple[str, tuple[str, int]], int] = {}  # (broker node, partition) -> its HWM
        self.partition_hwm: dict[tuple[str, int], int] = {}  # what the series last showed
        self.active: set[str] = set()
        self.raft: dict[str, tuple[str, int]] = {}  # voter -> (state, epoch)
        self.raft_leaders: dict[int, str] = {}  # epoch -> voter elected in it
        self.voter_elections: dict[str, dict[str, int]] = {v: {"unclean": 0, "elr": 0} for v in voters}
        # Every kind and every invariant from the start, at 0: series that must exist (docs/reference)
        # exist in a run where nothing of the sort happened, and a query for one kind gets 0, not
        # nothing.
        self.elections: dict[str, int] = dict.fromkeys(sorted(CLEAN_ELECTIONS | UNCLEAN_ELECTIONS), 0)
        self._election_offsets: set[int] = set()
        self.records: dict[str, int] = {"ok": 0, "fail": 0, "info": 0}
        self.latency_buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.faults: dict[tuple[str, str], int] = {}  # (fault, target) -> active count
        self.violations: dict[str, int] = dict.fromkeys(sorted(INVARIANT_NAMES), 0)
        self._handlers: dict[str, Callable[[EventRecord], None]] = {
            "partition_change": self._on_partition_change,
            "topic_deleted": self._on_topic_deleted,
            "broker_change": self._on_broker_change,
            "become_leader": self._on_become_leader,
            "become_follower": self._on_not_leader,
            "replica_deleted": self._on_not_leader,
            "replica_hwm": self._on_replica_hwm,
            "process_start": self._on_start,
            "process_stop": self._on_stop,
            "controller_active": self._on_controller_active,
            "raft_state": self._on_raft_state,
            "raft_leader_elected": self._on_raft_leader_elected,
            "election": self._on_election,
            "produce_ack": self._on_produce_ack,
            "fault": self._on_fault,
            "invariant_violated": self._on_violation,
        }

    def __call__(self, rec: EventRecord) -> None:
        handler = self._handlers.get(rec.event.kind)
        if handler is not None:
            handler(rec)
        self.lost(rec)

    # --- events -------------------------------------------------------------------------------------

    def _on_partition_change(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.metadata_offset < self._metadata_offset:
            return  # a lagging voter repeats a record already taken
        self._metadata_offset = ev.metadata_offset
        self.partitions[(ev.topic, ev.partition)] = ev

    def _on_topic_deleted(self, rec: EventRecord) -> None:
        """The topic's partition series end (a topic created again under the name starts its own)."""
        topic = rec.event.topic
        for key in [k for k in self.partitions if k[0] == topic]:
            del self.partitions[key]
            self.partition_hwm.pop(key, None)
        for node_key in [k for k in self.hwm if k[1][0] == topic]:
            del self.hwm[node_key]
        for keys in self.leading.values():
            keys.difference_update([k for k in keys if k[0] == topic])

    def _on_broker_change(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.metadata_offset <= self._broker_offset:
            return
        self._broker_offset = ev.metadata_offset
        self.fenced[ev.broker] = ev.fenced

    def _on_become_leader(self, rec: EventRecord) -> None:
        ev = rec.event
        key = (ev.topic, ev.partition)
        self.leading.setdefault(rec.node, set()).add(key)
        self.hwm[(rec.node, key)] = ev.hwm

    def _on_not_leader(self, rec: EventRecord) -> None:
        ev = rec.event
        self.leading.setdefault(rec.node, set()).discard((ev.topic, ev.partition))

    def _on_replica_hwm(self, rec: EventRecord) -> None:
        ev = rec.event
        self.hwm[(rec.node, (ev.topic, ev.partition))] = ev.hwm

    def _on_start(self, rec: EventRecord) -> None:
        # A (re)started voter's election meters start over, as a restarted Kafka process's JMX
        # meters do; replaying its log it counts the cluster's elections again. Kept across the
        # restart, they counted those elections twice.
        if rec.node in self.voter_elections:
            self.voter_elections[rec.node] = {"unclean": 0, "elr": 0}

    def _on_stop(self, rec: EventRecord) -> None:
        self._down(rec.node)

    def _down(self, node: str) -> None:
        if node in self.leading:
            self.leading[node] = set()
        self.active.discard(node)
        if node in self.raft:
            self.raft[node] = ("down", self.raft[node][1])

    def _on_controller_active(self, rec: EventRecord) -> None:
        self.active.add(rec.node)

    def _on_raft_state(self, rec: EventRecord) -> None:
        ev = rec.event
        self.raft[rec.node] = (ev.state, ev.epoch)
        if ev.state != "leader":
            self.active.discard(rec.node)

    def _on_raft_leader_elected(self, rec: EventRecord) -> None:
        self.raft_leaders[rec.event.epoch] = rec.node

    def _on_election(self, rec: EventRecord) -> None:
        ev = rec.event
        per_voter = self.voter_elections.setdefault(rec.node, {"unclean": 0, "elr": 0})
        if ev.election_kind in UNCLEAN_ELECTIONS:
            per_voter["unclean"] += 1
        elif ev.election_kind == "elr":
            per_voter["elr"] += 1
        if ev.metadata_offset not in self._election_offsets:  # every voter reports it
            self._election_offsets.add(ev.metadata_offset)
            self.elections[ev.election_kind] = self.elections.get(ev.election_kind, 0) + 1

    def _on_produce_ack(self, rec: EventRecord) -> None:
        ev = rec.event
        n = len(ev.sequences)
        self.records[ev.outcome] = self.records.get(ev.outcome, 0) + n
        if ev.outcome == "ok":
            for ms, run in groupby(ev.latencies_ms):  # a batch's records mostly share one latency
                s = ms / 1000.0
                count = sum(1 for _ in run)
                self.latency_buckets[bisect_left(LATENCY_BUCKETS, s)] += count
                self.latency_sum += s * count

    def _on_fault(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.fault in RESTART_ENDED_FAULTS or ev.fault in NETWORK_FAULTS:
            self.faults[(ev.fault, ev.target)] = self.faults.get((ev.fault, ev.target), 0) + 1
            if ev.fault.startswith("crash_"):
                self._down(ev.target)
        elif ev.fault in ("restart", "heal"):
            for key in self.faults:
                if fault_undone_by(key[0], key[1], ev.fault, ev.target):
                    self.faults[key] = 0

    def _on_violation(self, rec: EventRecord) -> None:
        name = rec.event.invariant
        self.violations[name] = self.violations.get(name, 0) + 1

    # --- reading ------------------------------------------------------------------------------------

    def records_lost(self) -> int:
        return self.lost.count()

    def samples(self) -> Iterator[tuple[str, Sample]]:
        """(family name, sample) for every series, now."""
        for node in self.brokers:
            labels = (("node", node),)
            led = self.leading.get(node, set())
            states = [self.partitions.get(k) for k in led]
            yield "kafka_server_replicamanager_leadercount", ("kafka_server_replicamanager_leadercount", labels, len(led))
            yield "kafka_server_replicamanager_underreplicatedpartitions", (
                "kafka_server_replicamanager_underreplicatedpartitions", labels,
                sum(1 for p in states if p is not None and len(p.isr) < len(p.replicas)))
            yield "kafka_server_replicamanager_underminisrpartitioncount", (
                "kafka_server_replicamanager_underminisrpartitioncount", labels,
                sum(1 for p in states if p is not None and p.under_min_isr))
        offline = sum(1 for p in self.partitions.values() if p.leader is None)
        fenced = sum(1 for f in self.fenced.values() if f)
        for node in self.voters:
            labels = (("node", node),)
            active = node in self.active
            state, epoch = self.raft.get(node, ("unattached", 0))
            if state == "leader":
                leader = int(node[1:])
            else:
                known = self.raft_leaders.get(epoch) if state not in ("down",) else None
                leader = int(known[1:]) if known is not None else -1
            elections = self.voter_elections.get(node, {"unclean": 0, "elr": 0})
            for family, value in (
                ("kafka_controller_kafkacontroller_activecontrollercount", 1 if active else 0),
                ("kafka_controller_kafkacontroller_offlinepartitionscount", offline if active else 0),
                ("kafka_controller_kafkacontroller_fencedbrokercount", fenced if active else 0),
                ("kafka_server_raftmetrics_current_epoch", epoch),
                ("kafka_server_raftmetrics_current_leader", leader),
            ):
                yield family, (family, labels, value)
            yield "kafka_controller_controllerstats_uncleanleaderelections", (
                "kafka_controller_controllerstats_uncleanleaderelections_total", labels, elections["unclean"])
            yield "kafka_controller_controllerstats_electionfromeligibleleaderreplicas", (
                "kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total", labels, elections["elr"])
        for key in sorted(self.partitions):
            p = self.partitions[key]
            labels = (("topic", key[0]), ("partition", str(key[1])))
            if p.leader is not None and (f"b{p.leader}", key) in self.hwm:
                self.partition_hwm[key] = self.hwm[(f"b{p.leader}", key)]
            for family, value in (
                ("kraftlab_partition_isr_size", len(p.isr)),
                ("kraftlab_partition_elr_size", len(p.elr)),
                ("kraftlab_partition_last_known_elr_size", len(p.last_known_elr)),
                ("kraftlab_partition_leader", -1 if p.leader is None else p.leader),
                ("kraftlab_partition_high_watermark", self.partition_hwm.get(key, 0)),
            ):
                yield family, (family, labels, value)
        for outcome in sorted(self.records):
            yield "kraftlab_records", ("kraftlab_records_total", (("outcome", outcome),), self.records[outcome])
        yield "kraftlab_records_lost", ("kraftlab_records_lost", (), self.records_lost())
        cumulative = 0
        for bound, n in zip((*LATENCY_BUCKETS, float("inf")), self.latency_buckets, strict=True):
            cumulative += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            yield "kraftlab_produce_latency_seconds", ("kraftlab_produce_latency_seconds_bucket", (("le", le),), cumulative)
        yield "kraftlab_produce_latency_seconds", ("kraftlab_produce_latency_seconds_count", (), cumulative)
        yield "kraftlab_produce_latency_seconds", ("kraftlab_produce_latency_seconds_sum", (), self.latency_sum)
        for kind in sorted(self.elections):
            yield "kraftlab_elections", ("kraftlab_elections_total", (("kind", kind),), self.elections[kind])
        for (fault, target) in sorted(self.faults):
            yield "kraftlab_fault_active", ("kraftlab_fault_active", (("fault", fault), ("target", target)),
                                            1 if self.faults[(fault, target)] > 0 else 0)
        for name in sorted(self.violations):
            yield "kraftlab_invariant_violations", ("kraftlab_invariant_violations_total", (("invariant", name),), self.violations[name])
