"""A run's history as one Spark DataFrame (contract.md, "`events/`: the history").

The input is checked before Spark sees it, so that bad input gets a message naming the path rather
than a JVM error: the directory and `events/` exist, they hold complete files (names ending in
`.parquet`; a file still being written has another name and is left out, as the writer promises),
and each file's Parquet footer reads (a truncated or corrupt file has none). Spark's own failures
while reading are caught too and re-raised with the files' directory.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from observability.history import history_files

from .errors import AnalysisInputError


def event_files(run_dir: Path) -> list[Path]:
    """The history's complete Parquet files, each checked to have a readable footer."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AnalysisInputError(f"{run_dir}: no such run directory (expected a folder written by `kraftlab run`)")
    events = run_dir / "events"
    if not events.is_dir():
        raise AnalysisInputError(f"{events}: no events/ folder (expected the run's history, Parquet files per node)")
    files = history_files(events)
    if not files:
        raise AnalysisInputError(f"{events}: no history files (expected files ending in .parquet)")
    for path in files:
        try:
            pq.read_metadata(path)  # the footer only: cheap, and what a truncated file lacks
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError... for a bad file
            raise AnalysisInputError(f"{path}: not a readable Parquet file ({exc})") from None
    return files


def load_history(spark, run_dir: Path):
    """Every row of the run's history (the contract's columns), as one DataFrame, cached: every
    check reads it again."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    files = event_files(run_dir)
    try:
        df = spark.read.parquet(*[str(p) for p in files]).cache()
        df.count()  # read every file now, so that a bad page fails here, named, not in a check
    except (PySparkException, Py4JError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AnalysisInputError(f"{Path(run_dir) / 'events'}: Spark could not read the history ({first_line})") from None
    return df
