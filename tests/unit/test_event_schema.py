"""The event history's schema (observability/events.py) and its Parquet files (history.py)."""

import typing

import pyarrow.parquet as pq

from observability import events as ev
from observability.events import COLUMN_TYPES, KINDS, EventRecord
from observability.history import SCHEMA, HistoryWriter, history_files, read_history, read_rows

# docs/reference/events.md: the kinds analysis tools rely on and their columns.
CONTRACT_KINDS = {
    "produce_send": {"producer", "sequence", "topic", "partition", "acks"},
    "produce_ack": {"producer", "sequence", "topic", "partition", "outcome", "offset", "latency_ms"},
    "consume": {"consumer", "poll", "topic", "partition", "offset", "producer", "sequence"},
    "final_read": {"topic", "partition", "offset", "producer", "sequence"},
    "partition_change": {"topic", "partition", "leader", "leader_epoch", "partition_epoch", "isr", "elr", "last_known_elr", "metadata_offset"},
    "election": {"topic", "partition", "leader", "leader_epoch", "election_kind"},
    "fault": {"fault", "target", "backend"},
}


def sample(cls):
    """An instance of a kind with a plausible value in every field."""
    values = {str: "x", int: 1, float: 1.5, bool: True}
    args = []
    for annotation in typing.get_type_hints(cls).values():
        if typing.get_origin(annotation) is tuple:
            inner = typing.get_args(annotation)[0]
            args.append(((1, 2), (3,)) if typing.get_origin(inner) is tuple else (values[inner], values[inner]))
        else:
            base = next(a for a in (typing.get_args(annotation) or (annotation,)) if a is not type(None))
            args.append(values[base])
    return cls(*args)


def test_every_column_of_every_kind_has_one_type():
    for kind, cls in KINDS.items():
        columns = sample(cls).rows().keys() if cls.is_batch else cls._fields
        missing = [c for c in columns if c not in COLUMN_TYPES]
        assert not missing, f"{kind}: {missing}"


def test_the_contract_kinds_carry_the_contract_columns():
    for kind, columns in CONTRACT_KINDS.items():
        cls = KINDS[kind]
        have = set(sample(cls).rows()) if cls.is_batch else set(cls._fields)
        assert columns <= have, f"{kind} lacks {columns - have}"
    assert {"time_ms", "node", "incarnation", "node_seq", "kind"} <= set(SCHEMA.names)


def test_a_batch_event_is_one_row_per_record_with_consecutive_offsets():
    ack = ev.ProduceAck("p1", "t", 0, "all", "ok", (7, 9, 12), (1.0, 2.0, 3.0), first_offset=40, batch_crc=5)
    assert ack.row_count == 3
    rows = ev.row_dicts(EventRecord(10.0, "p1", 0, 100, ack))
    assert [(r["node_seq"], r["sequence"], r["offset"]) for r in rows] == [(100, 7, 40), (101, 9, 41), (102, 12, 42)]


def test_the_writer_rolls_files_per_node_with_the_full_schema_and_reads_back_in_order(tmp_path):
    writer = HistoryWriter(tmp_path, roll_rows=4, roll_seconds=3600)
    seq = {"b1": 0, "p1": 0}
    for i in range(5):
        writer(EventRecord(float(i), "b1", 0, seq["b1"], ev.Step(i, "wait")))
        seq["b1"] += 1
        send = ev.ProduceSend("p1", "t", 0, "all", (2 * i, 2 * i + 1))
        writer(EventRecord(float(i), "p1", 0, seq["p1"], send))
        seq["p1"] += 2
    # p1 reached 4 rows twice: two files; b1 has not reached 4 rows' roll yet past its first.
    assert sorted(p.name for p in history_files(tmp_path)) == ["b1-00000.parquet", "p1-00000.parquet", "p1-00001.parquet"]
    writer.close()
    # What was pending at the end (b1's fifth row, p1's last two): one file for both nodes.
    assert sorted(p.name for p in history_files(tmp_path)) == ["b1-00000.parquet", "nodes-00000.parquet", "p1-00000.parquet", "p1-00001.parquet"]
    assert pq.read_table(tmp_path / "nodes-00000.parquet").column("node").to_pylist() == ["b1", "p1", "p1"]
    assert all(pq.read_schema(p).equals(SCHEMA) for p in history_files(tmp_path))
    table = read_history(tmp_path)
    assert table.num_rows == 5 + 10 == writer.rows
    p1 = [r for r in read_rows(tmp_path) if r["node"] == "p1"]
    assert [r["sequence"] for r in p1] == list(range(10)) and [r["node_seq"] for r in p1] == list(range(10))


def test_a_file_still_being_written_is_not_read(tmp_path):
    writer = HistoryWriter(tmp_path)
    writer(EventRecord(0.0, "driver", 0, 0, ev.Step(0, "wait")))
    writer.close()
    (tmp_path / ".b1-00000.parquet.partial").write_bytes(b"PAR1 torn")
    assert read_history(tmp_path).num_rows == 1
