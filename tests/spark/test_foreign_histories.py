"""Histories written from docs/reference by another tool, not by kraftlab's writer: a file per node
holding only its node's columns, integers as int64 (pyarrow's inference), a list that is always
empty typed `list<null>`. Spark takes one file's columns for the whole history; the checks must
see every file's (observability/analysis/columns.py)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from observability.analysis.analyze import analyze_run
from observability.analysis.errors import AnalysisInputError
from observability.analysis.loading import discover
from observability.history_anomalies import count_anomalies


class ContractHistory:
    """Rows with the contract's columns only, numbered per node, as a third party writes them."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.seq: dict[str, int] = defaultdict(int)

    def add(self, node: str, kind: str, **columns) -> ContractHistory:
        self.rows.append(dict(time_ms=float(len(self.rows) + 1), node=node, incarnation=0, node_seq=self.seq[node],
                              kind=kind, **columns))
        self.seq[node] += 1
        return self

    def write(self, run_dir: Path, per_node: bool = True) -> Path:
        """One file per node (each with its own rows' columns), or one file of every row."""
        events = run_dir / "events"
        events.mkdir(parents=True)
        groups: dict[str, list[dict]] = defaultdict(list)
        for row in self.rows:
            groups[row["node"] if per_node else "all"].append(row)
        for name, rows in groups.items():
            keys = list(dict.fromkeys(k for r in rows for k in r))
            pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows]), events / f"{name}.parquet")
        return run_dir


def five_records_one_lost() -> ContractHistory:
    """p1 writes 5 records to t-0 (acknowledged ok at offsets 0..4), c1 reads them all, and the
    final read holds offsets 0..3: record 4 was acknowledged and is not in the committed log."""
    h = ContractHistory()
    for s in range(5):
        h.add("p1", "produce_send", producer="p1", sequence=s, topic="t", partition=0, acks="all")
    for s in range(5):
        h.add("p1", "produce_ack", producer="p1", sequence=s, topic="t", partition=0, outcome="ok", offset=s, latency_ms=3.0)
    for s in range(5):
        h.add("c1", "consume", consumer="c1", poll=0, topic="t", partition=0, offset=s, producer="p1", sequence=s)
    for s in range(4):
        h.add("driver", "final_read", topic="t", partition=0, offset=s, producer="p1", sequence=s)
    h.add("driver", "partition_change", topic="t", partition=0, leader=1, leader_epoch=1, partition_epoch=1,
          isr=[1, 2, 3], elr=[], last_known_elr=[], metadata_offset=10)
    return h


@pytest.mark.parametrize("per_node", [True, False], ids=["a-file-per-node", "one-file"])
def test_a_history_written_from_the_contract_alone_shows_its_lost_write(spark, tmp_path, per_node):
    run = five_records_one_lost().write(tmp_path / "run", per_node)
    checks, _ = analyze_run(run, tmp_path / "out", spark=spark)
    assert checks["events"] == 20
    assert checks["anomalies"]["lost-write"]["count"] == 1
    assert checks["anomalies"]["lost-write"]["examples"] == [
        {"producer": "p1", "sequence": 4, "topic": "t", "partition": 0, "offset": 4, "acks": "all"}]
    assert checks["anomalies"]["uncommitted-read"]["count"] == 1
    assert checks["anomalies"]["duplicate"]["count"] == 0
    assert checks["anomalies"]["inconsistent-offsets"]["count"] == 0
    stats = checks["stats"]
    assert (stats["sent"], stats["acked"], stats["consumed"], stats["final_read"]) == (5, 5, 5, 4)
    assert stats["latency_ms"]["count"] == 5
    # The contract gives `acks` to produce_send only: the lost write's setting comes from its send.
    assert stats["lost_by_acks"] == {"all": 1}
    assert checks["valid"] is False


def polled(reads: list[list[int]], consumer: str = "c1") -> ContractHistory:
    """p1 writes 6 records to t-0 (acknowledged ok at offsets 0..5, all in the final read); the
    consumer reads the given offsets, one list per poll. No `consumer_seek` nor `consumer_done`
    row: the contract's kinds only."""
    h = ContractHistory()
    for s in range(6):
        h.add("p1", "produce_send", producer="p1", sequence=s, topic="t", partition=0, acks="all")
        h.add("p1", "produce_ack", producer="p1", sequence=s, topic="t", partition=0, outcome="ok", offset=s, latency_ms=3.0)
    for poll, offsets in enumerate(reads):
        for o in offsets:
            h.add(consumer, "consume", consumer=consumer, poll=poll, topic="t", partition=0, offset=o, producer="p1", sequence=o)
    for s in range(6):
        h.add("driver", "final_read", topic="t", partition=0, offset=s, producer="p1", sequence=s)
    return h


