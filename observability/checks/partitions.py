"""The partition replication invariants of docs/explanation/protocol-facts.md, judged from the history.

| name                          | how it is observed here                                              |
|-------------------------------|----------------------------------------------------------------------|
| LeaderCompleteness            | the acting leader's log holds every committed batch and every acks=all one |
| LogMatching                   | running replicas agree below the smaller of their local HWMs          |
| LeaderCandidateCompleteness   | running ISR and ELR members (registered with their current epoch) have LEO >= true HWM |
| ReplicationQuorumSuperset     | leader's replication quorum contains ISR + ELR while its ISR >= MinISR |
| NoCommittedRecordLostGlobally | every acks=all batch is on some replica (running, or on a down broker's disk) |
| UncleanExclusion              | a broker back from an unclean start is not leader/ISR/ELR before reaching the true HWM |
| StrictMinIsrHWM               | a leader's HWM never moves while its committed ISR < effective MinISR |
| TrueHWMMonotonic              | a leader that trusts its HWM (HWM >= LESO) never reports one below the true HWM |
| AppliedHWM                    | ListOffsets answers and ISR expansions respect LESO and the local HWM |
| ConsistentRead                | what a consumer read is still what the acting leader holds there       |

Everything is read from the cluster view (observability/projection.py: the replicas' log mirrors,
HWMs, roles and replication quorums, the committed metadata, the acknowledged batches, what down
brokers' disks hold) and from events, never from a role. The *true HWM* is the largest HWM any
leader ever had (§6.4); the *committed log* is the batches below it, as the leader that advanced it
held them.

Incremental: an event marks the partition it touched (a broker-wide event, every partition), and
`check()` judges only those; `check_all()` judges every partition (tests, the end of a run). Within
a partition the checks resume where they stopped while the logs they compared have not been
truncated or replaced since (`LogMirror.version`). The two record-level kinds, a row per record
and most of a loaded run's events, mark less: an acknowledgement is judged by the two checks that
read acknowledgements (LeaderCompleteness, NoCommittedRecordLostGlobally), a read by
ConsistentRead; every other check reads nothing they change, so it would find what it found at
the partition's last whole check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from observability.events import UNCLEAN_ELECTIONS, BeyondTolerance, EventRecord
from observability.projection import AckedBatch, ClusterProjection, LogMirror, acked_batch

Key = tuple[str, int]
RECOVERING = "RECOVERING"  # controller_quorum.metadata: after an unclean election (KIP-704)


class PartitionChecks:
    """An event sink (registered after the cluster view it reads) and a check set."""

    def __init__(self, view: ClusterProjection, record: Callable[[Any], None]) -> None:
        self.view = view
        self._record = record  # for the checks' own events (beyond_tolerance)
        self.true_hwm: dict[Key, int] = {}
        # Per partition: (base offset, count, crc) of every committed batch, in order.
        self.committed: dict[Key, list[tuple[int, int, int]]] = {}
        self._leader_checked: dict[Key, tuple] = {}  # ((leader, epoch), version, n committed ok, n acked ok)
        self._pairs_checked: dict[tuple[Key, int, int], tuple[int, int, int]] = {}
        self._leader_hwm_seen: dict[tuple[Key, int, int], int] = {}
        # Brokers back from an unclean start (registered without a previous epoch after their first
        # start), each with the partitions it has caught up on since. Judged from the broker's own
        # event, not from the replicas it holds: a replica whose files did not survive is created
        # later, from the metadata, and is just as far behind.
        self._unclean_start: dict[int, set[Key]] = {}
        self._acked: dict[Key, list[AckedBatch]] = {}  # acks=all batches acknowledged ok
        self._lost_checked: dict[Key, tuple[Any, int]] = {}
        self._lossy: dict[Key, set[int]] = {}
        # Partitions that suffered at least MinISR lossy unclean shutdowns of leader candidates:
        # NoCommittedRecordLostGlobally may fail there (protocol-facts.md).
        self.beyond_tolerance: set[Key] = set()
        # The leader epoch of each partition's newest unclean election, and the epoch the checks
        # were last rebased for: the election itself, not a state that may be too short to see,
        # tells that the log starts over.
        self._unclean_epoch: dict[Key, int] = {}
        self._rebased_epoch: dict[Key, int] = {}
        # Per consumer and partition: (offset, batch base offset, batch CRC) of each offset read,
        # as first read; and how many of them were checked against which leader log version.
        self._reads: dict[tuple[str, Key], list[tuple[int, int, int]]] = {}
        self._readers: dict[Key, list[str]] = {}  # the consumers that read each partition
        self._read_offsets: dict[tuple[str, Key], set[int]] = {}
        self._reads_checked: dict[tuple[str, Key], tuple[Any, int, int]] = {}
        self._findings: dict[str, str] = {}
        self._dirty: set[Key] = set()  # to judge whole
        self._all_dirty = False
        # To judge only for what an acknowledgement or a read changes (when not in `_dirty`).
        self._acks_dirty: set[Key] = set()
        self._reads_dirty: set[Key] = set()
        self._handlers: dict[str, Callable[[EventRecord], None]] = {
            "partition_change": self._touch,
            "appended": self._on_appended,
            "truncated": self._touch,
            "replica_hwm": self._touch,
            "replica_recovered": self._touch,
            "replica_deleted": self._touch,
            "become_leader": self._touch,
            "become_follower": self._touch,
            "replication_quorum": self._touch,
            "broker_change": self._touch_all,
            "process_start": self._touch_all,
            "process_stop": self._touch_all,
            "replica_survived": self._on_survived,
            "fault": self._on_fault,
            "broker_registered": self._on_broker_registered,
            "election": self._on_election,
            "list_offsets": self._on_list_offsets,
            "isr_expand_proposed": self._on_isr_expand_proposed,
            "produce_ack": self._on_produce_ack,
            "consume": self._on_consume,
            "topic_deleted": self._on_topic_deleted,
        }

    # --- events -------------------------------------------------------------------------------------

    def __call__(self, rec: EventRecord) -> None:
        handler = self._handlers.get(rec.event.kind)
        if handler is not None:
            handler(rec)

    def _touch(self, rec: EventRecord) -> None:
        self._dirty.add((rec.event.topic, rec.event.partition))

    def _on_appended(self, rec: EventRecord) -> None:
        """An append adds records at a log's end, above its HWM: it cannot break a check (logs
        are compared below their HWMs, a leader is judged on what it holds, a candidate on reaching
        the true HWM), so it marks nothing, except where it may bring a broker back from an
        unclean start level with the true HWM: that is state the next check must not miss."""
        caught_up = self._unclean_start.get(int(rec.node[1:]))
        if caught_up is not None:
            key = (rec.event.topic, rec.event.partition)
            if key not in caught_up:
                self._dirty.add(key)

    def _touch_all(self, rec: EventRecord) -> None:
        self._all_dirty = True

    def _on_fault(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.fault.startswith("crash_"):
            self._all_dirty = True
        if ev.fault == "crash_disk" and ev.target.startswith("b"):
            # A disk loss keeps no directory, so no `replica_survived` follows: every replica the
            # broker held (the view kept their logs at the crash) lost its whole log.
            broker = int(ev.target[1:])
            for key in self.view.crashed.get(broker, {}):
                self._survived(broker, key, ([], [], []))

    def _on_survived(self, rec: EventRecord) -> None:
        ev = rec.event
        self._survived(ev.broker, (ev.topic, ev.partition), (list(ev.batch_offsets), list(ev.batch_counts), list(ev.batch_crcs)))

    def _survived(self, broker: int, key: Key, kept: tuple[list, list, list]) -> None:
        """A crash may have taken data of a replica that was a leader candidate (in the
        controller's ISR or ELR, or in its LastKnownELR, from which KIP-966's unclean recovery
        elects when both are empty): a lossy unclean shutdown (the protocol description §6.2).
        `kept`: the log's batches (base offsets, counts, CRCs) as the disk kept them."""
        self._dirty.add(key)
        before = self.view.crashed.get(broker, {}).get(key)
        state = self.view.committed_partition(key)
        if before is None or state is None or broker not in set(state.isr) | set(state.elr) | set(state.last_known_elr):
            return
        if kept != (before.bases, before.counts, before.crcs):
            self._lossy.setdefault(key, set()).add(broker)

    def _on_broker_registered(self, rec: EventRecord) -> None:
        if not rec.event.clean and rec.incarnation > 0:
            self._unclean_start[int(rec.node[1:])] = set()
        self._all_dirty = True

    def _on_election(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.election_kind in UNCLEAN_ELECTIONS:
            key = (ev.topic, ev.partition)
            self._unclean_epoch[key] = max(self._unclean_epoch.get(key, -1), ev.leader_epoch)
            self._dirty.add(key)

    def _on_list_offsets(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.offset is not None and ev.hwm < ev.leso:
            self._findings.setdefault("AppliedHWM", f"{rec.node} answered ListOffsets {ev.offset} for {ev.topic}-{ev.partition} with HWM {ev.hwm} < LESO {ev.leso}")

    def _on_isr_expand_proposed(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.leo < max(ev.hwm, ev.leso) or ev.fetch_epoch != ev.leader_epoch:
            self._findings.setdefault(
                "AppliedHWM",
                f"{rec.node} proposed adding {ev.follower} to the ISR of {ev.topic}-{ev.partition} at LEO {ev.leo} (HWM {ev.hwm}, LESO {ev.leso}, fetch epoch {ev.fetch_epoch}/{ev.leader_epoch})",
            )

    def _on_topic_deleted(self, rec: EventRecord) -> None:
        """A deleted topic's partitions start over if it is created again: forget what was judged
        of them (the view, read before, has dropped their replicas and metadata)."""
        topic = rec.event.topic

        def forget(table: dict | set, key_of=lambda k: k) -> None:
            for k in [k for k in table if key_of(k)[0] == topic]:
                if isinstance(table, set):
                    table.discard(k)
                else:
                    del table[k]

        for table in (self.true_hwm, self.committed, self._leader_checked, self._acked, self._lost_checked, self._lossy,
                      self._unclean_epoch, self._rebased_epoch, self._readers, self.beyond_tolerance, self._dirty,
                      self._acks_dirty, self._reads_dirty):
            forget(table)
        for table in (self._pairs_checked, self._leader_hwm_seen):
            forget(table, lambda k: k[0])
        for table in (self._reads, self._read_offsets, self._reads_checked):
            forget(table, lambda k: k[1])
        for caught_up in self._unclean_start.values():
            forget(caught_up)

    def _on_produce_ack(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.topic_id in self.view.deleted_topic_ids:
            return  # neither lost nor required (docs/reference)
        if ev.outcome == "ok" and ev.acks == "all":
            key = (ev.topic, ev.partition)
            self._acked.setdefault(key, []).append(acked_batch(ev))
            self._acks_dirty.add(key)

    def _on_consume(self, rec: EventRecord) -> None:
        ev = rec.event
        if ev.topic_id in self.view.deleted_topic_ids:
            return
        key = (ev.topic, ev.partition)
        reads = self._reads.get((ev.consumer, key))
        if reads is None:
            reads = self._reads[(ev.consumer, key)] = []
            self._readers.setdefault(key, []).append(ev.consumer)
        seen = self._read_offsets.setdefault((ev.consumer, key), set())
        for o in range(ev.first_offset, ev.first_offset + len(ev.sequences)):
            if o not in seen:  # the first read of an offset is what it must stay
                seen.add(o)
                reads.append((o, ev.batch_offset, ev.batch_crc))
        self._reads_dirty.add(key)

    # --- checking -----------------------------------------------------------------------------------

    def check(self) -> dict[str, str]:
        """The violations found in what changed since the last call."""
        found, self._findings = self._findings, {}
        # In a fixed order, whatever changed: when two partitions break one invariant at once, the
        # detail reported is the first one's, and the report is an event of the trace. A set's
        # order follows the topic names' string hashes, which differ from process to process.
        dirty, acks, reads = self._dirty, self._acks_dirty, self._reads_dirty
        if self._all_dirty:
            keys = sorted(self.view._partitions)
            whole = set(keys)
        else:
            whole = dirty
            keys = sorted(dirty | acks | reads) if acks or reads else sorted(dirty)
        self._all_dirty = False
        self._dirty, self._acks_dirty, self._reads_dirty = set(), set(), set()
        for key in keys:
            if key in whole:
                self._check_partition(key, found)
            else:
                if key in acks:
                    self._check_acknowledged(key, found)
                if key in reads:
                    legit = self.view.acting_leader(key)
                    self._check_reads(key, legit.log if legit is not None else None, found)
        return found

    def check_all(self) -> dict[str, str]:
        """Every partition, whatever changed (the same verdicts as `check` after every event)."""
        self._all_dirty = True
        return self.check()

    def _check_partition(self, key: Key, found: dict[str, str]) -> None:
        view = self.view
        rec = view.committed_partition(key)
        if rec is None:
            return
        name = f"{key[0]}-{key[1]}"
        self._track_lossy_candidates(key, rec)
        running = self._running_replicas(key)
        replicas = {b: r for b, r in running.items() if b in rec.replicas}
        leaders = [(b, r) for b, r in replicas.items() if r.role == "leader"]
        self._advance_true_hwm(key, leaders)
        true_hwm = self.true_hwm.get(key, 0)
        legit = view.acting_leader(key)
        min_isr = rec.min_isr
        if legit is not None:
            self._check_leader(key, name, rec, legit, true_hwm, min_isr, found)
            unclean_epoch = self._unclean_epoch.get(key)
            newly_unclean = unclean_epoch == legit.leader_epoch and self._rebased_epoch.get(key) != unclean_epoch
            if rec.recovery_state == RECOVERING or newly_unclean:
                # An unclean election (its loss, if any, was just reported): from now on the
                # partition's log is this leader's, and the checks go on from there.
                self._rebase(key, legit)
                self._rebased_epoch[key] = legit.leader_epoch
                true_hwm = self.true_hwm[key]
        for b, r in leaders:
            self._check_strict_min_isr(key, name, b, r, min_isr, found)
        self._check_log_matching(key, name, replicas, found)
        self._check_candidates(key, name, rec, replicas, true_hwm, found)
        self._check_lost(key, running, found)
        self._check_reads(key, legit.log if legit is not None else None, found)

    def _running_replicas(self, key: Key) -> dict[int, Any]:
        """The partition's replicas on running brokers, by broker id."""
        return {b: r for b, reps in self.view.replicas.items() if (r := reps.get(key)) is not None}

    def _check_acknowledged(self, key: Key, found: dict[str, str]) -> None:
        """What `_check_partition` judges of a partition's acknowledgements, alone: the acting
        leader holds them, and some replica does."""
        view = self.view
        rec = view.committed_partition(key)
        if rec is None:
            return
        legit = view.acting_leader(key)
        if legit is not None:
            self._check_leader(key, f"{key[0]}-{key[1]}", rec, legit, self.true_hwm.get(key, 0), rec.min_isr, found)
        running = self._running_replicas(key)
        self._check_lost(key, running, found)

    def _advance_true_hwm(self, key: Key, leaders) -> None:
        best = self.true_hwm.get(key, 0)
        # After an unclean election the log starts over from its leader (`_rebase`): a replica
        # still leading an older epoch (cut off, it has not heard of the election) holds the old
        # history, and its local HWM says nothing of the new log's commits.
        since = self._rebased_epoch.get(key, -1)
        for _, r in leaders:
            if r.hwm > best and r.leader_epoch >= since:
                committed = self.committed.setdefault(key, [])
                covered = committed[-1][0] + committed[-1][1] if committed else 0
                log = r.log
                i = log.batch_index(covered)
                if i is not None:
                    for j in range(i, len(log.bases)):
                        if log.bases[j] >= r.hwm:
                            break
                        if log.bases[j] >= covered:
                            committed.append((log.bases[j], log.counts[j], log.crcs[j]))
                best = r.hwm
        self.true_hwm[key] = best

    def _rebase(self, key: Key, leader) -> None:
        log = leader.log
        self.true_hwm[key] = leader.hwm
        self.committed[key] = [
            (log.bases[i], log.counts[i], log.crcs[i]) for i in range(len(log.bases)) if log.bases[i] + log.counts[i] <= leader.hwm
        ]
        self._leader_checked.pop(key, None)
        for caught_up in self._unclean_start.values():
            caught_up.add(key)  # the log starts over from this leader's: nobody is behind it yet

    def _check_leader(self, key, name, rec, r, true_hwm, min_isr, found) -> None:
        log = r.log
        leader_id = rec.leader
        committed = self.committed.get(key, [])
        acked = self._acked.get(key, [])
        state = self._leader_checked.get(key)
        start_c, start_a = 0, 0
        if state is not None and state[0] == (leader_id, r.leader_epoch) and state[1] == log.version:
            start_c, start_a = state[2], state[3]
        ok_c = start_c
        for base, count, crc in committed[start_c:]:
            if not log.holds(base, count, crc):
                found.setdefault("LeaderCompleteness", f"{name}: leader {leader_id} (epoch {r.leader_epoch}) lacks committed offsets {base}..{base + count - 1} (LEO {log.end_offset}, true HWM {true_hwm})")
                break
            ok_c += 1
        ok_a = start_a
        for b in acked[start_a:]:
            if not log.holds(b.base_offset, b.count, b.crc):
                found.setdefault("LeaderCompleteness", f"{name}: leader {leader_id} (epoch {r.leader_epoch}) lacks acknowledged offsets {b.base_offset}..{b.base_offset + b.count - 1}")
                break
            ok_a += 1
        self._leader_checked[key] = ((leader_id, r.leader_epoch), log.version, ok_c, ok_a)
        if r.hwm >= r.leso and r.hwm < true_hwm:
            found.setdefault("TrueHWMMonotonic", f"{name}: leader {leader_id} trusts HWM {r.hwm} (LESO {r.leso}) below the true HWM {true_hwm}")
        if len(r.isr) >= min_isr:
            election = set(rec.isr) | set(rec.elr)
            if not election <= set(r.quorum):
                found.setdefault("ReplicationQuorumSuperset", f"{name}: leader {leader_id} replicates to {sorted(r.quorum)}, controller's ISR+ELR is {sorted(election)}")

    def _check_strict_min_isr(self, key, name, b, r, min_isr, found) -> None:
        seen_key = (key, b, r.leader_epoch)
        before = self._leader_hwm_seen.get(seen_key)
        if before is not None and r.hwm > before and len(r.isr) < min_isr:
            found.setdefault("StrictMinIsrHWM", f"{name}: leader {b} advanced its HWM {before} -> {r.hwm} with ISR {list(r.isr)} < MinISR {min_isr}")
        self._leader_hwm_seen[seen_key] = r.hwm

    def _check_log_matching(self, key, name, replicas, found) -> None:
        items = sorted(replicas.items())
        for i, (a, ra) in enumerate(items):
            for b, rb in items[i + 1 :]:
                upto = min(ra.hwm, rb.hwm)
                pair = (key, a, b)
                state = self._pairs_checked.get(pair)
                start = 0
                if state is not None and state[0] == ra.log.version and state[1] == rb.log.version:
                    start = state[2]
                if upto <= start:
                    self._pairs_checked[pair] = (ra.log.version, rb.log.version, min(start, upto))
                    continue
                bad = _first_mismatch(ra.log, rb.log, start, upto)
                if bad is not None:
                    found.setdefault("LogMatching", f"{name}: replicas {a} and {b} differ at offset {bad} (below HWMs {ra.hwm}/{rb.hwm})")
                    upto = start
                self._pairs_checked[pair] = (ra.log.version, rb.log.version, upto)

    def _check_candidates(self, key, name, rec, replicas, true_hwm, found) -> None:
        if rec.recovery_state == RECOVERING:
            return  # an unclean election chose this leader knowingly (reported by LeaderCompleteness)
        view = self.view
        registrations = view._registrations
        for b in sorted(set(rec.isr) | set(rec.elr) | ({rec.leader} if rec.leader is not None else set())):
            r = replicas.get(b)
            reg = registrations.get(b)
            running = r is not None and reg is not None and view.broker_epochs.get(b) == reg.epoch
            if not running:
                continue
            leo = r.log.end_offset
            if self._is_unclean(b, key):
                if leo >= true_hwm:
                    self._unclean_start[b].add(key)
                else:
                    where = "leader" if rec.leader == b else ("ISR" if b in rec.isr else "ELR")
                    found.setdefault("UncleanExclusion", f"{name}: broker {b}, back from an unclean shutdown with LEO {leo} < true HWM {true_hwm}, is in the {where}")
            if b != rec.leader and leo < true_hwm:
                found.setdefault("LeaderCandidateCompleteness", f"{name}: {('ISR' if b in rec.isr else 'ELR')} member {b} has LEO {leo} < true HWM {true_hwm}")
        for b, caught_up in self._unclean_start.items():
            r = replicas.get(b)
            if r is not None and r.log.end_offset >= true_hwm:
                caught_up.add(key)

    def _is_unclean(self, broker: int, key: Key) -> bool:
        caught_up = self._unclean_start.get(broker)
        return caught_up is not None and key not in caught_up

    def _track_lossy_candidates(self, key: Key, rec) -> None:
        """A lossy replica counts until it is back in the ISR (caught up). Once MinISR of them are
        counted at once, the partition is beyond what the protocol promises to survive."""
        brokers = self._lossy.get(key)
        if not brokers:
            return
        view = self.view
        for b in list(brokers):
            reg = view._registrations.get(b)
            if b in rec.isr and key in view.replicas.get(b, {}) and reg is not None and view.broker_epochs.get(b) == reg.epoch:
                brokers.discard(b)
        if len(brokers) >= rec.min_isr and key not in self.beyond_tolerance:
            self.beyond_tolerance.add(key)
            self._record(BeyondTolerance(key[0], key[1], tuple(sorted(brokers))))

    def _check_lost(self, key: Key, running: dict, found: dict[str, str]) -> None:
        acked = self._acked.get(key)
        if not acked:
            return
        down = {b: logs[key] for b, logs in self.view.down_logs.items() if key in logs}
        holders = [r.log for r in running.values()] + list(down.values())
        # Logs only grow between truncations (`version`): a batch found once stays found until a
        # holder is truncated, replaced or gone.
        stamp = tuple(sorted((b, r.log.version) for b, r in running.items())) + tuple(sorted((b, log.version) for b, log in down.items()))
        state = self._lost_checked.get(key)
        start = state[1] if state is not None and state[0] == stamp else 0
        for i in range(start, len(acked)):
            b = acked[i]
            if not any(log.holds(b.base_offset, b.count, b.crc) for log in holders) and key not in self.beyond_tolerance:
                found.setdefault("NoCommittedRecordLostGlobally", f"{key[0]}-{key[1]}: acknowledged offsets {b.base_offset}..{b.base_offset + b.count - 1} are on no replica")
                self._lost_checked[key] = (stamp, i)
                return
        self._lost_checked[key] = (stamp, len(acked))

    def _check_reads(self, key: Key, leader_log: LogMirror | None, found: dict[str, str]) -> None:
        if leader_log is None:
            return
        for consumer in self._readers.get(key, ()):
            reads = self._reads[(consumer, key)]
            if not reads:
                continue
            state = self._reads_checked.get((consumer, key))
            start = state[2] if state is not None and state[0] is leader_log and state[1] == leader_log.version else 0
            if start >= len(reads):
                continue
            for offset, base, crc in reads[start:]:
                i = leader_log.batch_index(offset)
                if i is None or leader_log.bases[i] != base or leader_log.crcs[i] != crc:
                    holds = "nothing" if i is None else "another record"
                    found.setdefault("ConsistentRead", f"{key[0]}-{key[1]}: {consumer} read offset {offset}; the leader now holds {holds} there")
                    break
            else:
                self._reads_checked[(consumer, key)] = (leader_log, leader_log.version, len(reads))


def _first_mismatch(a: LogMirror, b: LogMirror, start: int, end: int) -> int | None:
    """The first offset in [start, end) where the two logs hold different records, else None."""
    offset = start
    while offset < end:
        ia, ib = a.batch_index(offset), b.batch_index(offset)
        if ia is None or ib is None or (a.bases[ia], a.crcs[ia], a.epochs[ia]) != (b.bases[ib], b.crcs[ib], b.epochs[ib]):
            return offset
        offset = a.bases[ia] + a.counts[ia]
    return None
