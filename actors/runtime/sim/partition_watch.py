"""The partition replication invariants of reference/protocol-facts.md, checked over the whole
simulated cluster after every event (the ones that need every node at once).

| name                          | how it is observed here                                              |
|-------------------------------|----------------------------------------------------------------------|
| LeaderCompleteness            | the current leader holds every committed batch and every acks=all one |
| LogMatching                   | running replicas agree below the smaller of their local HWMs          |
| LeaderCandidateCompleteness   | running ISR and ELR members (registered with their current epoch) have LEO >= true HWM |
| ReplicationQuorumSuperset     | leader's replication quorum contains ISR + ELR while its ISR >= MinISR |
| NoCommittedRecordLostGlobally | every acks=all batch is on some replica (running, or on a down broker's disk) |
| UncleanExclusion              | a broker back from an unclean start is not leader/ISR/ELR before reaching the true HWM |
| StrictMinIsrHWM               | a leader's HWM never moves while its committed ISR < effective MinISR |
| TrueHWMMonotonic              | a leader that trusts its HWM (HWM >= LESO) never reports one below the true HWM |
| AppliedHWM                    | ListOffsets answers and ISR expansions respect LESO and the local HWM (from the leader's events) |
| ConsistentRead                | what a consumer read is still what the current leader holds there     |

The *true HWM* is the largest HWM any leader ever had (§6.4); the *committed log* is the batches
below it, as the leader that advanced it held them. Checks are incremental: logs only grow between
truncations (`PartitionLog.version`), so a prefix verified once is re-read only after a truncation,
a leader change or a crash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.contract import Output
from controller_quorum.metadata import RECOVERING
from kraftlab.scenario.schema import split_partition_ref
from storage.partition_log import PartitionLog, partition_dirs

if TYPE_CHECKING:
    from .cluster import SimCluster

Key = tuple[str, int]


class PartitionInvariants:
    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.true_hwm: dict[Key, int] = {}
        # Per partition: (base offset, count, crc) of every committed batch, in order.
        self.committed: dict[Key, list[tuple[int, int, int]]] = {}
        self._leader_checked: dict[Key, tuple[Any, int, int]] = {}  # (leader id, version, n committed ok, n acked ok)
        self._pairs_checked: dict[tuple[Key, int, int], tuple[int, int, int]] = {}
        self._leader_hwm_seen: dict[tuple[Key, int, int], int] = {}
        # Brokers back from an unclean start (registered without a previous epoch after their first
        # start), each with the partitions it has caught up on since. Judged from the broker's own
        # event, not from the replicas it holds at that moment: a replica whose files did not
        # survive is created later, from the metadata, and is just as far behind.
        self._unclean_start: dict[int, set[Key]] = {}
        self._registered_epoch: dict[int, Any] = {}
        self._lost_checked: tuple[Any, int] | None = None
        self._down_logs: dict[tuple[int, int], dict[Key, PartitionLog]] = {}
        self._reads_checked: dict[tuple[str, Key], tuple[Any, int, int]] = {}
        self._event_findings: dict[str, str] = {}
        self._acked_all: list = []
        self._acked_by_key: dict[Key, list] = {}
        self._acked_seen: dict[str, int] = {}
        self._lossy: dict[Key, set[int]] = {}
        # Partitions that suffered at least MinISR lossy unclean shutdowns of leader candidates:
        # NoCommittedRecordLostGlobally may fail there (protocol-facts.md).
        self.beyond_tolerance: set[Key] = set()
        self._stamp: tuple | None = None
        self._latest: dict[Key, Any] = {}
        # Per partition: the leader epoch of its newest unclean election (from the controller's
        # `partition_election` events), and the epoch the checks were last rebased for. On Ray a
        # poll can miss the RECOVERING state altogether (the leader ends it within milliseconds),
        # so the election itself, not the state, tells that the log starts over.
        self._unclean_epoch: dict[Key, int] = {}
        self._rebased_epoch: dict[Key, int] = {}
        self._legit_logs: dict[Key, PartitionLog | None] = {}
        self._min_isr_cache: dict[Key, tuple] = {}
        self._broker_nodes = [(int(n[1:]), node) for n, node in sorted(cluster.sim.nodes.items()) if n.startswith("b")]
        cluster.sim.trace.sinks.append(self._on_event)

    # --- events the leaders emit ----------------------------------------------------------------

    def _on_event(self, record) -> None:
        _, node, kind, f = record
        if kind == "list_offsets" and f["answer"] is not None and f["hwm"] < f["leso"]:
            self._event_findings.setdefault("AppliedHWM", f"{node} answered ListOffsets {f['answer']} for {f['partition']} with HWM {f['hwm']} < LESO {f['leso']}")
        elif kind == "isr_expand_proposed":
            if f["follower_leo"] < max(f["hwm"], f["leso"]) or f["fetch_epoch"] != f["leader_epoch"]:
                self._event_findings.setdefault(
                    "AppliedHWM",
                    f"{node} proposed adding {f['follower']} to the ISR of {f['partition']} at LEO {f['follower_leo']} (HWM {f['hwm']}, LESO {f['leso']}, fetch epoch {f['fetch_epoch']}/{f['leader_epoch']})",
                )
        elif kind == "partition_election" and f["how"] == "unclean":
            key = split_partition_ref(f["partition"])
            self._unclean_epoch[key] = max(self._unclean_epoch.get(key, -1), f["leader_epoch"])
        elif kind == "crash" and node.startswith("b"):
            self._on_crash(node, f["mode"])
        elif kind == "broker_registered" and node.startswith("b"):
            if not f["clean"] and self.cluster.sim.nodes[node].starts > 1:
                self._unclean_start[int(node[1:])] = set()

    # --- the check --------------------------------------------------------------------------------

    def _collect_acked(self) -> list:
        """Every acks=all batch acknowledged so far, in order (kept incrementally: producers only
        append to their lists)."""
        clients = self.cluster.clients
        for name in clients.producers:
            role = clients.role(name)
            if role is None:
                continue
            seen = self._acked_seen.get(name, 0)
            new = role.acked_batches[seen:]
            if new:
                self._acked_seen[name] = seen + len(new)
                for b in new:
                    if b.acks == -1:
                        self._acked_all.append(b)
                        self._acked_by_key.setdefault((b.topic, b.partition), []).append(b)
        return self._acked_all

    def _on_crash(self, node: str, mode: str) -> None:
        """A lossy unclean shutdown of a leader candidate: an OS crash (or a process crash when the
        process holds the unflushed data) that drops unflushed bytes of a replica's log while the
        replica is in the controller's ISR or ELR (replication-correctness.md §6.2)."""
        sim_node = self.cluster.sim.nodes[node]
        mode_drops = mode in ("os", "disk") or (mode == "process" and not sim_node.host.disk.mode.unflushed_survives_process_crash)
        role = sim_node.role
        img = self.cluster.view().image()
        if not mode_drops or role is None or img is None:
            return
        broker = int(node[1:])
        disk = sim_node.host.disk
        for key, r in role.data_plane.replicas.items():
            rec = img.partitions.get(key)
            if rec is None or broker not in set(rec.isr) | set(rec.elr):
                continue
            if mode == "disk" or any(disk.is_dirty(node, path) for path in r.log.segment_paths()):
                self._lossy.setdefault(key, set()).add(broker)

    def _track_lossy_candidates(self, img, roles) -> None:
        """A lossy replica counts until it is back in the ISR (caught up). Once MinISR of them are
        counted at once, the partition is beyond what the protocol promises to survive."""
        for key, brokers in list(self._lossy.items()):
            rec = img.partitions.get(key)
            if rec is None:
                continue
            for b in list(brokers):
                role = roles.get(b)
                reg = img.brokers.get(b)
                if b in rec.isr and role is not None and reg is not None and role.epoch == reg.epoch:
                    brokers.discard(b)
            if len(brokers) >= self._min_isr(img, key, len(rec.replicas)) and key not in self.beyond_tolerance:
                self.beyond_tolerance.add(key)
                self.cluster.sim.record("runner", "beyond_tolerance", partition=f"{key[0]}-{key[1]}", lossy=sorted(brokers))

    def _unchanged(self, img) -> bool:
        """True when the last event cannot have changed what these checks read: a controller's
        event that left the committed image as it was, or a client event that changed no count."""
        node = self.cluster.sim.event_node
        if node is None or node.startswith("b"):
            return False
        clients = self.cluster.clients
        stamp = (id(img), img.offset, sum(len(r.acked_batches) for n in clients.producers if (r := clients.role(n)) is not None),
                 sum(r.consumed for n in clients.consumers if (r := clients.role(n)) is not None))
        if stamp == self._stamp:
            return True
        self._stamp = stamp
        return False

    def _min_isr(self, img, key, rf: int) -> int:
        cached = self._min_isr_cache.get(key)
        if cached is not None and cached[0] is img and cached[1] == img.offset:
            return cached[2]
        value = self.cluster.any_controller().policy(key[0], img, rf).min_isr
        self._min_isr_cache[key] = (img, img.offset, value)
        return value

    def check(self) -> dict[str, str]:
        found: dict[str, str] = {}
        if self._event_findings:
            found.update(self._event_findings)
            self._event_findings = {}
        cluster = self.cluster
        img = cluster.view().image()
        if img is None or cluster.clients is None or self._unchanged(img):
            return found
        acked = self._collect_acked()
        roles = {b: n.role for b, n in self._broker_nodes}
        self._track_lossy_candidates(img, roles)
        for key, rec in img.partitions.items():
            # The most advanced running voter's image can be behind what was already committed
            # (that voter crashed): the checks use the newest committed state of each partition.
            latest = self._latest.get(key)
            if latest is not None and latest.partition_epoch > rec.partition_epoch:
                rec = latest
            else:
                self._latest[key] = rec
            name = f"{key[0]}-{key[1]}"
            replicas = {b: r for b in rec.replicas if (role := roles.get(b)) is not None and (r := role.data_plane.replicas.get(key)) is not None}
            leaders = [(b, r) for b, r in replicas.items() if r.is_leader]
            self._advance_true_hwm(key, leaders)
            true_hwm = self.true_hwm.get(key, 0)
            legit = cluster.acting_leader(rec)
            min_isr = self._min_isr(img, key, len(rec.replicas))
            self._legit_logs[key] = legit.log if legit is not None else None
            if legit is not None:
                self._check_leader(key, name, rec.leader, legit, self._acked_by_key.get(key, []), true_hwm, min_isr, rec, found)
                unclean_epoch = self._unclean_epoch.get(key)
                newly_unclean = unclean_epoch == legit.leader_epoch and self._rebased_epoch.get(key) != unclean_epoch
                if rec.leader_recovery_state == RECOVERING or newly_unclean:
                    # An unclean election (its loss, if any, was just reported): from now on the
                    # partition's log is this leader's, and the checks go on from there.
                    self._rebase(key, legit)
                    self._rebased_epoch[key] = legit.leader_epoch
                    true_hwm = self.true_hwm[key]
            for b, r in leaders:
                self._check_strict_min_isr(key, name, b, r, min_isr, found)
            self._check_log_matching(key, name, replicas, found)
            self._check_candidates(key, name, rec, img, replicas, roles, true_hwm, found)
        self._check_lost(img, acked, found)
        self._check_reads(found)
        return found

    def _advance_true_hwm(self, key: Key, leaders) -> None:
        best = self.true_hwm.get(key, 0)
        for _, r in leaders:
            if r.hwm > best:
                committed = self.committed.setdefault(key, [])
                covered = committed[-1][0] + committed[-1][1] if committed else 0
                for b in r.log.read_from(covered, 1 << 30):
                    if b.base_offset >= r.hwm:
                        break
                    if b.base_offset >= covered:
                        committed.append((b.base_offset, b.count, b.crc))
                best = r.hwm
        self.true_hwm[key] = best

    def _rebase(self, key: Key, leader) -> None:
        self.true_hwm[key] = leader.hwm
        self.committed[key] = [(b.base_offset, b.count, b.crc) for b in leader.log.batches if b.next_offset <= leader.hwm]
        self._leader_checked.pop(key, None)
        for caught_up in self._unclean_start.values():
            caught_up.add(key)  # the log starts over from this leader's: nobody is behind it yet

    def _check_leader(self, key, name, leader_id, r, acked, true_hwm, min_isr, rec, found) -> None:
        log = r.log
        committed = self.committed.get(key, [])
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
            quorum = r.replication_quorum()
            election = set(rec.isr) | set(rec.elr)
            if not election <= quorum:
                found.setdefault("ReplicationQuorumSuperset", f"{name}: leader {leader_id} replicates to {sorted(quorum)}, controller's ISR+ELR is {sorted(election)}")

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

    def _check_candidates(self, key, name, rec, img, replicas, roles, true_hwm, found) -> None:
        if rec.leader_recovery_state == RECOVERING:
            return  # an unclean election chose this leader knowingly (reported by LeaderCompleteness)
        for b in sorted(set(rec.isr) | set(rec.elr) | ({rec.leader} if rec.leader is not None else set())):
            r = replicas.get(b)
            role = roles.get(b)
            reg = img.brokers.get(b)
            running = role is not None and r is not None and reg is not None and role.epoch == reg.epoch
            if not running:
                continue
            if self._is_unclean(b, key):
                if r.leo >= true_hwm:
                    self._unclean_start[b].add(key)
                else:
                    where = "leader" if rec.leader == b else ("ISR" if b in rec.isr else "ELR")
                    found.setdefault("UncleanExclusion", f"{name}: broker {b}, back from an unclean shutdown with LEO {r.leo} < true HWM {true_hwm}, is in the {where}")
            if b != rec.leader and r.leo < true_hwm:
                found.setdefault("LeaderCandidateCompleteness", f"{name}: {('ISR' if b in rec.isr else 'ELR')} member {b} has LEO {r.leo} < true HWM {true_hwm}")
        for b, caught_up in self._unclean_start.items():
            r = replicas.get(b)
            if r is not None and r.leo >= true_hwm:
                caught_up.add(key)

    def _is_unclean(self, broker: int, key: Key) -> bool:
        caught_up = self._unclean_start.get(broker)
        return caught_up is not None and key not in caught_up

    def _check_lost(self, img, acked, found) -> None:
        versions = tuple(
            (node.incarnation, len(node.role.data_plane.replicas), sum(r.log.version for r in node.role.data_plane.replicas.values())) if node.role else (node.incarnation,)
            for _, node in self._broker_nodes
        )
        start = 0
        if self._lost_checked is not None and self._lost_checked[0] == versions:
            start = self._lost_checked[1]
        if start >= len(acked):
            self._lost_checked = (versions, len(acked))
            return
        logs = self._all_logs()
        for i in range(start, len(acked)):
            b = acked[i]
            holders = logs.get((b.topic, b.partition), [])
            if not any(log.holds(b.base_offset, b.count, b.crc) for log in holders) and (b.topic, b.partition) not in self.beyond_tolerance:
                found.setdefault("NoCommittedRecordLostGlobally", f"{b.topic}-{b.partition}: acknowledged offsets {b.base_offset}..{b.base_offset + b.count - 1} are on no replica")
                self._lost_checked = (versions, i)
                return
        self._lost_checked = (versions, len(acked))

    def _all_logs(self) -> dict[Key, list[PartitionLog]]:
        """Every replica's log: running brokers' in memory, down brokers' as their disk holds it."""
        out: dict[Key, list[PartitionLog]] = {}
        sim = self.cluster.sim
        for name, node in sorted(sim.nodes.items()):
            if not name.startswith("b"):
                continue
            if node.role is not None:
                for key, r in node.role.data_plane.replicas.items():
                    out.setdefault(key, []).append(r.log)
                continue
            cache_key = (int(name[1:]), node.incarnation)
            logs = self._down_logs.get(cache_key)
            if logs is None:
                files = node.host.disk.files_of(name)
                scratch = Output()
                logs = {(t, p): PartitionLog.recover(d, files, scratch) for t, p, d in partition_dirs(files)}
                self._down_logs = {k: v for k, v in self._down_logs.items() if k[0] != cache_key[0]}
                self._down_logs[cache_key] = logs
            for key, log in logs.items():
                out.setdefault(key, []).append(log)
        return out

    def _check_reads(self, found) -> None:
        clients = self.cluster.clients
        for cname in clients.consumers:
            role = clients.role(cname)
            if role is None:
                continue
            for key, order in role.read_order.items():
                leader_log = self._legit_logs.get(key)
                if leader_log is None or not order:
                    continue
                state = self._reads_checked.get((cname, key))
                start = 0
                if state is not None and state[0] is leader_log and state[1] == leader_log.version:
                    start = state[2]
                if start >= len(order):
                    continue
                reads = role.reads[key]
                for o in order[start:]:
                    value, ident = reads[o]
                    now = leader_log.identity_at(o)
                    if now is None or now != ident:
                        found.setdefault("ConsistentRead", f"{key[0]}-{key[1]}: {cname} read offset {o} ({value[:40]!r}); the leader now holds {'nothing' if now is None else 'another record'} there")
                        break
                else:
                    self._reads_checked[(cname, key)] = (leader_log, leader_log.version, len(order))


def _first_mismatch(a: PartitionLog, b: PartitionLog, start: int, end: int) -> int | None:
    """The first offset in [start, end) where the two logs hold different records, else None."""
    offset = start
    while offset < end:
        ia, ib = a.identity_at(offset), b.identity_at(offset)
        if ia is None or ib is None or ia != ib:
            return offset
        batch = a.batches[a.batch_index(offset)]
        offset = batch.next_offset
    return None