def anomaly_counts(spark, h: ContractHistory, tmp_path) -> tuple[dict[str, int], dict]:
    checks, _ = analyze_run(h.write(tmp_path / "run"), tmp_path / "out", spark=spark)
    return {name: a["count"] for name, a in checks["anomalies"].items() if a["count"]}, checks


def test_a_poll_that_goes_back_is_a_nonmonotonic_poll_in_any_consumer(spark, tmp_path):
    # Jepsen's nonmonotonic-poll: c1's second poll reads offset 1 again after 2.
    found, checks = anomaly_counts(spark, polled([[0, 1, 2], [1, 2, 3, 4, 5]]), tmp_path)
    assert found == {"nonmonotonic-poll": 1}
    assert checks["anomalies"]["nonmonotonic-poll"]["examples"][0]["previous"] == 2
    assert checks["valid"] is False


def test_a_poll_that_jumps_over_committed_offsets_is_a_poll_skip_and_the_skipped_record_unseen(spark, tmp_path):
    # c1 reads t-0 from its first committed offset to its last, jumping over offset 3: it ran to
    # the end, so record 3 (acknowledged, committed, never read) is unseen as well.
    found, checks = anomaly_counts(spark, polled([[0, 1, 2], [4, 5]]), tmp_path)
    assert found == {"poll-skip": 1, "unseen": 1}
    assert checks["anomalies"]["unseen"]["examples"] == [{"producer": "p1", "sequence": 3, "topic": "t", "partition": 0, "offset": 3}]
    assert checks["stats"]["unseen_checked"]["checked"] is True


def test_unseen_is_not_judged_when_no_consumer_read_to_the_end(spark, tmp_path):
    found, checks = anomaly_counts(spark, polled([[0, 1, 2]]), tmp_path)
    assert found == {}
    assert checks["valid"] is True
    assert checks["stats"]["unseen_checked"] == {
        "checked": False, "reason": "1 of 1 partitions of the final read were not read from their first to their last offset by any consumer"}


def test_a_consumer_that_starts_mid_log_is_judged_from_its_first_read(spark, tmp_path):
    # Nothing says where c1 was to start (no seek): its first read at 3 skips nothing.
    found, _ = anomaly_counts(spark, polled([[3, 4], [5]]), tmp_path)
    assert found == {}


def test_in_a_dataset_of_both_kinds_of_run_each_run_s_unseen_is_judged_by_its_own_rule(spark, tmp_path):
    # Run "steps": contract kinds only; its consumer read t-0 from 0 to 5, jumping over 3.
    # Run "load": its load consumer read 0..2 and said at the end it had caught up (consumer_done):
    # judged by that, records 3, 4 and 5 are unseen.
    polled([[0, 1, 2], [4, 5]]).write(tmp_path / "campaign" / "runs" / "steps")
    polled([[0, 1, 2]]).add("c1", "consumer_done", consumer="c1", complete=True).write(tmp_path / "campaign" / "runs" / "load")
    checks, _ = analyze_run(tmp_path / "campaign", tmp_path / "out", spark=spark)
    runs = {r["run"]: r for r in pq.read_table(tmp_path / "out" / "runs.parquet").to_pylist()}
    assert (runs["steps"]["unseen"], runs["load"]["unseen"]) == (1, 3)
    assert (runs["steps"]["poll-skip"], runs["load"]["poll-skip"]) == (1, 0)
    assert checks["anomalies"]["unseen"]["count"] == 4


def test_files_that_give_a_column_two_kinds_of_type_are_bad_input_named(tmp_path):
    run = five_records_one_lost().write(tmp_path / "run")
    rows = [{"time_ms": 99.0, "node": "c2", "incarnation": 0, "node_seq": 0, "kind": "consume", "consumer": "c2",
             "poll": 0, "topic": "t", "partition": "zero", "offset": 0, "producer": "p1", "sequence": 0}]
    pq.write_table(pa.Table.from_pylist(rows), run / "events" / "c2.parquet")
    with pytest.raises(AnalysisInputError) as err:
        discover(run)
    message = str(err.value)
    assert "column `partition`" in message and "c2.parquet" in message and "string" in message


