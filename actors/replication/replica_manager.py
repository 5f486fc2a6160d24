"""A broker's data plane: its partition replicas, the fetchers that replicate from leaders, and the
requests clients and peers send it (Kafka's ReplicaManager and ReplicaFetcherManager).

- Replicas follow the committed metadata (`apply_partition`): leader when the record names this
  broker, follower otherwise, stopped and deleted when reassignment removed it.
- One fetcher per leader broker carries every partition this broker follows there, with at most
  one fetch in flight (Kafka's fetcher threads); its next fetch leaves as soon as the answer is
  applied, after a flush when writes must be durable before they are confirmed (fsync storage).
  Fetches run in incremental fetch sessions (KIP-227, fetch_session.py): requests and answers
  carry the partitions that changed, and the leader processes only those (replica_fetcher.py).
- The leader long-polls follower fetches (`replica.fetch.wait.max.ms`): a fetch with nothing to
  return waits until a produce appends to one of its partitions, leadership moves, or the wait ends
  (leader_fetches.py).
- Log directories (KIP-858): a failed directory's replicas go offline (`fail_dir`, Kafka's
  ReplicaManager.handleLogDirFailure and markPartitionOffline): no longer led, followed or read,
  answered KAFKA_STORAGE_ERROR, their metadata ignored, until the broker restarts; their files
  stay. A replica's directory is the one its committed partition record names (kraftlab keeps
  replica files under `partitions/` whatever their directory: a logical number, not a
  subdirectory, since no file moves when a directory fails or comes back).
- Timers: the ISR shrink check (every replica.lag.time.max.ms / 2, as Kafka), the HWM checkpoint
  (every replica.high.watermark.checkpoint.interval.ms, 5 s), log.flush.interval.ms flushes,
  produce and AlterPartition timeouts, fetch back-off and request timeouts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.contract import Delete, Envelope, Flush, FlushCompleted, Output, Replace
from actors.deadline_index import DeadlineIndex
from controller_quorum.metadata import DEFAULT_DIR, PartitionRecord
from controller_quorum.requests import AlterPartitionResponse, GetReplicaLogInfoRequest, GetReplicaLogInfoResponse
from observability.events import ReplicaDeleted, ReplicaOffline, ReplicaRecovered
from storage.codec import pack, unpack
from storage.partition_log import (
    PartitionLog,
    partition_dir_files,
    partition_metadata,
    partition_metadata_path,
    read_partition_metadata,
    replica_dir,
)

from .fetch_session import LeaderSession
from .follower_fetches import MAX_FETCH_BATCHES
from .leader_fetches import LeaderFetches, ParkedFetch
from .messages import (
    CONSUMER,
    FINAL_READER,
    EpochEndOffsetRequest,
    EpochEndOffsetResponse,
    KAFKA_STORAGE_ERROR,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
    FetchedPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProduceRequest,
    ProduceResponse,
)
from .purgatory import Purgatory
from .replica import PartitionReplica
from .replica_fetcher import Fetcher, ReplicaFetching

if TYPE_CHECKING:
    from .replica import ReplicaEnv

HWM_CHECKPOINT_FILE = "replication-offset-checkpoint"
HWM_CHECKPOINT_INTERVAL_MS = 5_000  # replica.high.watermark.checkpoint.interval.ms

Key = tuple[str, int]


class ReplicaManager(ReplicaFetching, LeaderFetches):
    def __init__(self, env: ReplicaEnv) -> None:
        self.env = env
        self.replicas: dict[Key, PartitionReplica] = {}
        # The replicas that may have a deadline (a superset: one without is dropped at a tick or when
        # its heap entry comes up), and those leading: a wake-up costs what is pending, not the
        # number of partitions.
        self.timed: dict[Key, PartitionReplica] = {}
        # Every timed replica's next deadline (a replica found to have none leaves `timed`).
        self.deadlines: DeadlineIndex[Key] = DeadlineIndex(self._replica_deadline, on_idle=lambda key: self.timed.pop(key, None))
        self.leading: set[Key] = set()
        self.fetchers: dict[int, Fetcher] = {}
        self.sessions: dict[int, LeaderSession] = {}  # by follower broker: its fetch session here
        self.next_session_id = 0
        self.parked: Purgatory[ParkedFetch] = Purgatory()  # follower fetches long-polling (leader_fetches.py)
        self.next_request_id = 0
        self.checkpointed: dict[str, int] = {}
        self.next_checkpoint_ms = 0.0
        self.next_shrink_check_ms = 0.0
        self.next_flush_ms: float | None = None
        # ((id, offset) of the image, the image (kept so that its id stays its own), partitions, brokers)
        self._metadata_answer: tuple | None = None
        # KIP-858: the failed log directories, and the replicas in them (Kafka's
        # HostedPartition.Offline), kept apart from `replicas` (None: one that could not be
        # created, its directory being offline already).
        self.offline_dirs: set[int] = set()
        self.offline: dict[Key, PartitionReplica | None] = {}
        # Set once the broker asks to shut down (Kafka's ReplicaManager.beginControlledShutdown,
        # before the first heartbeat that asks); never cleared: the broker stops next.
        self.in_controlled_shutdown = False

    # --- start-up ------------------------------------------------------------------------------

    def recover(self, files: dict[str, bytes], now_ms: float, out: Output) -> None:
        """Load every replica's log as it survived (a torn tail is cut off) and the HWMs of the
        last checkpoint."""
        hwms = unpack(files[HWM_CHECKPOINT_FILE]) if files.get(HWM_CHECKPOINT_FILE) else {}
        for topic, partition, directory, dir_files in partition_dir_files(files):
            log = PartitionLog.recover(directory, dir_files, out, self._segment_bytes(topic))
            replica = self._add_replica((topic, partition), PartitionReplica(self.env, topic, partition, log, hwms.get(f"{topic}-{partition}", 0)))
            replica.topic_id = read_partition_metadata(dir_files.get(partition_metadata_path(directory)))
            batches = log.batches
            out.emit(ReplicaRecovered(
                topic, partition, log.end_offset, replica.hwm, log.last_epoch, tuple(b.base_offset for b in batches),
                tuple(b.count for b in batches), tuple(b.leader_epoch for b in batches), tuple(b.crc for b in batches),
                replica.topic_id,
            ))
        self.checkpointed = {r.name: r.hwm for r in self.replicas.values()}
        cfg = self.env.settings.config
        self.next_checkpoint_ms = now_ms + HWM_CHECKPOINT_INTERVAL_MS
        self.next_shrink_check_ms = now_ms + cfg.replica_lag_time_max_ms / 2
        if cfg.log_flush_interval_ms is not None:
            self.next_flush_ms = now_ms + cfg.log_flush_interval_ms

    def _add_replica(self, key: Key, replica: PartitionReplica) -> PartitionReplica:
        self.replicas[key] = replica
        return replica

    def _settle(self, key: Key, replica: PartitionReplica) -> None:
        """Act on what a call into the replica changed (the flags it sets, replica.py), once the
        call has returned: every call that may change a replica is followed by this.
        - its answer to a follower's fetch may have changed (its log end, HWM, role or partition
          state): every session holding the partition processes it at its next fetch;
        - it may have gained an earlier deadline: the deadline index learns it."""
        if replica.answer_changed:
            replica.answer_changed = False
            for session in self.sessions.values():
                if key in session.positions:
                    session.dirty[key] = None
        if replica.deadline_moved:
            replica.deadline_moved = False
            self.timed[key] = replica
            self.deadlines.schedule(key)

    def _replica_deadline(self, key: Key) -> float | None:
        r = self.timed.get(key)
        return r.next_deadline() if r is not None else None

    # --- following the metadata ------------------------------------------------------------------

    def apply_partition(self, rec: PartitionRecord, now_ms: float, out: Output) -> None:
        me = self.env.broker_id
        key = (rec.topic, rec.partition)
        in_failed_dir = me in rec.replicas and rec.dir_of(me) in self.offline_dirs
        if in_failed_dir and key in self.replicas:
            # Recovered at start-up, its directory known only now from the metadata.
            self._take_offline(key, self.replicas[key], rec.dir_of(me), now_ms, out)
        if key in self.offline or in_failed_dir:
            self._apply_to_offline(key, rec, out)
            return
        replica = self.replicas.get(key)
        topic_id = self.env.image.topics.get(rec.topic)
        if replica is not None and (me not in rec.replicas or replica.topic_id not in (None, topic_id)):
            # Not a replica any more, or the log of a topic of the same name that was deleted while
            # this broker was away (Kafka's stray log: its partition.metadata names another topic id).
            self._remove_replica(key, replica, out)
            replica = None
        if me not in rec.replicas:
            return
        if replica is None:
            replica = self._add_replica(key, PartitionReplica(self.env, rec.topic, rec.partition, PartitionLog(replica_dir(*key)), 0))
        if replica.topic_id is None and topic_id is not None:
            replica.topic_id = topic_id
            out.write(Replace(partition_metadata_path(replica.log.directory), partition_metadata(topic_id)))
        replica.log.segment_bytes = self._segment_bytes(rec.topic)
        if rec.leader_epoch < replica.leader_epoch:
            return  # never act on older metadata
        if rec.leader == me:
            if replica.is_leader and replica.leader_epoch == rec.leader_epoch:
                replica.on_partition_change(rec, now_ms, out)
                self._settle(key, replica)
            else:
                self._unfollow(key)
                replica.become_leader(rec, now_ms, out)
                self._settle(key, replica)
                self._complete_parked(key, now_ms, out)
        elif replica.role == "follower" and replica.leader_epoch == rec.leader_epoch:
            replica.on_partition_change(rec, now_ms, out)
            self._settle(key, replica)
            if self._stops_fetching(rec):
                self._unfollow(key)
        else:
            was_leader = replica.is_leader
            self._unfollow(key)
            replica.become_follower(rec, now_ms, out)
            self._settle(key, replica)
            if was_leader:
                self._complete_parked(key, now_ms, out)
            if rec.leader is not None and not self._stops_fetching(rec):
                self._follow(key, rec.leader, now_ms, out)
        if replica.is_leader:
            self.leading.add(key)
        else:
            self.leading.discard(key)

    def begin_controlled_shutdown(self) -> None:
        self.in_controlled_shutdown = True

    def _stops_fetching(self, rec: PartitionRecord) -> bool:
        """Kafka's ReplicaManager.applyLocalFollowersDelta: once this broker has begun its
        controlled shutdown, a partition whose change leaves it with no leader, or with an ISR
        that no longer holds this broker, is not fetched any more: the controller has moved it
        out, and its log end stays where it was until the broker stops (ReplicaManagerTest.
        testReplicasAreStoppedWhileInControlledShutdown). A partition not changed since is
        fetched on, as in Kafka."""
        return self.in_controlled_shutdown and (rec.leader is None or self.env.broker_id not in rec.isr)

    def _segment_bytes(self, topic: str) -> int:
        """The topic's segment.bytes, else the cluster's (dynamic, then static) log.segment.bytes.
        Read when the partition's metadata changes: a new size applies from the next roll."""
        image = self.env.image
        default = image.cluster_config.get("log.segment.bytes", self.env.settings.config.log_segment_bytes)
        return image.topic_configs.get(topic, {}).get("segment.bytes", default)

    def remove_partition(self, key: Key, out: Output) -> None:
        """The partition is gone from the metadata (its topic was deleted): delete its replica."""
        if key in self.offline:
            del self.offline[key]  # its files cannot be deleted now: a stray log at the next start
            return
        replica = self.replicas.get(key)
        if replica is not None:
            self._remove_replica(key, replica, out)

    def _remove_replica(self, key: Key, replica: PartitionReplica, out: Output) -> None:
        self._unfollow(key)
        replica.stop(out)
        self._settle(key, replica)
        del self.replicas[key]
        self.timed.pop(key, None)
        self.leading.discard(key)
        for path in replica.log.segment_paths():
            out.write(Delete(path))
        out.write(Delete(replica.log.epoch_path))
        out.write(Delete(partition_metadata_path(replica.log.directory)))
        out.emit(ReplicaDeleted(replica.topic, replica.partition, replica.topic_id))

    # --- failed log directories (KIP-858) -----------------------------------------------------------

    def fail_dir(self, log_dir: int, now_ms: float, out: Output) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: every replica in the directory goes offline
        (markPartitionOffline): its fetcher is removed, requests waiting on it fail, and it is
        served no more until the broker restarts."""
        self.offline_dirs.add(log_dir)
        for key in sorted(k for k in self.replicas if self._dir_of(k) == log_dir):
            self._take_offline(key, self.replicas[key], log_dir, now_ms, out)

    def _dir_of(self, key: Key) -> int:
        """A replica's log directory: the one its committed partition record names (one recovered
        from disk that the metadata does not hold, a stray log, is in DEFAULT_DIR)."""
        rec = self.env.image.partitions.get(key)
        return rec.dir_of(self.env.broker_id) if rec is not None else DEFAULT_DIR

    def _take_offline(self, key: Key, replica: PartitionReplica, log_dir: int, now_ms: float, out: Output) -> None:
        self._unfollow(key)
        replica.stop(out, KAFKA_STORAGE_ERROR)
        self._settle(key, replica)
        del self.replicas[key]
        self.timed.pop(key, None)
        self.leading.discard(key)
        self.offline[key] = replica
        self._complete_parked(key, now_ms, out)  # followers waiting on it get their answer now
        out.emit(ReplicaOffline(replica.topic, replica.partition, log_dir, replica.topic_id))

    def _apply_to_offline(self, key: Key, rec: PartitionRecord, out: Output) -> None:
        """Metadata for a replica in a failed directory: ignored (Kafka's applyDelta skips an
        offline partition: "it resides in an offline log directory"), unless the broker is no
        replica of it any more, when it is forgotten (its files stay: a stray log at the next
        start). A new replica placed in a failed directory cannot be created: offline at once
        (LogManager.createLog's KafkaStorageException)."""
        me = self.env.broker_id
        if key in self.offline:
            replica = self.offline[key]
            stale = replica is not None and replica.topic_id not in (None, self.env.image.topics.get(rec.topic))
            if me not in rec.replicas or stale:
                del self.offline[key]
            return
        self.offline[key] = None
        out.emit(ReplicaOffline(rec.topic, rec.partition, rec.dir_of(me), self.env.image.topics.get(rec.topic)))

    def _missing_replica_error(self, key: Key) -> str:
        """The error for a request about a partition this broker does not serve."""
        return KAFKA_STORAGE_ERROR if key in self.offline else NOT_LEADER_OR_FOLLOWER

    # --- requests from followers, clients and the controller -----------------------------------

    def on_fetch_request(self, src: str, req: FetchRequest, now_ms: float, out: Output) -> None:
        if req.replica_id in (CONSUMER, FINAL_READER):
            out.send(Envelope(self.env.node_id, src, self._consumer_fetch(req, final=req.replica_id == FINAL_READER)))
            return
        # Followers always fetch in a session (consumers, above, never do).
        self._on_session_fetch(src, req, now_ms, out)

    def _consumer_fetch(self, req: FetchRequest, *, final: bool = False) -> FetchResponse:
        """A consumer reads from the leader; the final read from any replica (below its HWM)."""
        parts = []
        for fp in req.partitions:
            replica = self.replicas.get((fp.topic, fp.partition))
            if replica is None or not (replica.is_leader or final):
                error = self._missing_replica_error((fp.topic, fp.partition)) if replica is None else NOT_LEADER_OR_FOLLOWER
                parts.append(FetchedPartition(fp.topic, fp.partition, error))
                continue
            if not final and fp.current_leader_epoch >= 0 and (error := replica.check_leader_epoch(fp.current_leader_epoch)) is not None:
                # KIP-320: a consumer that names the leader epoch it knows is told when that is
                # not this leader's (Kafka's Partition.fetchRecords): fenced, it refreshes its
                # metadata and validates its position; unknown, it waits for this broker to catch up.
                parts.append(FetchedPartition(fp.topic, fp.partition, error, topic_id=replica.topic_id))
                continue
            if not final and fp.last_fetched_epoch >= 0 and self.env.settings.protocol.leader_epoch_truncation:
                # KIP-320: the consumer's position is validated against this leader's epochs (Kafka's
                # consumer asks OffsetsForLeaderEpoch for the epoch of the last record it read when
                # the leader changes; here the fetch carries that epoch, as a follower's does). An
                # epoch ending before the position, or none up to it, means the log it read was
                # truncated: the answer says where (the consumer moves back there).
                epoch, end = replica.log.end_offset_for_epoch(fp.last_fetched_epoch)
                if epoch < 0 or end < fp.fetch_offset:
                    parts.append(FetchedPartition(fp.topic, fp.partition, None, replica.hwm, replica.log.end_offset, diverging_epoch=(epoch, end),
                                                 topic_id=replica.topic_id))
                    continue
            # Consumers read committed records only: whole batches below the leader's HWM.
            batches = replica.log.read_range(fp.fetch_offset, replica.hwm, MAX_FETCH_BATCHES)
            parts.append(FetchedPartition(fp.topic, fp.partition, None, replica.hwm, replica.log.end_offset, batches=batches, topic_id=replica.topic_id))
        return FetchResponse(req.request_id, tuple(parts))

    def on_produce(self, src: str, req: ProduceRequest, now_ms: float, out: Output) -> None:
        key = (req.topic, req.partition)
        replica = self.replicas.get(key)
        if replica is None:
            if req.acks != 0:
                out.send(Envelope(self.env.node_id, src, ProduceResponse(req.request_id, req.topic, req.partition, self._missing_replica_error(key))))
            return
        before = replica.log.end_offset
        replica.on_produce(src, req, now_ms, out)
        self._settle(key, replica)
        if replica.log.end_offset > before:
            self._complete_parked(key, now_ms, out)

    def on_list_offsets(self, src: str, req: ListOffsetsRequest, out: Output) -> None:
        replica = self.replicas.get((req.topic, req.partition))
        if replica is None:
            resp = ListOffsetsResponse(req.request_id, req.topic, req.partition, self._missing_replica_error((req.topic, req.partition)))
        else:
            resp = replica.list_offsets_latest(req.request_id, out)
        out.send(Envelope(self.env.node_id, src, resp))

    def on_epoch_end_offset(self, src: str, req: EpochEndOffsetRequest, out: Output) -> None:
        """Kafka's OffsetForLeaderEpoch for a consumer, answered by the leader (KIP-320; the
        protocol description §6.6): the largest epoch up to the one asked for and where it ends."""
        key = (req.topic, req.partition)
        replica = self.replicas.get(key)
        if replica is None:
            resp = EpochEndOffsetResponse(req.request_id, req.topic, req.partition, self._missing_replica_error(key))
        elif (error := replica.check_leader_epoch(req.current_leader_epoch) if req.current_leader_epoch >= 0
              else None if replica.is_leader else NOT_LEADER_OR_FOLLOWER) is not None:
            resp = EpochEndOffsetResponse(req.request_id, req.topic, req.partition, error)
        else:
            epoch, end = replica.log.end_offset_for_epoch(req.leader_epoch)
            resp = EpochEndOffsetResponse(req.request_id, req.topic, req.partition, None, epoch, end)
        out.send(Envelope(self.env.node_id, src, resp))

    def on_metadata_request(self, src: str, req: MetadataRequest, out: Output) -> None:
        img = self.env.image
        # The answer is a function of the image; an image changes only by applying records (its
        # offset moves), so it is built once per image state (clients ask often in a failover).
        stamp = (id(img), img.offset)
        if self._metadata_answer is None or self._metadata_answer[0] != stamp:
            parts = tuple(PartitionMetadata(t, p, rec.leader, rec.leader_epoch, img.topics.get(t)) for (t, p), rec in sorted(img.partitions.items()))
            brokers = tuple(sorted(b for b, reg in img.brokers.items() if not reg.fenced))
            self._metadata_answer = (stamp, img, parts, brokers)
        _, _, parts, brokers = self._metadata_answer
        out.send(Envelope(self.env.node_id, src, MetadataResponse(req.request_id, parts, brokers)))

    def on_replica_log_info(self, src: str, req: GetReplicaLogInfoRequest, out: Output) -> None:
        replica = self.replicas.get((req.topic, req.partition))
        epoch = self.env.broker_epoch if self.env.broker_epoch is not None else -1
        if replica is None:
            key = (req.topic, req.partition)
            error = KAFKA_STORAGE_ERROR if key in self.offline else UNKNOWN_TOPIC_OR_PARTITION
            resp = GetReplicaLogInfoResponse(req.request_id, self.env.broker_id, epoch, req.topic, req.partition, error)
        else:
            last_epoch, leo = replica.log_info()
            resp = GetReplicaLogInfoResponse(req.request_id, self.env.broker_id, epoch, req.topic, req.partition, None, last_epoch, leo)
        out.send(Envelope(self.env.node_id, src, resp))

    def on_alter_partition_response(self, resp: AlterPartitionResponse, now_ms: float, out: Output) -> None:
        key = (resp.topic, resp.partition)
        replica = self.replicas.get(key)
        if replica is not None:
            replica.on_alter_partition_response(resp, now_ms, out)
            self._settle(key, replica)

    def on_flush_completed(self, done: FlushCompleted, now_ms: float, out: Output) -> bool:
        token = done.token
        if not (isinstance(token, tuple) and token and token[0] == "log"):
            return False
        _, topic, partition, end = token
        replica = self.replicas.get((topic, partition))
        if replica is not None:
            replica.on_flushed(end, now_ms, out)
            self._settle((topic, partition), replica)
        return True

    # --- timers --------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        deadlines = [self.next_checkpoint_ms]
        if self.leading:
            deadlines.append(self.next_shrink_check_ms)
        if self.next_flush_ms is not None:
            deadlines.append(self.next_flush_ms)
        parked = self.parked.next_deadline()
        if parked is not None:
            deadlines.append(parked)
        grace = self._fetch_timeout_ms()
        for f in self.fetchers.values():
            if f.sent_ms is not None:
                deadlines.append(f.sent_ms + grace)
            elif f.partitions and f.next_fetch_ms is not None:
                deadlines.append(f.next_fetch_ms)
        d = self.deadlines.earliest()
        if d is not None:
            deadlines.append(d)
        return min(deadlines)

    def tick(self, now_ms: float, out: Output) -> None:
        cfg = self.env.settings.config
        for p in self.parked.expire(now_ms):
            self._answer_parked(p, out)
        grace = self._fetch_timeout_ms()
        for f in self.fetchers.values():
            if f.sent_ms is not None and now_ms >= f.sent_ms + grace:
                f.sent_ms = None  # no answer: the request or its response was lost
                f.session.reset()  # where the session stands is unknown: start a new one
            if f.sent_ms is None and f.partitions and (f.next_fetch_ms is None or f.next_fetch_ms <= now_ms):
                self._send_fetch(f, now_ms, out)
        for key, r in list(self.timed.items()):
            r.tick(now_ms, out)
            self._settle(key, r)
            if r.next_deadline() is None:
                del self.timed[key]
        if now_ms >= self.next_shrink_check_ms:
            self.next_shrink_check_ms = now_ms + cfg.replica_lag_time_max_ms / 2
            self._apply_skipped_fetches()
            for key in [k for k in self.replicas if k in self.leading]:
                self.replicas[key].maybe_shrink_isr(now_ms, out)
                self._settle(key, self.replicas[key])
        if self.next_flush_ms is not None and now_ms >= self.next_flush_ms:
            self.next_flush_ms = now_ms + cfg.log_flush_interval_ms
            out.write(Flush())
        if now_ms >= self.next_checkpoint_ms:
            self.next_checkpoint_ms = now_ms + HWM_CHECKPOINT_INTERVAL_MS
            self.checkpoint_hwms(out)

    def _apply_skipped_fetches(self) -> None:
        """Before the shrink check reads the followers' caught-up times: a partition its session's
        latest fetch skipped had its follower caught up at that fetch (fetch_session.py)."""
        for session in self.sessions.values():
            at = session.last_fetch_ms
            for key, done in session.last_processed_ms.items():
                if done < at and key in self.leading:
                    self.replicas[key].note_skipped_fetch(session.follower, at)

    def checkpoint_hwms(self, out: Output) -> None:
        """Write every replica's local HWM (Kafka's replication-offset-checkpoint) if any moved.
        An offline replica keeps the HWM it had: Kafka keeps a checkpoint file per directory and
        stops writing the failed one's, which holds its replicas' HWMs when the broker restarts."""
        current = {r.name: r.hwm for r in self.replicas.values()}
        current.update({r.name: r.hwm for r in self.offline.values() if r is not None})
        if current != self.checkpointed:
            self.checkpointed = current
            out.write(Replace(HWM_CHECKPOINT_FILE, pack(current)))

    def stop_all(self, out: Output) -> None:
        for key, r in self.replicas.items():
            r.stop(out)
            self._settle(key, r)
        self.timed.clear()
        self.deadlines.clear()
        self.leading.clear()
        self.fetchers.clear()
        self.sessions.clear()
        self.parked.take_all()
