"""The partition log (storage/partition_log.py): batches, the leader-epoch cache and recovery from
the files a crash left (the replication deep dive for offsets; the protocol description
§6.6 for epochs and divergence)."""

from actors.contract import Append, Delete, Output, Replace, Truncate
from storage.codec import frame, pack
from storage.partition_log import PartitionLog, RecordBatch, partition_dirs


def batch(values, epoch, base=0, pid=-1, seq=-1):
    return RecordBatch.of(pack(list(values)), len(values), pid, seq).stamped(base, epoch)


def files_of(out: Output) -> dict[str, bytes]:
    """Replay storage ops into a dict of files (what a disk would hold)."""
    files: dict[str, bytearray] = {}
    for op in out.storage:
        if isinstance(op, Append):
            files.setdefault(op.path, bytearray()).extend(op.data)
        elif isinstance(op, Truncate):
            del files.setdefault(op.path, bytearray())[op.size :]
        elif isinstance(op, Replace):
            files[op.path] = bytearray(op.data)
        elif isinstance(op, Delete):
            files.pop(op.path, None)
    return {k: bytes(v) for k, v in files.items()}


def log_with(*epochs_and_counts):
    """A log with one batch per (epoch, count)."""
    log, out = PartitionLog("partitions/t-0"), Output()
    for epoch, count in epochs_and_counts:
        log.append(batch([f"v{log.end_offset + i}" for i in range(count)], epoch, log.end_offset), out)
    return log, out


def test_offsets_are_contiguous_and_the_leo_is_exclusive():
    log, _ = log_with((0, 3), (0, 2))
    assert log.end_offset == 5 and [b.base_offset for b in log.batches] == [0, 3]
    assert log.identity_at(4)[1] == 1 and log.identity_at(5) is None


def test_the_epoch_cache_records_where_each_epoch_starts():
    log, _ = log_with((0, 3), (2, 2), (5, 1))
    assert log.epochs == [(0, 0), (2, 3), (5, 5)]


def test_end_offset_for_epoch_is_the_start_of_the_next_epoch_or_the_leo():
    """Kafka's OffsetsForLeaderEpoch, the basis of divergence detection (§6.6)."""
    log, _ = log_with((0, 3), (2, 2), (5, 1))
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(1) == (0, 3)  # largest epoch <= 1 is 0
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(9) == (5, 6)


def test_truncation_removes_whole_batches_and_later_epochs():
    log, out = log_with((0, 3), (2, 2))
    assert log.truncate_to(4, out) == 3  # the batch holding offset 4 starts at 3: it goes whole
    assert log.epochs == [(0, 0)] and log.version == 1


def test_a_new_leader_records_its_epoch_start_even_with_nothing_appended():
    log, out = log_with((0, 3))
    log.assign_epoch(4, 3, out)
    assert log.epochs == [(0, 0), (4, 3)]
    assert log.end_offset_for_epoch(3) == (0, 3)


def test_an_epoch_left_by_a_leadership_that_wrote_nothing_gives_way_to_older_batches():
    """Kafka's LeaderEpochFileCache.assign drops entries the new one contradicts."""
    log, out = log_with((0, 3))
    log.assign_epoch(5, 3, out)  # led epoch 5 briefly, wrote nothing
    log.append(batch(["x"], 4, 3), out)  # then followed a leader holding epoch 4 data
    assert log.epochs == [(0, 0), (4, 3)]


def test_recovery_rebuilds_the_log_and_cuts_a_torn_tail():
    log, out = log_with((0, 3), (1, 2))
    files = files_of(out)
    files[log.segment_path()] += frame(batch(["torn"], 1, 5).encode())[:-3]  # a write cut short
    recovered_out = Output()
    recovered = PartitionLog.recover(log.directory, files, recovered_out)
    assert recovered.end_offset == 5 and recovered.epochs == [(0, 0), (1, 3)]
    assert any(isinstance(op, Truncate) and op.path == log.segment_path() for op in recovered_out.storage)


def test_recovery_drops_epoch_entries_beyond_the_recovered_log():
    log, out = log_with((0, 3), (1, 2))
    files = files_of(out)
    files[log.segment_path()] = files[log.segment_path()][: len(frame(log.batches[0].encode()))]  # page cache lost batch 2
    recovered = PartitionLog.recover(log.directory, files, Output())
    assert recovered.end_offset == 3 and recovered.epochs == [(0, 0)]


def test_a_corrupt_batch_ends_the_valid_log():
    log, out = log_with((0, 2), (0, 2))
    files = files_of(out)
    data = bytearray(files[log.segment_path()])
    data[-1] ^= 0xFF  # flip a bit in the last batch
    files[log.segment_path()] = bytes(data)
    assert PartitionLog.recover(log.directory, files, Output()).end_offset == 2


def test_idempotent_producer_state_follows_the_log():
    log, out = PartitionLog("partitions/t-0"), Output()
    log.append(batch(["a", "b"], 0, 0, pid=7, seq=0), out)
    log.append(batch(["c"], 0, 2, pid=7, seq=2), out)
    assert log.producers[7].last_sequence == 2 and log.producers[7].base_offset == 2
    log.truncate_to(2, out)
    assert log.producers[7].last_sequence == 1
    log.truncate_to(0, out)
    assert 7 not in log.producers


