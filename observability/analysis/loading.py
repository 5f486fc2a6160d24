"""What `kraftlab analyze` reads: one run directory, or a campaign directory of many, as one
Spark DataFrame with a `run` column (docs/reference/events.md).

A campaign is analyzed as one dataset, not run after run: every check groups by `run` (a single
run is a dataset of one run), so the number of Spark jobs does not grow with the number of runs.

Layouts:
- a run directory: `RUN_DIR/events/*.parquet` (`run` is the directory's name);
- a campaign directory: `CAMPAIGN_DIR/runs/<run>/events/*.parquet`, each `<run>` a run directory,
  and optionally `CAMPAIGN_DIR/results.parquet` (one row per run: `run`, `seed`, one column per
  matrix key named by its dotted path) naming the runs that should be there and their matrix cell.

The input is checked before Spark sees it, so that bad input gets a message naming the path rather
than a JVM error: the directories exist, they hold complete files (names ending in `.parquet`; a
file still being written has another name and is left out, as the writer promises), and each
file's Parquet footer reads (a truncated or corrupt file has none). In a campaign, a run whose
history cannot be read is left out and reported (`missing`); only a campaign with no readable run
at all is bad input. Spark's own failures while reading are caught and re-raised with the path.
A run whose history the campaign removed on purpose (`--keep-runs failures`) is neither: it is
counted apart (`not_kept`).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from pyspark.sql import DataFrame
from pyspark.sql.types import DataType, StructField, StructType

from observability.history import history_files

from .anomalies import HistoryViews
from .columns import Layout, Signature
from .errors import AnalysisInputError

# A run id must survive the trip through a file URI unchanged (Spark's `input_file_name` is
# URI-encoded), so campaigns name run folders with these characters only.
RUN_ID = re.compile(r"^[A-Za-z0-9._=,-]+$")
# results.parquet columns that are not matrix keys (docs/reference/campaign-format.md).
RESULT_COLUMNS = frozenset({"run", "seed", "status", "violations", "signature", "replay", "error", "traceback", "cell",
                            "excused", "beyond_tolerance", "faults", "first_violation_ms", "history_kept"})


@dataclass
class Dataset:
    """The runs to analyze. Invariant: every run in `runs` has at least one readable history file
    (`files[run]`); a run listed by results.parquet but not readable is in `missing`, with why."""

    root: Path
    campaign: bool
    runs: dict[str, Path]  # run id -> run directory, sorted by id
    files: dict[str, list[Path]]
    missing: dict[str, str] = field(default_factory=dict)
    # Runs whose history the campaign removed on purpose (`kraftlab campaign --keep-runs failures`:
    # runs that found nothing, `history_kept` false in results.parquet): neither analyzed nor missing.
    not_kept: set[str] = field(default_factory=set)
    # Per run: its matrix cell ({dotted key: value}) and seed, from results.parquet (campaigns).
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)
    seeds: dict[str, int] = field(default_factory=dict)
    matrix_keys: list[str] = field(default_factory=list)
    # The readable files grouped by their columns and types (columns.py; one group for kraftlab's runs).
    layout: Layout = field(default_factory=lambda: Layout(COLUMNS))
    column_types: dict[str, DataType] = field(default_factory=dict)  # each of COLUMNS: its one type (`Layout.unify`)

    @property
    def all_files(self) -> list[Path]:
        return [p for run in self.runs for p in self.files[run]]


def event_files(run_dir: Path) -> list[tuple[Path, pa.Schema]]:
    """The history's complete Parquet files, each checked to have a readable footer, with the
    schema it declares."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AnalysisInputError(f"{run_dir}: no such run directory (expected a folder written by `kraftlab run`)")
    events = run_dir / "events"
    if not events.is_dir():
        raise AnalysisInputError(f"{events}: no events/ folder (expected the run's history, Parquet files per node)")
    files = history_files(events)
    if not files:
        raise AnalysisInputError(f"{events}: no history files (expected files ending in .parquet)")
    found = []
    for path in files:
        try:
            # The footer only: cheap, and what a truncated file lacks.
            found.append((path, pq.read_metadata(path).schema.to_arrow_schema()))
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError... for a bad file
            raise AnalysisInputError(f"{path}: not a readable Parquet file ({exc})") from None
    return found


def is_campaign(path: Path) -> bool:
    path = Path(path)
    return not (path / "events").is_dir() and ((path / "runs").is_dir() or (path / "results.parquet").is_file())


def discover(path: Path) -> Dataset:
    """The runs under `path` (a run or a campaign directory), their files checked."""
    path = Path(path)
    if not path.is_dir():
        raise AnalysisInputError(f"{path}: no such directory (expected a run directory written by `kraftlab run` "
                                 "or a campaign directory written by `kraftlab campaign`)")
    if not is_campaign(path):
        if not (path / "events").is_dir():
            raise AnalysisInputError(f"{path / 'events'}: no events/ folder (expected a run directory with its "
                                     "history, or a campaign directory with runs/ or results.parquet)")
        dataset = Dataset(path, False, {path.name: path}, {})
        dataset.files[path.name] = _laid_out(dataset, event_files(path))
        dataset.column_types = dataset.layout.unify()  # files that disagree are bad input, before Spark starts
        return dataset
    return _discover_campaign(path)


