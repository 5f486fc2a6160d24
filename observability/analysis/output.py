"""Files of `analysis/`, written atomically: a temporary name in the same directory, then a
rename, so that a reader (or a crash) never sees a half-written file."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary name beside `path` to write to; renamed to `path` when the block ends without
    an error, removed when it fails. Same directory: os.replace is atomic only within one file
    system."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes the file private (0600); the result is an ordinary file, readable as the
        # user's umask allows (0644 under the usual 022), as every other file of a run is.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it: set it back at once
    os.umask(mask)
    return mask


def write_json_atomically(path: Path, value: Any) -> None:
    write_bytes_atomically(path, (json.dumps(value, indent=2, sort_keys=False) + "\n").encode("utf-8"))


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """`data` as the whole file, renamed into place once written (checks.json, the report)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_table_atomically(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as one Parquet file (types inferred), written under a temporary name and renamed."""
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
