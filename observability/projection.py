"""The cluster view: the cluster's state folded from the event history, one event at a time.

Conditions (`wait_for`, `expect`), step progress and the run summary read this view, and nothing
else: not a role's state. Both drivers feed it the same events (the simulator after every event,
Ray as the driver collects them), so they give the same readings, and keeping it costs what the
events cost, not the size of the cluster. What it holds:

- per partition, the newest committed state (`partition_change`, by metadata offset: every voter
  reports each record, and a MinISR config change reports the partitions it applies to again);
- per broker, the newest committed registration (`broker_change`, by metadata offset) and whether
  its process runs (`process_start`, `process_stop`, crash `fault`s);
- per voter, its quorum state and epoch (`raft_state`);
- per replica of a running broker, a mirror of its log (batch base offset, count, leader epoch
  and CRC: `replica_recovered`, `appended`, `truncated`), its local HWM (`replica_hwm`), whether
  it acts as leader, in which leader epoch, with which ISR and replication quorum
  (`become_leader`, `become_follower`, `replication_quorum`), and the epoch its broker registered
  with (`broker_registered`); per down broker, what its disk holds (`replica_survived` after a
  crash, the logs as they were after a clean stop); a running broker's replicas in a failed log
  directory (`replica_offline`, KIP-858), whose logs count as a down broker's until it restarts;
- per producer, each record's outcome by sequence, the batches acknowledged (for `acked_lost`),
  and the produce latency; per consumer, what it read; the committed elections.

A value the history cannot tell yet is `UNKNOWN` (states.py).
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .events import CLEAN_ELECTIONS, EventRecord
from .latency import LatencyHistogram
from .states import UNKNOWN, BrokerState, PartitionState, QuorumState, ReplicaState

Key = tuple[str, int]

# A record's outcome, by sequence (ProducerRecords.outcomes).
PENDING, OK, FAIL, INFO = 0, 1, 2, 3
_OUTCOME = {"ok": OK, "fail": FAIL, "info": INFO}


_VERSIONS = itertools.count()


class LogMirror:
    """A replica's log as the history tells it, batch by batch.

    Invariant: batches are contiguous from the first base offset, `end_offset` is the LEO, and
    `version` is new at the mirror's creation and at every truncation or replacement, unique
    among all mirrors (a prefix checked at one version stays the same until it changes; a check
    that remembers a version never mistakes a restarted replica's new mirror for the old one, as
    it could with `id()`, which a freed object's successor may reuse)."""

    __slots__ = ("bases", "counts", "crcs", "end_offset", "epochs", "version")

    def __init__(self) -> None:
        self.bases: list[int] = []
        self.counts: list[int] = []
        self.epochs: list[int] = []
        self.crcs: list[int] = []
        self.end_offset = 0
        self.version = next(_VERSIONS)

    def append(self, base: int, count: int, epoch: int, crc: int) -> None:
        self.bases.append(base)
        self.counts.append(count)
        self.epochs.append(epoch)
        self.crcs.append(crc)
        self.end_offset = base + count

    def truncate(self, end_offset: int) -> None:
        """Keep the batches that end at or below `end_offset` (logs are cut at batch bounds)."""
        if end_offset >= self.end_offset:
            return
        i = bisect_right(self.bases, end_offset - 1) if end_offset > 0 else 0
        while i > 0 and self.bases[i - 1] + self.counts[i - 1] > end_offset:
            i -= 1
        del self.bases[i:], self.counts[i:], self.epochs[i:], self.crcs[i:]
        self.end_offset = self.bases[-1] + self.counts[-1] if self.bases else 0
        self.version = next(_VERSIONS)

    def replace(self, bases: Iterable[int], counts: Iterable[int], epochs: Iterable[int], crcs: Iterable[int]) -> None:
        self.bases, self.counts, self.epochs, self.crcs = list(bases), list(counts), list(epochs), list(crcs)
        self.end_offset = self.bases[-1] + self.counts[-1] if self.bases else 0
        self.version = next(_VERSIONS)

    def batch_index(self, offset: int) -> int | None:
        """The index of the batch holding `offset`, None past the LEO."""
        if offset >= self.end_offset or offset < 0 or not self.bases:
            return None
        i = bisect_right(self.bases, offset) - 1
        return i if i >= 0 else None

    def holds(self, base: int, count: int, crc: int) -> bool:
        """Whether the batch that went to `base` (with `count` records and this CRC) is here."""
        i = self.batch_index(base)
        return i is not None and self.bases[i] == base and self.crcs[i] == crc and self.counts[i] == count


@dataclass
class ReplicaMirror:
    """A running broker's replica of one partition. `role` is none, leader or follower; as
    leader, `isr` is its committed ISR and `quorum` its replication quorum (`replication_quorum`)."""

    log: LogMirror = field(default_factory=LogMirror)
    hwm: int = 0
    role: str = "none"
    leader_epoch: int = -1
    leso: int = -1
    isr: tuple[int, ...] = ()
    quorum: tuple[int, ...] = ()


@dataclass
class AckedBatch:
    """A batch acknowledged "ok" (what `acked_lost` looks for in the logs)."""

    topic: str
    partition: int
    base_offset: int
    count: int
    crc: int
    acks: str
    topic_id: str | None = None
    # The records acknowledged of the batch (a real client's delivery reports acknowledge a batch
    # one record at a time); None: all `count`.
    records: int | None = None

    @property
    def acked_records(self) -> int:
        return self.count if self.records is None else self.records


def acked_batch(ev: Any) -> AckedBatch:
    """The batch of the log a `produce_ack` "ok" acknowledges (records of), as the checks look for it."""
    base, count, crc = ev.batch
    return AckedBatch(ev.topic, ev.partition, base, count, crc, ev.acks, ev.topic_id,
                      None if count == len(ev.sequences) else len(ev.sequences))


@dataclass
class ProducerRecords:
    """What the history tells of one producer's records. Invariant: `outcomes[s]` is the outcome
    of sequence `s` (PENDING until its `produce_ack`); sequences are dense from 0."""

    outcomes: bytearray = field(default_factory=bytearray)
    acked: int = 0
    failed: int = 0  # not acknowledged: fail or info (every reader's `failed`)
    indeterminate: int = 0  # of those, info
    errors: dict[int, str] = field(default_factory=dict)  # sequence -> why not ok
    acked_batches: list[AckedBatch] = field(default_factory=list)
    load_started_ms: float | None = None
    load_finished_ms: float | None = None
    throttled: int = 0  # load records never offered: the generator was blocked on a full buffer


class ClusterProjection:
    """An event sink, and the cluster view conditions and the summary read."""

    def __init__(self, voters: Iterable[str], brokers: int, now_ms: Callable[[], float]) -> None:
        self.voters = tuple(voters)
        self.broker_ids = tuple(range(1, brokers + 1))
        self._now_ms = now_ms
        self._partitions: dict[Key, Any] = {}  # the newest partition_change
        # Deleted topics (`topic_deleted`): their ids, whose records are neither lost nor required
        # (docs/reference), and each name's last deletion's metadata offset (older reports of its
        # partitions are of the deleted topic).
        self.deleted_topic_ids: set[str] = set()
        self._deleted_at: dict[str, int] = {}
        self._registrations: dict[int, Any] = {}  # the newest broker_change
        self.running: dict[str, bool] = {}
        self.incarnation: dict[str, int] = {}
        self._raft: dict[str, tuple[str, int]] = {}  # running voter -> (state, epoch)
        self.replicas: dict[int, dict[Key, ReplicaMirror]] = {}  # broker -> running replicas
        # What a down broker's disk holds: its logs at a clean stop, or what a crash left
        # (`replica_survived`); `crashed[b]` keeps the logs it had when it crashed.
        self.down_logs: dict[int, dict[Key, LogMirror]] = {}
        self.crashed: dict[int, dict[Key, LogMirror]] = {}
        # A running broker's replicas in a failed log directory (KIP-858): served no more, their
        # logs on the disk as they were (also in `down_logs`, which holds what a broker's disk
        # keeps that nobody serves), until the broker restarts.
        self.offline_replicas: dict[int, dict[Key, ReplicaMirror]] = {}
        self.broker_epochs: dict[int, int | None] = {}  # the epoch each running broker registered with
        self.producers: dict[str, ProducerRecords] = {}
        self.consumed = 0
        self.read_to: dict[str, dict[Key, int]] = {}  # consumer -> partition -> next offset (back at a reset)
        self.consume_done: dict[str, dict[int, int]] = {}  # consumer -> command -> count
        self.list_offsets_answers: dict[str, dict[int, Any]] = {}  # consumer -> request -> answer
        self.final_reads_done: list[Any] = []
        self.latency = LatencyHistogram()
        self._elections_seen: set[int] = set()  # metadata offsets of counted elections
        self.elections = {"clean": 0, "unclean": 0, "elr": 0}
        self.quorum_elections = 0
        self._handlers: dict[str, Callable[[EventRecord], None]] = {
            "partition_change": self._on_partition_change,
            "topic_deleted": self._on_topic_deleted,
            "broker_change": self._on_broker_change,
            "election": self._on_election,
            "process_start": self._on_process_start,
            "process_stop": self._on_process_stop,
            "fault": self._on_fault,
            "raft_state": self._on_raft_state,
            "raft_leader_elected": self._on_raft_leader_elected,
            "replica_recovered": self._on_replica_recovered,
            "replica_deleted": self._on_replica_deleted,
            "replica_offline": self._on_replica_offline,
            "appended": self._on_appended,
            "truncated": self._on_truncated,
            "replica_hwm": self._on_replica_hwm,
            "replication_quorum": self._on_replication_quorum,
            "replica_survived": self._on_replica_survived,
            "broker_registered": self._on_broker_registered,
            "become_leader": self._on_become_leader,
            "become_follower": self._on_become_follower,
            "produce_send": self._on_produce_send,
            "produce_ack": self._on_produce_ack,
            "load_started": self._on_load_started,
            "load_finished": self._on_load_finished,
            "load_throttled": self._on_load_throttled,
            "consume": self._on_consume,
            "consumer_reset": self._on_consumer_reset,
            "consume_done": self._on_consume_done,
            "list_offsets_answer": self._on_list_offsets_answer,
            "final_read_done": self._on_final_read_done,
        }

    def __call__(self, rec: EventRecord) -> None:
        handler = self._handlers.get(rec.event.kind)
        if handler is not None:
            handler(rec)

    # --- folding: metadata ------------------------------------------------------------------------

    def _on_partition_change(self, rec: EventRecord) -> None:
        ev = rec.event
        key = (ev.topic, ev.partition)
        known = self._partitions.get(key)
        if (known is None or ev.metadata_offset > known.metadata_offset) and ev.metadata_offset > self._deleted_at.get(ev.topic, -1):
            self._partitions[key] = ev

    def _on_topic_deleted(self, rec: EventRecord) -> None:
        ev = rec.event
        self.deleted_topic_ids.add(ev.topic_id)
        if ev.metadata_offset <= self._deleted_at.get(ev.topic, -1):
            return  # another voter's report of the same record
        self._deleted_at[ev.topic] = ev.metadata_offset
        for key in [k for k, p in self._partitions.items() if k[0] == ev.topic and p.metadata_offset < ev.metadata_offset]:
            del self._partitions[key]
        # The replicas of the deleted topic, running or on a down broker's disk, are no part of
        # any partition now (brokers delete them as they apply the record).
        for logs in (*self.replicas.values(), *self.down_logs.values(), *self.crashed.values(), *self.offline_replicas.values()):
            for key in [k for k in logs if k[0] == ev.topic]:
                del logs[key]

    def _on_broker_change(self, rec: EventRecord) -> None:
        ev = rec.event
        known = self._registrations.get(ev.broker)
        if known is None or ev.metadata_offset > known.metadata_offset:
            self._registrations[ev.broker] = ev

    def _on_election(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.metadata_offset in self._elections_seen:
            return  # another voter's report of the same record
        self._elections_seen.add(ev.metadata_offset)
        if ev.election_kind in CLEAN_ELECTIONS:
            self.elections["clean"] += 1
            if ev.election_kind == "elr":
                self.elections["elr"] += 1
        else:
            self.elections["unclean"] += 1

    # --- folding: processes and the quorum ----------------------------------------------------------

    def _on_process_start(self, rec: EventRecord) -> None:
        node = rec.node
        self.running[node] = True
        self.incarnation[node] = rec.incarnation
        if node.startswith("b"):
            b = int(node[1:])
            self.replicas[b] = {}  # what survived comes as replica_recovered events
            self.broker_epochs[b] = None
            self.down_logs.pop(b, None)
            self.crashed.pop(b, None)
            self.offline_replicas.pop(b, None)  # a failed directory is back at a restart

    def _on_process_stop(self, rec: EventRecord) -> None:
        # A clean stop flushed everything: the disk holds the logs as they were (those of a failed
        # log directory among them, kept since the failure).
        logs = self._down(rec.node)
        if logs is not None:
            b = int(rec.node[1:])
            self.down_logs[b] = {**self.down_logs.get(b, {}), **logs}

    def _on_fault(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.fault.startswith("crash_") and self.running.get(ev.target):
            logs = self._down(ev.target)
            if logs is not None:
                b = int(ev.target[1:])
                self.crashed[b] = logs
                self.down_logs[b] = {}  # what survived comes as replica_survived events

    def _down(self, node: str) -> dict[Key, LogMirror] | None:
        """Mark `node` down; for a broker, return its replicas' logs as they were."""
        self.running[node] = False
        self._raft.pop(node, None)
        if node.startswith("b"):
            b = int(node[1:])
            self.broker_epochs.pop(b, None)
            self.offline_replicas.pop(b, None)
            return {key: r.log for key, r in self.replicas.pop(b, {}).items()}
        return None

    def _on_broker_registered(self, rec: EventRecord) -> None:
        if self.running.get(rec.node):
            self.broker_epochs[int(rec.node[1:])] = rec.event.epoch

    def _on_raft_state(self, rec: EventRecord) -> None:
        if rec.node in self.voters and self.running.get(rec.node):
            ev = rec.event
            self._raft[rec.node] = (ev.state, ev.epoch)

    def _on_raft_leader_elected(self, rec: EventRecord) -> None:
        self.quorum_elections += 1

    # --- folding: replicas -------------------------------------------------------------------------

    def _replica(self, rec: EventRecord) -> ReplicaMirror | None:
        """The mirror of the replica an event is about; None for a stopped broker's, or for one
        of a deleted topic (its events until the broker deletes it say nothing of the partition)."""
        node = rec.node
        ev = rec.event
        if not self.running.get(node) or ev.topic_id in self.deleted_topic_ids:
            return None
        return self.replicas.setdefault(int(node[1:]), {}).setdefault((ev.topic, ev.partition), ReplicaMirror())

    def _on_replica_recovered(self, rec: EventRecord) -> None:
        r = self._replica(rec)
        if r is not None:
            ev = rec.event
            r.log.replace(ev.batch_offsets, ev.batch_counts, ev.batch_epochs, ev.batch_crcs)
            r.hwm = ev.hwm

    def _on_replica_deleted(self, rec: EventRecord) -> None:
        ev = rec.event
        self.replicas.get(int(rec.node[1:]), {}).pop((ev.topic, ev.partition), None)

    def _on_replica_offline(self, rec: EventRecord) -> None:
        """The replica's log directory failed: its log stays on the disk, served by nobody (a
        replica that could not even be created there has an empty one)."""
        ev = rec.event
        if not self.running.get(rec.node) or ev.topic_id in self.deleted_topic_ids:
            return
        b, key = int(rec.node[1:]), (ev.topic, ev.partition)
        r = self.replicas.get(b, {}).pop(key, None) or ReplicaMirror()
        r.role = "none"
        self.offline_replicas.setdefault(b, {})[key] = r
        self.down_logs.setdefault(b, {})[key] = r.log

    def _on_appended(self, rec: EventRecord) -> None:
        r = self._replica(rec)
        if r is not None:
            ev = rec.event
            r.log.append(ev.offset, ev.count, ev.leader_epoch, ev.batch_crc)

    def _on_truncated(self, rec: EventRecord) -> None:
        r = self._replica(rec)
        if r is not None:
            r.log.truncate(rec.event.offset)
            r.hwm = min(r.hwm, r.log.end_offset)

    def _on_replica_hwm(self, rec: EventRecord) -> None:
        r = self._replica(rec)
        if r is not None:
            r.hwm = rec.event.hwm

    def _on_replication_quorum(self, rec: EventRecord) -> None:
        r = self._replica(rec)
        if r is not None:
            r.isr, r.quorum = rec.event.isr, rec.event.proposed

    def _on_replica_survived(self, rec: EventRecord) -> None:
        ev = rec.event
        log = LogMirror()
        log.replace(ev.batch_offsets, ev.batch_counts, ev.batch_epochs, ev.batch_crcs)
        self.down_logs.setdefault(ev.broker, {})[(ev.topic, ev.partition)] = log

    def _on_become_leader(self, rec: EventRecord) -> None:
        r = self._replica(rec)
        if r is not None:
            ev = rec.event
            r.role, r.leader_epoch, r.leso, r.hwm = "leader", ev.leader_epoch, ev.leso, ev.hwm
            r.isr = r.quorum = ev.isr

    def _on_become_follower(self, rec: EventRecord) -> None:
        r = self._replica(rec)
        if r is not None:
            ev = rec.event
            r.role, r.leader_epoch, r.hwm = "follower", ev.leader_epoch, ev.hwm
            r.log.truncate(ev.leo)  # before KIP-101 a new follower cuts to its HWM first

    # --- folding: clients ---------------------------------------------------------------------------

    def _producer(self, name: str) -> ProducerRecords:
        p = self.producers.get(name)
        if p is None:
            p = self.producers[name] = ProducerRecords()
        return p

    def _on_produce_send(self, rec: EventRecord) -> None:
        p = self._producer(rec.event.producer)
        top = max(rec.event.sequences) + 1
        if top > len(p.outcomes):
            p.outcomes.extend(bytes(top - len(p.outcomes)))

    def _on_produce_ack(self, rec: EventRecord) -> None:
        ev = rec.event
        p = self._producer(ev.producer)
        code = _OUTCOME[ev.outcome]
        top = max(ev.sequences) + 1
        if top > len(p.outcomes):
            p.outcomes.extend(bytes(top - len(p.outcomes)))
        # A second "ok" for records already acknowledged (a Kafka client's retry of a batch whose
        # first answer was lost on the way, answered as a duplicate) acknowledges nothing new.
        again = code == OK and all(p.outcomes[s] == OK for s in ev.sequences)
        for s in ev.sequences:
            p.outcomes[s] = code
        if again:
            return
        if code == OK:
            p.acked += len(ev.sequences)
            # A batch's records mostly share one latency (handed over in one round): one update
            # per run of equal values, the same counts as one per record.
            for latency, run in itertools.groupby(ev.latencies_ms):
                self.latency.record_ms(latency, sum(1 for _ in run))
            if ev.first_offset is not None:
                p.acked_batches.append(acked_batch(ev))
        else:
            p.failed += len(ev.sequences)
            if code == INFO:
                p.indeterminate += len(ev.sequences)
            for s in ev.sequences:
                p.errors[s] = ev.error

    def _on_load_started(self, rec: EventRecord) -> None:
        p = self._producer(rec.node)
        p.load_started_ms, p.load_finished_ms = rec.time_ms, None

    def _on_load_finished(self, rec: EventRecord) -> None:
        self._producer(rec.node).load_finished_ms = rec.time_ms

    def _on_load_throttled(self, rec: EventRecord) -> None:
        self._producer(rec.node).throttled += rec.event.count

    def _on_consume(self, rec: EventRecord) -> None:
        ev = rec.event
        n = len(ev.sequences)
        self.consumed += n
        positions = self.read_to.setdefault(ev.consumer, {})
        key = (ev.topic, ev.partition)
        positions[key] = max(positions.get(key, 0), ev.first_offset + n)

    def _on_consumer_reset(self, rec: EventRecord) -> None:
        # The log it read was truncated under it (KIP-320): it reads from `offset` again, and has
        # not read the records that replaced the ones it passed.
        ev = rec.event
        self.read_to.setdefault(ev.consumer, {})[(ev.topic, ev.partition)] = ev.offset

    def _on_consume_done(self, rec: EventRecord) -> None:
        self.consume_done.setdefault(rec.node, {})[rec.event.command] = rec.event.count

    def _on_list_offsets_answer(self, rec: EventRecord) -> None:
        self.list_offsets_answers.setdefault(rec.node, {})[rec.event.command] = rec.event

    def _on_final_read_done(self, rec: EventRecord) -> None:
        self.final_reads_done.append(rec.event)

    # --- the view ------------------------------------------------------------------------------------

    @property
    def now_ms(self) -> float:
        return self._now_ms()

    def is_running(self, node: str) -> bool:
        return self.running.get(node, False)

    def committed_partition(self, key: Key) -> Any:
        """The newest committed `partition_change` of a partition (None before its creation)."""
        return self._partitions.get(key)

    def acting_leader(self, key: Key) -> ReplicaMirror | None:
        """The leader's replica once it acts as leader in the committed leader epoch, else None
        (no leader, not taken over yet, down, or a zombie of an older epoch)."""
        ev = self._partitions.get(key)
        if ev is None or ev.leader is None:
            return None
        r = self.replicas.get(ev.leader, {}).get(key)
        return r if r is not None and r.role == "leader" and r.leader_epoch == ev.leader_epoch else None

    def partition_keys(self) -> list[Key]:
        """Every partition the committed metadata has created, as (topic, partition)."""
        return list(self._partitions)

    def partitions(self) -> dict[str, PartitionState]:
        """Every partition's state (the summary's `final`: O(partitions); a condition on one
        partition reads `partition` instead)."""
        return {f"{key[0]}-{key[1]}": self._partition_state(key) for key in sorted(self._partitions)}

    def partition(self, name: str) -> PartitionState | None:
        """One partition's state (`t-0`), or None before its creation."""
        topic, _, p = name.rpartition("-")
        try:
            key = (topic, int(p))
        except ValueError:
            return None
        return self._partition_state(key) if key in self._partitions else None

    def _partition_state(self, key: Key) -> PartitionState:
        ev = self._partitions[key]
        if ev.leader is None:
            hwm = None
        else:
            leader = self.acting_leader(key)
            hwm = UNKNOWN if leader is None else leader.hwm
        return PartitionState.from_change(ev, hwm)

    def replica(self, partition: str, broker: int) -> ReplicaState | None:
        """A running broker's replica (one in a failed log directory included: its log as it was).
        Its `dir` is the one the committed partition record names."""
        topic, _, p = partition.rpartition("-")
        key = (topic, int(p))
        r = self.replicas.get(broker, {}).get(key) or self.offline_replicas.get(broker, {}).get(key)
        if r is None:
            return None
        ev = self._partitions.get(key)
        return ReplicaState(leo=r.log.end_offset, hwm=r.hwm, in_sync=ev is not None and broker in ev.isr,
                            dir=UNKNOWN if ev is None else _dir_of(ev, broker))

    def brokers(self) -> dict[int, BrokerState]:
        out = {}
        for b in self.broker_ids:
            reg = self._registrations.get(b)
            out[b] = BrokerState(
                fenced=UNKNOWN if reg is None else reg.fenced,
                epoch=UNKNOWN if reg is None else reg.epoch,
                alive=self.running.get(f"b{b}", False),
                in_controlled_shutdown=UNKNOWN if reg is None else bool(reg.in_controlled_shutdown),
                offline_log_dirs=UNKNOWN if reg is None else list(reg.offline_log_dirs or ()),
            )
        return out

    def quorum(self) -> QuorumState:
        """The quorum as its latest epoch sees it: `epoch` is the highest epoch a running voter has
        reached, and `leader` the voter leading that epoch, or None while it has none (an election
        under way). A deposed leader still leading an older epoch, cut off from the voters that
        moved on, is not the quorum's leader: leader and epoch always name one pair, as Kafka's
        RaftEventSimulationTest reads its cluster (`Cluster.latestLeader`)."""
        # Every voter, as the documented summary shows them; null for one that is down (or has not
        # told its state yet): a reader can index any voter.
        states = {int(v[1:]): self._raft[v][0] if v in self._raft else None for v in sorted(self.voters, key=lambda v: int(v[1:]))}
        if not self._raft:
            return QuorumState(leader=None, epoch=None, states=states)
        epoch = max(e for _, e in self._raft.values())
        leaders = [int(v[1:]) for v, (state, e) in self._raft.items() if state == "leader" and e == epoch]
        return QuorumState(leader=leaders[0] if leaders else None, epoch=epoch, states=states)

    def acked(self) -> int:
        """Records acknowledged so far (cheap: no log is read)."""
        return sum(p.acked for p in self.producers.values())

    def history(self) -> dict[str, Any]:
        """Every history counter (the summary's)."""
        return {name: self.counter(name) for name in _COUNTERS}

    def counter(self, name: str) -> Any:
        """One history counter: a condition on `acked` polled at every step must not pay for
        `acked_lost`, which reads every acknowledged batch."""
        return _COUNTERS[name](self)

    def acked_lost(self) -> int:
        """Acknowledged acks=all records missing from the partition's log now (`holders`)."""
        lost = 0
        for p in self.producers.values():
            for b in p.acked_batches:
                if b.acks != "all" or b.topic_id in self.deleted_topic_ids:
                    continue  # not required: acks below all, or its topic was deleted
                if not any(log.holds(b.base_offset, b.count, b.crc) for log in self.holders((b.topic, b.partition))):
                    lost += b.acked_records
        return lost

    def holders(self, key: Key) -> list[LogMirror]:
        """The logs that make up partition `key`'s committed log now: the acting leader's; while
        there is none, those of the replicas a clean election could bring back, ISR and ELR
        members, running or stopped (a stopped broker's disk, what a crash left of one). A record
        on the disk of an ISR member that was shut down is not lost while the partition waits for
        it (KIP-966's Last Replica Standing); one only on a replica an unclean election has left
        behind is, running or not: that replica will truncate to the new leader's log. With no
        ISR and no ELR (waiting for unclean recovery), every running replica's log. The final
        read reads the same replicas (actors/runtime/clients.py `_final_read`)."""
        leader = self.acting_leader(key)
        if leader is not None:
            return [leader.log]
        record = self._partitions.get(key)
        eligible = set(record.isr) | set(record.elr) if record is not None else set()
        running = [r.log for b, reps in self.replicas.items() if (r := reps.get(key)) is not None and (not eligible or b in eligible)]
        return running + [log for b, logs in self.down_logs.items() if b in eligible and (log := logs.get(key)) is not None]

    # --- clients' progress (for steps) ---------------------------------------------------------------

    def outcomes(self, producer: str, first: int, count: int) -> tuple[int, int, list[str]]:
        """(acked, not acked, errors) of a producer's records `first`..`first+count-1` so far."""
        p = self.producers.get(producer)
        if p is None:
            return 0, 0, []
        window = p.outcomes[first : first + count]
        acked = window.count(OK)
        settled = count - window.count(PENDING) - (count - len(window))
        errors = []
        for s in range(first, first + count):
            e = p.errors.get(s)
            if e is not None and e not in errors:
                errors.append(e)
        return acked, settled - acked, errors

    def load_stats(self) -> dict[str, float] | None:
        """What the background load achieved: records offered (came due by the load's rate),
        throttled (never offered: the producer's buffer was full), sent, acknowledged and failed by
        the load's producers, and acknowledged records per second of load (start to end, or to now)."""
        now = self.now_ms
        loads = [p for p in self.producers.values() if p.load_started_ms is not None]
        if not loads:
            return None
        start = min(p.load_started_ms for p in loads)
        end = max(now if p.load_finished_ms is None else p.load_finished_ms for p in loads)
        duration_ms = max(end - start, 1.0)
        acked = sum(p.acked for p in loads)
        sent = sum(len(p.outcomes) for p in loads)
        throttled = sum(p.throttled for p in loads)
        return {"offered": sent + throttled, "throttled": throttled, "sent": sent, "acked": acked, "failed": sum(p.failed for p in loads),
                "duration_ms": round(duration_ms, 1), "acked_per_s": round(acked * 1000.0 / duration_ms, 1)}


def _dir_of(change: Any, broker: int) -> int:
    """A replica's log directory in a `partition_change` (its `directories` follow `replicas`;
    none: every replica in directory 0)."""
    replicas, directories = list(change.replicas), list(change.directories or ())
    return directories[replicas.index(broker)] if directories and broker in replicas else 0


_COUNTERS: dict[str, Callable[[ClusterProjection], Any]] = {
    "acked": ClusterProjection.acked,
    "failed": lambda v: sum(p.failed for p in v.producers.values()),
    "indeterminate": lambda v: sum(p.indeterminate for p in v.producers.values()),
    "acked_lost": ClusterProjection.acked_lost,
    "consumed": lambda v: v.consumed,
    "elections_clean": lambda v: v.elections["clean"],
    "elections_unclean": lambda v: v.elections["unclean"],
    "elections_elr": lambda v: v.elections["elr"],
    "quorum_elections": lambda v: v.quorum_elections,
}