def _laid_out(dataset: Dataset, files: list[tuple[Path, pa.Schema]]) -> list[Path]:
    for path, schema in files:
        dataset.layout.add(path, schema)
    return [path for path, _ in files]


def _discover_campaign(path: Path) -> Dataset:
    cells, seeds, matrix_keys, not_kept = _results(path)
    runs_dir = path / "runs"
    found = sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    dataset = Dataset(path, True, {}, {}, cells=cells, seeds=seeds, matrix_keys=matrix_keys, not_kept=not_kept)
    for run_dir in found:
        if run_dir.name in not_kept and not (run_dir / "events").is_dir():
            continue
        if not RUN_ID.match(run_dir.name):
            dataset.missing[run_dir.name] = f"{run_dir}: run folder name not a run id (letters, digits, . _ = , - only)"
            continue
        try:
            files = event_files(run_dir)
        except AnalysisInputError as exc:
            dataset.missing[run_dir.name] = str(exc)
            continue
        dataset.files[run_dir.name] = _laid_out(dataset, files)
        dataset.runs[run_dir.name] = run_dir
    dataset.not_kept -= set(dataset.runs)  # kept after all (a resumed campaign ran it again with --keep-runs all)
    for run in sorted(set(cells) - set(dataset.runs) - set(dataset.missing) - dataset.not_kept):
        dataset.missing[run] = f"{runs_dir / run}: listed in results.parquet, no run directory"
    if not dataset.runs:
        why = "; ".join(list(dataset.missing.values())[:3]) or f"{runs_dir}: no run directories"
        if dataset.not_kept:
            why += f"; {len(dataset.not_kept)} runs found nothing and their histories were not kept (--keep-runs failures)"
        raise AnalysisInputError(f"{path}: a campaign directory with no run to analyze ({why})")
    dataset.column_types = dataset.layout.unify()  # files that disagree are bad input, before Spark starts
    return dataset


def _results(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, int], list[str], set[str]]:
    """Each run's matrix cell and seed from results.parquet (absent: no cells), the matrix keys
    (those of `campaign.yaml`'s `matrix` when the campaign left its file there, else the results
    columns named by a dotted path), and the runs whose history was not kept."""
    results = path / "results.parquet"
    if not results.is_file():
        return {}, {}, [], set()
    try:
        columns = pq.read_schema(results).names
        if "run" not in columns:
            raise AnalysisInputError(f"{results}: no `run` column (expected one row per run: run, seed, matrix keys)")
        keys = _matrix_keys(path, columns)
        # Only the columns read here: a campaign's row has some sixty (the summary's stats), and
        # 100,000 rows of them as Python objects would be a gigabyte.
        wanted = ["run", *(c for c in ("seed", "history_kept") if c in columns), *(k for k in keys if k not in ("seed", "history_kept"))]
        rows = pq.read_table(results, columns=wanted).to_pylist()
    except AnalysisInputError:
        raise
    except Exception as exc:
        raise AnalysisInputError(f"{results}: not a readable Parquet file ({exc})") from None
    cells = {str(r["run"]): {k: r.get(k) for k in keys} for r in rows}
    seeds = {str(r["run"]): r["seed"] for r in rows if r.get("seed") is not None}
    not_kept = {str(r["run"]) for r in rows if r.get("history_kept") is False}
    return cells, seeds, keys, not_kept


def _matrix_keys(path: Path, columns: list[str]) -> list[str]:
    campaign = path / "campaign.yaml"
    if campaign.is_file():
        try:
            spec = yaml.safe_load(campaign.read_text()) or {}
        except yaml.YAMLError as exc:
            raise AnalysisInputError(f"{campaign}: not YAML ({exc})") from None
        # A campaign's cells: its variant (when it names variants) and its matrix keys.
        keys = (["variant"] if spec.get("variants") else []) + list(spec.get("matrix") or {})
        return [k for k in keys if k in columns]
    return [c for c in columns if "." in c and c not in RESULT_COLUMNS and not c.startswith("stats.")]


# The columns the checks read; the files have about a hundred (every kind's), and caching only
# these keeps the cache, and every scan of it, small.
COLUMNS = ("time_ms", "node", "incarnation", "node_seq", "kind", "producer", "sequence", "topic", "topic_id", "partition",
           "acks", "outcome", "offset", "latency_ms", "consumer", "poll", "broker", "complete",
           # windows.py: partition states and faults
           "leader", "isr", "metadata_offset", "fault", "target",
           # invariants.py: metadata, elections, brokers and the quorum
           "leader_epoch", "partition_epoch", "replicas", "elr", "min_isr", "election_kind", "epoch", "fenced",
           "clean",
           # truncations.py: replicas' local HWMs and log cuts, and the batches appended around a cut
           "hwm", "last_epoch", "from_offset", "reason", "count", "batch_crc")