def test_the_producer_state_keeps_the_last_five_batches_as_kafka_does():
    """A producer with five requests in flight may retry any of them: the leader finds where each
    of its last five batches went (ProducerStateManager), and no older one."""
    log, out = PartitionLog("partitions/t-0"), Output()
    for i in range(6):
        log.append(batch(["x", "y"], 0, 2 * i, pid=7, seq=2 * i), out)
    entry = log.producers[7]
    assert [entry.offset_of(2 * i) for i in range(6)] == [None, 2, 4, 6, 8, 10]
    assert entry.offset_of(1) is None  # a sequence inside a batch starts none
    log.truncate_to(6, out)  # the producer state is rebuilt from what the log keeps
    assert [log.producers[7].offset_of(2 * i) for i in range(6)] == [0, 2, 4, None, None, None]


def test_idempotent_producer_state_is_what_survived_a_crash():
    """Recovery rebuilds the producer state from the batches the files kept: after a page cache
    loss took the last batch, the producer's last batch is the one before."""
    log, out = PartitionLog("partitions/t-0"), Output()
    log.append(batch(["a", "b"], 0, 0, pid=7, seq=0), out)
    kept = files_of(out)
    log.append(batch(["c"], 0, 2, pid=7, seq=2), out)
    recovered = PartitionLog.recover(log.directory, kept, Output())
    assert recovered.producers[7].last_sequence == 1 and recovered.producers[7].base_offset == 0
    assert PartitionLog.recover(log.directory, files_of(out), Output()).producers[7].last_sequence == 2


def test_replica_directories_are_found_among_a_nodes_files():
    assert partition_dirs({"partitions/my-topic-3/log": b"", "raft/log": b"", "partitions/t-0/leader-epoch-checkpoint": b""}) == [
        ("my-topic", 3, "partitions/my-topic-3"),
        ("t", 0, "partitions/t-0"),
    ]


def segmented_log(segment_bytes: int, *counts: int) -> tuple[PartitionLog, Output]:
    log, out = PartitionLog("partitions/t-0", segment_bytes), Output()
    for count in counts:
        log.append(batch([f"v{log.end_offset + i}" for i in range(count)], 0, log.end_offset), out)
    return log, out


def frame_size(log: PartitionLog, i: int) -> int:
    return len(frame(log.batches[i].encode()))


def test_the_active_segment_rolls_before_a_batch_would_take_it_past_segment_bytes():
    """Kafka's LogSegment.shouldRoll; segments are named after their first offset."""
    one = len(frame(batch(["v0"], 0).encode()))
    log, out = segmented_log(2 * one + 1, 1, 1, 1, 1, 1)
    assert log.segments == [(0, 2 * one), (2, 2 * one), (4, one)]
    files = files_of(out)
    assert sorted(p for p in files if p.endswith(".log")) == [
        "partitions/t-0/00000000000000000000.log",
        "partitions/t-0/00000000000000000002.log",
        "partitions/t-0/00000000000000000004.log",
    ]
    # A batch larger than a whole segment still goes into an (empty) segment of its own.
    log.append(batch([f"big{i}" for i in range(50)], 0, 5), out)
    assert log.segments[-1][0] == 5 and log.segments[-1][1] > log.segment_bytes
    log.append(batch(["after"], 0, 55), out)
    assert log.segments[-1] == (55, one + 3)


def test_truncation_deletes_later_segments_and_cuts_the_one_holding_the_offset():
    one = len(frame(batch(["v0"], 0).encode()))
    log, out = segmented_log(2 * one + 1, 1, 1, 1, 1, 1)
    cut = Output()
    assert log.truncate_to(3, cut) == 3
    assert cut.storage[:2] == [Delete("partitions/t-0/00000000000000000004.log"), Truncate("partitions/t-0/00000000000000000002.log", one)]
    assert log.segments == [(0, 2 * one), (2, one)]
    log.append(batch(["new"], 1, 3), cut)  # appends go on in the cut segment
    out.storage.extend(cut.storage)
    recovered = PartitionLog.recover(log.directory, files_of(out), Output(), log.segment_bytes)
    assert [b.base_offset for b in recovered.batches] == [0, 1, 2, 3] and recovered.epochs == [(0, 0), (1, 3)]


def test_recovery_reads_every_segment_and_drops_what_follows_a_torn_one():
    one = len(frame(batch(["v0"], 0).encode()))
    log, out = segmented_log(2 * one + 1, 1, 1, 1, 1, 1)
    files = files_of(out)
    middle = "partitions/t-0/00000000000000000002.log"
    files[middle] = files[middle][:-3]  # the page cache lost the end of the middle segment
    recovered_out = Output()
    recovered = PartitionLog.recover(log.directory, files, recovered_out, log.segment_bytes)
    assert recovered.end_offset == 3 and recovered.segments == [(0, 2 * one), (2, one)]
    assert Truncate(middle, one) in recovered_out.storage
    assert Delete("partitions/t-0/00000000000000000004.log") in recovered_out.storage
    # Intact segments come back whole, in offset order.
    whole = PartitionLog.recover(log.directory, files_of(out), Output(), log.segment_bytes)
    assert whole.end_offset == 5 and whole.segments == log.segments


def test_recovery_stops_at_a_missing_segment():
    one = len(frame(batch(["v0"], 0).encode()))
    log, out = segmented_log(2 * one + 1, 1, 1, 1, 1, 1)
    files = files_of(out)
    del files["partitions/t-0/00000000000000000002.log"]
    recovered_out = Output()
    recovered = PartitionLog.recover(log.directory, files, recovered_out, log.segment_bytes)
    assert recovered.end_offset == 2
    assert Delete("partitions/t-0/00000000000000000004.log") in recovered_out.storage
