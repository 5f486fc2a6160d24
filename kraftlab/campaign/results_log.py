"""The campaign's results log: one JSON line per finished run, appended and fsynced before the run
counts as done, so a campaign killed at any moment (kill -9 included) loses no finished run.

Only the last line can be torn (a kill in the middle of a write): reading drops it, and opening
for append cuts it off first, so the next line starts on a line of its own. A run found twice (it
cannot be, but a log is data from outside) counts once, its first line. `results.parquet` is
rebuilt from the log (written aside, then renamed into place), never appended to.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

LOG_NAME = "results.jsonl"
TAIL_CHUNK = 1 << 16
LIST_COLUMNS = ("violations", "excused", "beyond_tolerance")  # list<string>, also when every list is empty
# Columns whose type does not depend on whether any run had a value: campaigns read together must
# agree (`first_violation_ms` is null in a campaign where nothing broke).
FIXED_TYPES = {"first_violation_ms": pa.float64()}
PARQUET_NAME = "results.parquet"


def iter_log(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete row of the log, in the order written, one line at a time (a run's first row
    only)."""
    if not path.is_file():
        return
    seen: set[str] = set()
    with path.open("rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break  # torn by a kill: the run was not done
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            run = str(row["run"])
            if run not in seen:
                seen.add(run)
                yield row


def read_log(path: Path) -> dict[str, dict[str, Any]]:
    """Every complete row of the log, by run, in the order written (all in memory: for small logs)."""
    return {str(row["run"]): row for row in iter_log(path)}


class LogRows:
    """The log's rows, to be read more than once (write_parquet reads them twice) without holding them."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter_log(self.path)


class ResultsLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._cut_torn_tail()
        self._file = path.open("ab")

    def _cut_torn_tail(self) -> None:
        """Cut a torn last line, reading back from the end only as far as the last newline."""
        if not self.path.is_file():
            return
        with self.path.open("r+b") as f:
            end = f.seek(0, os.SEEK_END)
            pos = end
            while pos > 0:
                start = max(0, pos - TAIL_CHUNK)
                f.seek(start)
                chunk = f.read(pos - start)
                if pos == end and chunk.endswith(b"\n"):
                    return  # the last line is whole
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    pos = start + newline + 1
                    break
                pos = start
            f.truncate(pos)
            os.fsync(f.fileno())

    def append(self, row: dict[str, Any]) -> None:
        self._file.write(json.dumps(row, sort_keys=False, default=str).encode() + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


BATCH_ROWS = 2_000  # rows converted and written at a time


def write_parquet(rows: Iterable[dict[str, Any]], path: Path, first_columns: list[str]) -> int:
    """`results.parquet` from the rows: `first_columns` first (run, seed, the matrix keys, ...),
    then every other column any row has, in the order first seen. Returns the number of rows.

    Two passes over `rows` (a list, or LogRows to read a log twice): the first finds the columns
    and their types, the second writes BATCH_ROWS at a time, so the memory is a batch's, whatever
    the number of runs."""
    if iter(rows) is rows:  # a one-pass iterator: it cannot be read twice
        rows = list(rows)
    kinds: dict[str, set[str]] = {c: set() for c in first_columns}  # ordered, and a set: rows may have hundreds of columns
    for row in rows:
        for key, value in row.items():
            seen = kinds.setdefault(key, set())
            if value is not None:
                seen.add(_kind(value))
    schema = pa.schema([pa.field(c, _column_type(c, seen)) for c, seen in kinds.items()])
    columns = schema.names
    text = {f.name for f in schema if f.type == pa.string()}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    count = 0
    with pq.ParquetWriter(tmp, schema) as writer:
        it = iter(rows)
        while batch := list(itertools.islice(it, BATCH_ROWS)):
            writer.write_table(pa.Table.from_pylist(
                [{c: _as_text(row.get(c)) if c in text else row.get(c) for c in columns} for row in batch], schema=schema))
            count += len(batch)
    os.replace(tmp, path)
    return count


def _as_text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "other"


def _column_type(column: str, kinds: set[str]) -> pa.DataType:
    """One type per column, from the kinds of its values: a column mixing ints and floats is float;
    `violations` is list<string> even when every list is empty."""
    if column in LIST_COLUMNS:
        return pa.list_(pa.string())
    if column in FIXED_TYPES:
        return FIXED_TYPES[column]
    if kinds == {"bool"}:
        return pa.bool_()
    if kinds == {"int"}:
        return pa.int64()
    if kinds and kinds <= {"int", "float"}:
        return pa.float64()
    return pa.string()  # text, no value yet, or a matrix key whose values differ in type
