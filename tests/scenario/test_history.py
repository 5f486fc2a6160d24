"""The event history of simulated runs (docs/reference/events.md): complete, checkable from
outside (records identified by producer and sequence from hand-over to the final read) and the
same for the same seed."""

import pyarrow.compute as pc
import pytest

from kraftlab.runner import run_scenario
from observability.history import read_history
from tests.history_checks import assert_complete_history, lost_writes
from workloads.scenario.loading import load_scenario


def run(name, tmp_path, sub="run", **overrides):
    scenario, _ = load_scenario(name)
    if overrides:
        scenario = scenario.model_copy(update=overrides)
    result = run_scenario(scenario, source=name, out_dir=tmp_path / sub)
    return result.run_dir, result.summary


@pytest.fixture(scope="module")
def load_elr(tmp_path_factory):
    return run("last-replica-standing-load", tmp_path_factory.mktemp("elr"))


def test_a_load_run_with_a_crash_has_a_complete_history(load_elr):
    run_dir, summary = load_elr
    rows = assert_complete_history(run_dir, summary)
    kinds = {r["kind"] for r in rows}
    assert {"produce_send", "produce_ack", "consume", "final_read", "partition_change", "election", "fault"} <= kinds
    # What the consumer read, it read in order, each offset once, from the records produced.
    reads = [(r["offset"], r["producer"], r["sequence"]) for r in rows if r["kind"] == "consume"]
    assert [o for o, _, _ in reads] == list(range(len(reads)))
    produced = {(r["producer"], r["sequence"]) for r in rows if r["kind"] == "produce_send"}
    assert {(p, s) for _, p, s in reads} <= produced
    # ELR: every record acknowledged with acks=all is in the final read, from the leader.
    assert lost_writes(rows) == set() and summary["stats"]["acked_lost"] == 0
    assert {r["source"] for r in rows if r["kind"] == "final_read"} == {"leader"}
    # The OS crash of b1 is a fault row, and what its page cache took a crash_lost row.
    assert any(r["kind"] == "fault" and (r["fault"], r["target"]) == ("crash_os", "b1") for r in rows)
    assert any(r["kind"] == "crash_lost" and r["target"] == "b1" and r["bytes_lost"] > 0 for r in rows)
    # page_cache: the OS writes back what stayed dirty (`storage_flushed`, cause writeback); the
    # voters' quorum state is fsynced.
    flushes = {(r["node"][0], r["cause"]) for r in rows if r["kind"] == "storage_flushed"}
    assert ("b", "writeback") in flushes and ("c", "fsync") in flushes, flushes


def test_fsync_storage_tells_each_flush_its_acknowledgements_wait_on(tmp_path):
    run_dir, summary = run("last-replica-standing-load", tmp_path, cluster=load_scenario("last-replica-standing-load")[0].cluster.model_copy(update={"storage": "fsync"}))
    rows = [r for r in read_history(run_dir / "events").to_pylist() if r["kind"] == "storage_flushed"]
    assert {r["cause"] for r in rows if r["node"].startswith("b")} >= {"fsync"}
    assert all(r["files"] >= 1 for r in rows)


@pytest.fixture(scope="module")
def load_no_elr(tmp_path_factory):
    return run("last-replica-standing-load-no-elr", tmp_path_factory.mktemp("no-elr"))


def test_without_elr_the_lost_writes_in_the_history_are_the_summarys_acked_lost(load_no_elr):
    run_dir, summary = load_no_elr
    rows = assert_complete_history(run_dir, summary)
    assert len(lost_writes(rows)) == summary["stats"]["acked_lost"] > 0


def consumer_rows(rows, consumer="load-consumer-1"):
    return sorted((r for r in rows if r["node"] == consumer), key=lambda r: (r["incarnation"], r["node_seq"]))


def test_a_consumer_moves_back_over_a_log_truncated_under_it(load_no_elr):
    """KIP-320, as the load's consumer lives through the Last Replica Standing without ELR: it had
    read up to where b1's OS crash took the log back to nothing; once b1 leads again, its epochs end
    below the consumer's position, the consumer moves back to offset 0 (no epoch up to its own:
    the earliest offset) and reads the records that replaced those it read."""
    run_dir, _ = load_no_elr
    rows = consumer_rows(read_history(run_dir / "events").to_pylist())
    (reset,) = [r for r in rows if r["kind"] == "consumer_reset"]
    assert reset["from_offset"] > 0 and reset["offset"] == 0 and reset["leader_epoch"] == -1
    assert reset["reason"] == "log_truncation"
    before = [r for r in rows if r["kind"] == "consume" and r["node_seq"] < reset["node_seq"]]
    after = [r for r in rows if r["kind"] == "consume" and r["node_seq"] > reset["node_seq"]]
    # Before: offsets 0.. in order, up to where it was. After: from 0 again, in order.
    assert [r["offset"] for r in before] == list(range(reset["from_offset"]))
    assert [r["offset"] for r in after] == list(range(len(after))) and after
    # What it reads there now are other records than it read there before.
    first = {r["offset"]: (r["producer"], r["sequence"]) for r in before}
    assert all(first[r["offset"]] != (r["producer"], r["sequence"]) for r in after if r["offset"] in first)


