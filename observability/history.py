"""The history on disk: a run directory's `events/` as Parquet files (docs/reference/events.md).

`HistoryWriter` is an event sink: it keeps each node's events in memory and writes a node's as a
Parquet file of its own when `roll_rows` of them have gathered, and every node's pending events as
one file when `roll_seconds` of wall-clock time have passed and at the end, so a run killed at any
moment keeps all but its last seconds. A file is written under a name that does not end in
`.parquet` and renamed when complete: readers see whole files only.

Why every node's rows in one file at the end and at each time roll, not a file per node: a short
run (most of a campaign's) then has one file, not one per node and client. Readers pay per file
(Spark opens each and reads its footer, about a hundred columns' worth, for every scan):
`kraftlab analyze` of 2,000 short runs took 352 s with 7 files a run and 115 s with one.

Every file has the full schema (the common columns, then every column of every kind, in
`observability.events.COLUMN_TYPES` order; null where a kind has none), so the files read together
as one dataset: `read_history(dir)` here, `pyarrow.dataset.dataset(dir)` or
`spark.read.parquet(dir)`.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .events import COLUMN_TYPES, COMMON_COLUMNS, EventRecord

_SCALARS = {
    "string": pa.string(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
}


def arrow_type(name: str) -> pa.DataType:
    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(arrow_type(name[5:-1]))
    return _SCALARS[name]


# The prefix of files holding several nodes' rows (numbered with a node of that name, were there
# one, from one counter: names never collide).
ALL_NODES = "nodes"
SCHEMA = pa.schema([pa.field(n, arrow_type(t)) for n, t in {**COMMON_COLUMNS, **COLUMN_TYPES}.items()])
SUFFIX = ".parquet"


def events_table(records: Iterable[EventRecord]) -> pa.Table:
    """The rows of `records` as a table of the full schema, in the order given."""
    groups: dict[type, list[EventRecord]] = defaultdict(list)
    order: list[type] = []
    for rec in records:
        cls = type(rec.event)
        if cls not in groups:
            order.append(cls)
        groups[cls].append(rec)
    tables = [_group_table(cls, groups[cls]) for cls in order]
    if not tables:
        return SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    # Back into the order the events came in (groups split it by kind).
    return table.take(pc.sort_indices(table["_order"])).drop_columns(["_order"])


def _group_table(cls: type, recs: list[EventRecord]) -> pa.Table:
    columns: dict[str, list] = {}
    if cls.is_batch:
        times, nodes, incs, seqs = [], [], [], []
        for rec in recs:
            ev = rec.event
            n = ev.row_count
            times += [rec.time_ms] * n
            nodes += [rec.node] * n
            incs += [rec.incarnation] * n
            seqs += range(rec.node_seq, rec.node_seq + n)
            for name, values in ev.rows().items():
                columns.setdefault(name, []).extend(values)
    else:
        times = [r.time_ms for r in recs]
        nodes = [r.node for r in recs]
        incs = [r.incarnation for r in recs]
        seqs = [r.node_seq for r in recs]
        for name, values in zip(cls._fields, zip(*(r.event for r in recs), strict=True), strict=True):
            columns[name] = list(values)
    n = len(times)
    arrays = []
    for field in SCHEMA:
        name = field.name
        if name == "time_ms":
            arrays.append(pa.array(times, field.type))
        elif name == "node":
            arrays.append(pa.array(nodes, field.type))
        elif name == "incarnation":
            arrays.append(pa.array(incs, field.type))
        elif name == "node_seq":
            arrays.append(pa.array(seqs, field.type))
        elif name == "kind":
            arrays.append(pa.array([cls.kind] * n, field.type))
        elif name in columns:
            arrays.append(pa.array(columns[name], field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    # A sort key for the rows' original order: (incarnation, node_seq) within one node's file.
    key = [(r.incarnation << 40) + r.node_seq for r in recs] if not cls.is_batch else None
    if key is None:
        key = []
        for rec in recs:
            base = (rec.incarnation << 40) + rec.node_seq
            key += range(base, base + rec.event.row_count)
    arrays.append(pa.array(key, pa.int64()))
    return pa.Table.from_arrays(arrays, schema=SCHEMA.append(pa.field("_order", pa.int64())))


class HistoryWriter:
    """An event sink writing `directory/<node>-<part>.parquet` (one node's rows, when it reached
    `roll_rows`) and `directory/nodes-<part>.parquet` (every node's pending rows).

    Invariant: `_pending[node]` holds the node's events not yet in a file, in the order they came;
    each file holds, per node in it, a contiguous run of that node's rows, one node after another."""

    def __init__(self, directory: Path, *, roll_rows: int = 50_000, roll_seconds: float = 5.0) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.roll_rows = roll_rows
        self.roll_seconds = roll_seconds
        self._pending: dict[str, list[EventRecord]] = defaultdict(list)
        self._pending_rows: dict[str, int] = defaultdict(int)
        self._parts: dict[str, int] = defaultdict(int)
        self._last_roll = time.monotonic()
        self.rows = 0  # rows written or pending
        self.files = 0

    def __call__(self, rec: EventRecord) -> None:
        node = rec.node
        self._pending[node].append(rec)
        n = rec.event.row_count
        self._pending_rows[node] += n
        self.rows += n
        if self._pending_rows[node] >= self.roll_rows:
            self._write(node)
        elif time.monotonic() - self._last_roll >= self.roll_seconds:
            self.flush()

    def flush(self) -> None:
        """Write every node's pending events, as one file."""
        nodes = [node for node, records in self._pending.items() if records]
        if nodes:
            tables = [events_table(self._pending[node]) for node in nodes]
            self._write_file(ALL_NODES, pa.concat_tables(tables))
        self._pending.clear()
        self._pending_rows.clear()
        self._last_roll = time.monotonic()

    def _write(self, node: str) -> None:
        records = self._pending.pop(node, None)
        self._pending_rows.pop(node, None)
        if records:
            self._write_file(node, events_table(records))

    def _write_file(self, prefix: str, table: pa.Table) -> None:
        part = self._parts[prefix]
        self._parts[prefix] = part + 1
        name = f"{prefix}-{part:05d}{SUFFIX}"
        partial = self.directory / f".{name}.partial"
        pq.write_table(table, partial)
        os.replace(partial, self.directory / name)
        self.files += 1

    def close(self) -> None:
        self.flush()


def history_files(directory: Path) -> list[Path]:
    """The complete files of a history (those still being written are left out)."""
    return sorted(p for p in Path(directory).iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith("."))


def read_history(directory: Path) -> pa.Table:
    """Every row of a run's history, in time order (within a node, in `node_seq` order)."""
    files = history_files(directory)
    if not files:
        return SCHEMA.empty_table()
    table = pa.concat_tables([pq.read_table(f, schema=SCHEMA) for f in files])
    return table.sort_by([("time_ms", "ascending"), ("node", "ascending"), ("incarnation", "ascending"), ("node_seq", "ascending")])


def read_kinds(directory: Path, kinds: tuple[str, ...], columns: tuple[str, ...]) -> list[dict]:
    """The rows of a few kinds, a few columns each, read with Parquet's own filter: the cost of a
    rare kind, not of the whole history."""
    files = history_files(directory)
    if not files:
        return []
    wanted = [c for c in dict.fromkeys(("kind", "time_ms", *columns)) if c in SCHEMA.names]
    table = pa.concat_tables([pq.read_table(f, columns=wanted, filters=[("kind", "in", list(kinds))], schema=SCHEMA) for f in files])
    return table.sort_by([("time_ms", "ascending")]).to_pylist()


def read_rows(directory: Path, kind: str | None = None) -> list[dict]:
    """The history as dicts (tests and small runs), optionally of one kind, without null columns."""
    table = read_history(directory)
    if kind is not None:
        table = table.filter(pc.equal(table["kind"], kind))
    return [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist()]