def one_poll_back_in_two_partitions() -> ContractHistory:
    """c1 reads t-0 and t-1 offsets 0..2 in poll 0, then in poll 1 reads offset 1 of each again:
    one poll that went back in two partitions."""
    h = ContractHistory()
    for p in (0, 1):
        for s in range(3):
            h.add("p1", "produce_ack", producer="p1", sequence=10 * p + s, topic="t", partition=p, outcome="ok",
                  offset=s, latency_ms=3.0)
    for poll, offsets in enumerate([[0, 1, 2], [1, 2]]):
        for p in (0, 1):
            for o in offsets:
                h.add("c1", "consume", consumer="c1", poll=poll, topic="t", partition=p, offset=o, producer="p1",
                      sequence=10 * p + o)
    for p in (0, 1):
        for s in range(3):
            h.add("driver", "final_read", topic="t", partition=p, offset=s, producer="p1", sequence=10 * p + s)
    return h


def test_the_poll_anomalies_count_polls_not_partitions(spark, tmp_path):
    # docs/reference: "count is the number of ... (for the two poll anomalies: of consumer polls)".
    # Both judges count (consumer, incarnation, poll): Spark's and the campaigns' plain Python.
    h = one_poll_back_in_two_partitions()
    found, checks = anomaly_counts(spark, h, tmp_path)
    assert found == {"nonmonotonic-poll": 1}
    (example,) = checks["anomalies"]["nonmonotonic-poll"]["examples"]
    assert (example["poll"], example["topic"], example["partition"], example["offset"], example["previous"]) == (1, "t", 0, 1, 2)
    assert count_anomalies(tmp_path / "run" / "events")["nonmonotonic-poll"] == 1


def test_a_restarted_consumer_s_polls_are_its_new_incarnation_s(spark, tmp_path):
    # c1 seeks to 0 and its poll 0 jumps over offset 1; restarted (incarnation 1, numbering its
    # rows and polls from 0 again), it seeks to 3 and its poll 0 jumps over offset 4: two polls.
    h = polled([])
    for incarnation, (start, offsets) in enumerate([(0, [0, 2]), (3, [3, 5])]):
        h.seq["c1"] = 0
        h.add("c1", "consumer_seek", consumer="c1", topic="t", partition=0, offset=start)
        for o in offsets:
            h.add("c1", "consume", consumer="c1", poll=0, topic="t", partition=0, offset=o, producer="p1", sequence=o)
        for r in h.rows[-1 - len(offsets):]:
            r["incarnation"] = incarnation
    found, checks = anomaly_counts(spark, h, tmp_path)
    assert found["poll-skip"] == 2
    assert sorted((e["incarnation"], e["poll"]) for e in checks["anomalies"]["poll-skip"]["examples"]) == [(0, 0), (1, 0)]
    assert count_anomalies(tmp_path / "run" / "events")["poll-skip"] == 2


@pytest.mark.parametrize("column, value, expected", [("partition", "0", "int32"), ("sequence", "s4", "int64")])
def test_a_column_of_the_wrong_type_is_bad_input_named_even_in_one_file(tmp_path, column, value, expected):
    # Before: a `partition` of strings in every file was read as strings, and a check failed deep
    # inside Spark with a Python traceback (exit 1), leaving a partial analysis behind.
    h = five_records_one_lost()
    for r in h.rows:
        if column in r:
            r[column] = value
    run = h.write(tmp_path / "run", per_node=False)
    with pytest.raises(AnalysisInputError) as err:
        discover(run)
    assert str(err.value) == f"{run / 'events' / 'all.parquet'}: column `{column}` is string (expected {expected}, see docs/reference/events.md)"


def test_a_file_without_the_columns_every_row_has_is_bad_input_named(tmp_path):
    run = five_records_one_lost().write(tmp_path / "run")
    pq.write_table(pa.Table.from_pylist([{"time_ms": 1.0, "node": "x", "kind": "fault"}]), run / "events" / "x.parquet")
    with pytest.raises(AnalysisInputError) as err:
        discover(run)
    assert "x.parquet: no column `incarnation`, `node_seq`" in str(err.value)