def test_a_consumer_does_not_move_back_when_nothing_was_truncated(load_elr):
    run_dir, _ = load_elr
    rows = consumer_rows(read_history(run_dir / "events").to_pylist())
    assert [r for r in rows if r["kind"] == "consumer_reset"] == []


def test_without_leader_epoch_truncation_a_consumer_is_not_moved_back(tmp_path):
    """With `protocol.leader_epoch_truncation: false` (before KIP-101 and KIP-320) the leader does
    not validate the consumer's position: it waits where it was and reads on from there when the
    new log reaches it, never reading the records written below."""
    scenario, _ = load_scenario("last-replica-standing-load-no-elr")
    protocol = scenario.cluster.protocol.model_copy(update={"leader_epoch_truncation": False})
    run_dir, _ = run("last-replica-standing-load-no-elr", tmp_path, cluster=scenario.cluster.model_copy(update={"protocol": protocol}))
    rows = consumer_rows(read_history(run_dir / "events").to_pylist())
    assert not [r for r in rows if r["kind"] == "consumer_reset"]
    offsets = [r["offset"] for r in rows if r["kind"] == "consume"]
    assert offsets == sorted(set(offsets))  # never back


def test_a_partition_without_a_leader_is_read_from_its_running_isr_and_elr_members(tmp_path):
    # t-0 ends offline with ISR [] and ELR [1, 2]: brokers 1 and 2 hold every committed record,
    # each up to an HWM that is its log end (so each read is the whole committed log). Broker 3,
    # out of both, is not read: its log is no part of the committed log's definition.
    run_dir, summary = run("stale-broker-epoch", tmp_path)
    final = summary["final"]["partitions"]["t-0"]
    assert (final["leader"], final["isr"], final["elr"]) == (None, [], [1, 2])
    rows = assert_complete_history(run_dir, summary)
    done = {(r["source"], r["broker"]): (r["hwm"], r["complete"]) for r in rows if r["kind"] == "final_read_done"}
    assert done == {("replica", 1): (10, True), ("replica", 2): (10, True)}
    read = {(r["broker"], r["offset"]) for r in rows if r["kind"] == "final_read"}
    assert read == {(b, o) for b in (1, 2) for o in range(10)}


def test_the_same_seed_writes_the_same_history(tmp_path):
    a, _ = run("sim-faults-smoke", tmp_path, "a")
    b, _ = run("sim-faults-smoke", tmp_path, "b")
    ta, tb = read_history(a / "events"), read_history(b / "events")
    assert ta.num_rows > 100 and ta.equals(tb)


def test_acknowledged_records_carry_their_offsets_and_latencies(load_elr):
    run_dir, _ = load_elr
    table = read_history(run_dir / "events")
    acks = table.filter(pc.and_(pc.equal(table["kind"], "produce_ack"), pc.equal(table["outcome"], "ok")))
    assert acks.num_rows > 0
    assert pc.all(pc.is_valid(acks["offset"])).as_py() and pc.min(acks["latency_ms"]).as_py() >= 0
    # Each acknowledged offset holds that very record in the final read.
    final = table.filter(pc.equal(table["kind"], "final_read"))
    at = dict(zip(zip(final["partition"].to_pylist(), final["offset"].to_pylist()), zip(final["producer"].to_pylist(), final["sequence"].to_pylist()), strict=True))
    for p, o, prod, seq in zip(acks["partition"].to_pylist(), acks["offset"].to_pylist(), acks["producer"].to_pylist(), acks["sequence"].to_pylist(), strict=True):
        assert at[(p, o)] == (prod, seq)


def test_each_reading_starts_with_a_consumer_seek_row(tmp_path):
    """Where each reading starts is in the history (`consumer_seek`): the poll anomalies judge a
    `consume` step that reads the partition again from its `from` against that, not against what
    the consumer read before (observability/analysis/anomalies.py, `poll_steps`)."""
    from workloads.scenario.loading import validate

    scenario = validate({
        "name": "two-reads",
        "cluster": {"brokers": 3, "controllers": 1},
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}],
        "steps": [
            {"produce": {"topic": "t", "partition": 0, "count": 4, "acks": "all", "expect": "acked"}},
            {"consume": {"topic": "t", "partition": 0, "from": 0, "expect_count": 4}},
            {"consume": {"topic": "t", "partition": 0, "from": 2, "expect_count": 2}},
        ],
    }, "test")
    result = run_scenario(scenario, source="test", out_dir=tmp_path / "run")
    rows = sorted(read_history(result.run_dir / "events").to_pylist(), key=lambda r: r["node_seq"])
    reads = [(r["kind"], r["offset"]) for r in rows if r["node"] == "consumer" and r["kind"] in ("consumer_seek", "consume")]
    # The same consumer then reads the final read (`final_read` rows): no seek row for that.
    assert reads == [("consumer_seek", 0), ("consume", 0), ("consume", 1), ("consume", 2), ("consume", 3),
                     ("consumer_seek", 2), ("consume", 2), ("consume", 3)]
    assert any(r["kind"] == "final_read" and r["node"] == "consumer" for r in rows)


def test_every_fault_row_names_the_simulator_as_its_backend(load_elr):
    run_dir, _ = load_elr
    faults = read_history(run_dir / "events").filter(pc.equal(pc.field("kind"), "fault"))
    assert faults.num_rows >= 2  # the scenario's crash and restart at least
    assert set(faults.column("backend").to_pylist()) == {"sim"}
