"""What the report reads, without Spark: `checks.json` and `windows.parquet` from the analysis
folder, and from a run's `events/` only the rows the plots need (pyarrow, a filter on `kind` and a
few columns), so that a history of millions of events costs a scan of a handful of columns."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from observability.fault_rows import NETWORK_FAULTS, RESTART_ENDED_FAULTS, fault_undone_by
from observability.history import SCHEMA as HISTORY_SCHEMA

from .errors import AnalysisInputError

PARTITION_KEY = ("topic", "partition", "metadata_offset")


def read_checks(out_dir: Path) -> dict[str, Any]:
    path = Path(out_dir) / "checks.json"
    if not path.is_file():
        raise AnalysisInputError(f"{path}: no checks.json to report on (run `kraftlab analyze` first)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AnalysisInputError(f"{path}: not JSON ({exc})") from None


def read_windows(out_dir: Path) -> pa.Table:
    path = Path(out_dir) / "windows.parquet"
    if not path.is_file():
        raise AnalysisInputError(f"{path}: no windows.parquet to report on (run `kraftlab analyze` first)")
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise AnalysisInputError(f"{path}: not a Parquet file ({exc})") from None


def _events(run_dir: Path) -> ds.Dataset | None:
    """The run's history as one dataset of every column any file has (a pyarrow dataset would take
    one file's columns for all: columns.py says why files may differ), the others as declared in
    events.py, so that a column read is there, null where a file lacks it."""
    # Only complete files: one still being written has a name not ending in .parquet (docs/reference).
    files = sorted(str(p) for p in (Path(run_dir) / "events").glob("*.parquet"))
    if not files:
        return None
    try:
        schema = pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
        raise AnalysisInputError(f"{Path(run_dir) / 'events'}: files whose columns disagree ({exc})") from None
    for declared in HISTORY_SCHEMA:
        if declared.name not in schema.names:
            schema = schema.append(declared)
    return ds.dataset(files, format="parquet", schema=schema)


def _first_of_each_key(table: pa.Table, key: tuple[str, ...]) -> pa.Table:
    """The first row of each run of equal `key` values in a table sorted by `key`."""
    if table.num_rows == 0:
        return table
    differs = None
    for name in key:
        col = table.column(name).combine_chunks()
        d = pc.not_equal(col.slice(1), col.slice(0, len(col) - 1))
        differs = d if differs is None else pc.or_(differs, d)
    changed = pa.concat_arrays([pa.array([True]), pc.fill_null(differs, True)])
    return table.filter(changed)


def partition_states(run_dir: Path) -> pa.Table:
    """Each committed partition record once: (topic, partition, metadata_offset, time_ms, leader,
    isr_size, elr_size, last_known_elr_size), ordered by topic, partition, metadata_offset.

    Every controller voter writes a `partition_change` row for each committed record; rows are
    deduped on (topic, partition, metadata_offset) keeping the earliest time_ms, as
    windows.partition_states does, so the plot and windows.parquet agree."""
    dataset = _events(run_dir)
    columns = ["time_ms", "topic", "partition", "metadata_offset", "leader", "isr", "elr", "last_known_elr"]
    if dataset is None:
        table = pa.table({c: [] for c in columns})
    else:
        table = dataset.to_table(columns=columns, filter=pc.field("kind") == "partition_change")
    table = table.sort_by([(c, "ascending") for c in PARTITION_KEY] + [("time_ms", "ascending")])
    table = _first_of_each_key(table, PARTITION_KEY)

    def size(name: str) -> pa.Array:
        return pc.fill_null(pc.list_value_length(table.column(name)), 0) if table.num_rows else pa.array([], pa.int32())

    return pa.table({
        "topic": table.column("topic"), "partition": table.column("partition"),
        "metadata_offset": table.column("metadata_offset"), "time_ms": table.column("time_ms"),
        "leader": table.column("leader"),
        "isr_size": size("isr"), "elr_size": size("elr"), "last_known_elr_size": size("last_known_elr"),
    })


@dataclass(frozen=True)
class FaultSpan:
    fault: str
    target: str
    start_ms: float
    end_ms: float | None  # None: never undone, it lasts to the end of the run

    @property
    def label(self) -> str:
        return f"{self.fault} {self.target}"


def fault_spans(run_dir: Path) -> list[FaultSpan]:
    """The faults the driver applied, each with the first later `fault` row that undoes it (the
    driver's order: time_ms, then node_seq), as windows.fault_intervals computes them."""
    dataset = _events(run_dir)
    if dataset is None:
        return []
    rows = (dataset.to_table(columns=["time_ms", "node_seq", "fault", "target"], filter=pc.field("kind") == "fault")
            .sort_by([("time_ms", "ascending"), ("node_seq", "ascending")]).to_pylist())
    spans = []
    for i, start in enumerate(rows):
        if start["fault"] not in RESTART_ENDED_FAULTS + NETWORK_FAULTS:
            continue
        end = next((e for e in rows[i + 1:] if fault_undone_by(start["fault"], start["target"], e["fault"], e["target"])), None)
        spans.append(FaultSpan(start["fault"], start["target"], start["time_ms"], end["time_ms"] if end else None))
    return spans