# The protocol's kinds the checks read (`History.control`): committed metadata, elections, roles,
# replicas' HWMs and cuts, faults, where consumers started reading, and how the load consumers
# and the final read ended. Not the appends (a tenth of the rows; no check reads them) nor storage
# and Raft log details.
CONTROL_KINDS = ("partition_change", "broker_change", "election", "raft_leader_elected", "become_leader",
                 "become_follower", "broker_registered", "replica_recovered", "replica_hwm", "replica_deleted",
                 "truncated", "beyond_tolerance", "fault", "consumer_done", "consumer_seek", "final_read_done")


@dataclass
class History:
    """A dataset's history as the checks read it.

    Why not one cached DataFrame of every row: building Spark's in-memory cache costs about 3 µs a
    row for the 38 columns (33 s of 10 million rows here, where a scan of the files for a few
    columns takes 1-3 s), and a cache that size no longer fits a small executor, so every later job
    spilled or read it again. Caching the record-level rows as narrow views cost 20 s of the 30 s
    left, for jobs that each read a view once or twice. So the record-level rows are scanned from
    the files by the few jobs that read them (anomalies.py aggregates them once per record, and
    caches that), the protocol's rows the checks read (about 3% of the rows, read by twenty
    jobs) are cached whole, and the whole-history aggregations scan the files."""

    rows: DataFrame  # every row (`run` and COLUMNS), not cached: scanned by whole-history aggregations
    control: DataFrame  # cached: the rows of CONTROL_KINDS (the protocol's events the checks read)
    views: HistoryViews  # the record-level rows the anomaly checks read, as selections of `rows`

    def unpersist(self) -> None:
        self.views.unpersist()
        self.control.unpersist()


def load_history(spark, dataset: Dataset) -> History:
    """Every run's history (the columns the checks read, and `run`), its cached parts built now:
    every file is read here, so that a bad page fails here, named, not in a check."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    try:
        if dataset.campaign:
            run = F.regexp_extract(F.input_file_name(), r"/runs/([^/]+)/events/[^/]+$", 1)
        else:
            run = F.lit(next(iter(dataset.runs)))
        rows = reduce(DataFrame.unionByName, (_read_group(spark, signature, files, run, dataset.column_types)
                                              for signature, files in dataset.layout.groups.items()))
        # Building the control cache decodes every page of every column read (a filter applies
        # after a page is decoded), so a corrupt page anywhere fails here.
        control = rows.where(F.col("kind").isin(*CONTROL_KINDS)).cache()
        control.count()
        views = HistoryViews.of(rows)
    except (PySparkException, Py4JError) as exc:
        _raise_if_a_file_is_unreadable(dataset)
        where = dataset.root if dataset.campaign else dataset.root / "events"
        raise AnalysisInputError(f"{where}: Spark could not read the history ({_java_reason(exc)})") from None
    return History(rows, control, views)


@contextmanager
def unreadable_files_named(dataset: Dataset):
    """Spark decodes a file's pages only when a job reads them, and the record-level files only
    when a check does (the control cache's filter skips them by their `kind` dictionaries): a
    corrupt page there fails a check, not the loading. Such a failure is bad input too: exit 2
    naming the file, not a Java stack trace. Costs nothing unless Spark fails."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError):
        _raise_if_a_file_is_unreadable(dataset)
        raise


def _raise_if_a_file_is_unreadable(dataset: Dataset) -> None:
    """After Spark failed: the first file pyarrow cannot decode whole is bad input, named with why.
    (A corrupt page inside a file with a sound footer gets past the footer checks of `discover`;
    Spark's own error names a task, not always the file.)"""
    import pyarrow.parquet as pq

    for files in dataset.layout.groups.values():
        for path in files:
            try:
                pq.read_table(path)
            except Exception as exc:  # noqa: BLE001 (any decoding error names this file)
                text = str(exc).strip()
                reason = text.splitlines()[0] if text else type(exc).__name__
                raise AnalysisInputError(f"{path}: cannot read this history file ({reason})") from None


def _read_group(spark, signature: Signature, files: list[Path], run, types: dict[str, DataType]) -> DataFrame:
    """The files of one signature (columns.py), read with its own schema, as `run` and COLUMNS in
    the dataset's types; a column the group lacks or holds only as nulls reads as null."""
    from pyspark.sql import functions as F

    present = [(name, dtype) for name, dtype in signature if dtype is not None]
    schema = StructType([StructField(name, dtype) for name, dtype in present])
    df = spark.read.schema(schema).parquet(*[str(p) for p in files])
    have = {name for name, _ in present}
    return df.select(run.alias("run"), *((F.col(c) if c in have else F.lit(None)).cast(types[c]).alias(c) for c in COLUMNS))


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
