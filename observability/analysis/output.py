"""Files of `analysis/`, written atomically: a temporary name in the same directory, then a
rename, so that a reader (or a crash) never sees a half-written file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def write_json_atomically(path: Path, value: Any) -> None:
    write_bytes_atomically(path, (json.dumps(value, indent=2, sort_keys=False) + "\n").encode("utf-8"))


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """`data` as the whole file, renamed into place once written (checks.json, the report)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as the target: os.replace is atomic only within one file system.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_table_atomically(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as one Parquet file (types inferred), written under a temporary name and renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
