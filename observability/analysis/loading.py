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


# The columns the checks read; the files have about a hundred (every kind's), and caching only
# these keeps the cache, and every scan of it, small.
COLUMNS = ("time_ms", "node", "incarnation", "node_seq", "kind", "producer", "sequence", "topic", "partition",
           "acks", "outcome", "offset", "latency_ms", "consumer", "poll", "broker", "complete",
           # windows.py: partition states and faults
           "leader", "isr", "metadata_offset", "fault", "target")


def load_history(spark, run_dir: Path):
    """Every row of the run's history (the columns the checks read), as one DataFrame, cached:
    every check reads it again."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    files = event_files(run_dir)
    try:
        df = spark.read.parquet(*[str(p) for p in files]).select(*COLUMNS).cache()
        df.count()  # read every file now, so that a bad page fails here, named, not in a check
    except (PySparkException, Py4JError) as exc:
        raise AnalysisInputError(f"{Path(run_dir) / 'events'}: Spark could not read the history ({_java_reason(exc)})") from None
    return df


def _java_reason(exc: Exception) -> str:
    """One line saying why, without the Java stack trace: the message in the JVM's chain of
    causes that names a file (Spark says which file it was reading), else the innermost one."""
    lines: list[str] = []
    cause = getattr(exc, "java_exception", None)
    while cause is not None and len(lines) < 20:
        text = str(cause.toString()).strip()
        if text:
            lines.append(text.splitlines()[0])
        cause = cause.getCause()
    if not lines:
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return next((line for line in lines if ".parquet" in line), lines[-1])
