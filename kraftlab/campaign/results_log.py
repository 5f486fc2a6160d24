"""The campaign's results log: one JSON line per finished run, appended and fsynced before the run
counts as done, so a campaign killed at any moment (kill -9 included) loses no finished run.

Only the last line can be torn (a kill in the middle of a write): reading drops it, and opening
for append cuts it off first, so the next line starts on a line of its own. A run found twice (it
cannot be, but a log is data from outside) counts once, its first line. `results.parquet` is
rebuilt from the log (written aside, then renamed into place), never appended to.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
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


def read_log(path: Path) -> dict[str, dict[str, Any]]:
    """Every complete row of the log, by run, in the order written."""
    rows: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return rows
    with path.open("rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break  # torn by a kill: the run was not done
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            rows.setdefault(str(row["run"]), row)
    return rows


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


def write_parquet(rows: Iterable[dict[str, Any]], path: Path, first_columns: list[str]) -> int:
    """`results.parquet` from the rows: `first_columns` first (run, seed, the matrix keys, ...),
    then every other column any row has, in the order first seen. Returns the number of rows."""
    rows = list(rows)
    seen = dict.fromkeys(first_columns)  # ordered, and a set: rows may have hundreds of columns
    for row in rows:
        for key in row:
            seen.setdefault(key)
    columns = list(seen)
    schema = _schema(rows, columns)
    text = {f.name for f in schema if f.type == pa.string()}
    table = pa.Table.from_pylist(
        [{c: _as_text(row.get(c)) if c in text else row.get(c) for c in columns} for row in rows], schema=schema)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return len(rows)


def _as_text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _schema(rows: list[dict[str, Any]], columns: list[str]) -> pa.Schema:
    """One type per column, from its values: a column mixing ints and floats is float; `violations`
    is list<string> even when every list is empty."""
    fields = []
    for c in columns:
        values = [r.get(c) for r in rows if r.get(c) is not None]
        if c in LIST_COLUMNS:
            kind = pa.list_(pa.string())
        elif c in FIXED_TYPES:
            kind = FIXED_TYPES[c]
        elif values and all(isinstance(v, bool) for v in values):
            kind = pa.bool_()
        elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            kind = pa.int64()
        elif values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            kind = pa.float64()
        else:
            kind = pa.string()  # text, no value yet, or a matrix key whose values differ in type
        fields.append(pa.field(c, kind))
    return pa.schema(fields)
