"""Per-second windows of a run (`windows.parquet`, docs/reference/analysis.md) and the overall
figures derived from them (`throughput_rec_s`, `offline_s`, `unavailable_s` in checks.json
`stats`), as shallow DataFrame jobs: groupBy, window functions, joins, no Python UDF.

One row per run and second of run time, `second` = floor(time_ms / 1000), from 0 to the last
second of that run's history (every second present, empty ones too); `run` names the run
(loading.py: a campaign is one dataset):

- `acked`, `acked_per_s`: records acknowledged with outcome ok whose `produce_ack` falls in it;
- `latency_p50_ms`, `latency_p99_ms`, `latency_p999_ms`, `latency_max_ms`: of those acks'
  `latency_ms`, null when there are none. EXACT percentiles: Spark's `percentile` (linear
  interpolation between the closest ranks), as checks.json `stats.latency_ms`;
- `partitions_offline`, `partitions_under_min_isr`: the committed partition state at the end of
  the window (see `partition_states`);
- `faults_active`: faults active at some moment of the window (see `fault_intervals`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from observability.fault_rows import FAULT_TARGET_SEPARATORS, NETWORK_FAULTS, RESTART_ENDED_FAULTS

from .committed import committed_partitions
from .loading import History
from .output import atomic_path

WINDOW_MS = 1000

SCHEMA = pa.schema([
    ("run", pa.string()),
    ("second", pa.int64()),
    ("acked", pa.int64()),
    ("acked_per_s", pa.float64()),
    ("latency_p50_ms", pa.float64()),
    ("latency_p99_ms", pa.float64()),
    ("latency_p999_ms", pa.float64()),
    ("latency_max_ms", pa.float64()),
    ("partitions_offline", pa.int64()),
    ("partitions_under_min_isr", pa.int64()),
    ("faults_active", pa.int64()),
])



def min_isr_rule(run_dir: Path) -> tuple[int, dict[str, int]]:
    """min.insync.replicas as the run's `scenario.yaml` set it: the topic's own
    `topics[].config["min.insync.replicas"]` when set, else `cluster.config["min.insync.replicas"]`,
    else 1 (Kafka's default). The configured value, not the effective min(MinISR, RF): a partition
    is under MinISR when size(isr) < that value, as Kafka's UnderMinIsrPartitionCount counts.
    A history without `scenario.yaml` (hand-built) gets 1. Changes by an `alter_config` step during
    the run are not followed."""
    path = Path(run_dir) / "scenario.yaml"
    raw: dict[str, Any] = {}
    if path.is_file():
        raw = yaml.safe_load(path.read_text()) or {}
    cluster_value = ((raw.get("cluster") or {}).get("config") or {}).get("min.insync.replicas")
    default = int(cluster_value) if cluster_value is not None else 1
    per_topic = {}
    for topic in raw.get("topics") or []:
        value = (topic.get("config") or {}).get("min.insync.replicas")
        if value is not None:
            per_topic[str(topic["name"])] = int(value)
    return default, per_topic


def min_isr_tables(spark, runs: dict[str, Path]) -> tuple[DataFrame, DataFrame]:
    """`min_isr_rule` of every run, as two small DataFrames: (run, run_min_isr) and
    (run, topic, topic_min_isr)."""
    defaults, overrides = [], []
    for run, run_dir in runs.items():
        default, per_topic = min_isr_rule(run_dir)
        defaults.append((run, default))
        overrides.extend((run, topic, value) for topic, value in sorted(per_topic.items()))
    return (spark.createDataFrame(defaults, "run string, run_min_isr long"),
            spark.createDataFrame(overrides, "run string, topic string, topic_min_isr long"))


def partition_states(history: DataFrame) -> DataFrame:
    """Each committed partition record, once, with the span of time it holds: (run, topic,
    partition, leader, isr, time_ms, until_ms; until null for the last). A record holds until the
    partition's next one, or until its topic is deleted (`topic_deleted`), whichever comes first.

    Each record from its earliest report (committed.py): the first moment any voter knew it
    committed."""
    changes = committed_partitions(history).select("run", "topic", "partition", "metadata_offset", "time_ms", "leader", "isr")
    order = Window.partitionBy("run", "topic", "partition").orderBy("metadata_offset")
    states = (changes.withColumn("until_ms", F.lead("time_ms").over(order))
              .withColumn("next_offset", F.lead("metadata_offset").over(order)))
    deletions = (history.where(F.col("kind") == "topic_deleted")
                 .groupBy("run", "topic", "metadata_offset").agg(F.min("time_ms").alias("deleted_ms")))
    ends = ((F.col("s.run") == F.col("d.run")) & (F.col("s.topic") == F.col("d.topic"))
            & (F.col("d.metadata_offset") > F.col("s.metadata_offset"))
            & (F.col("s.next_offset").isNull() | (F.col("d.metadata_offset") < F.col("s.next_offset"))))
    columns = ("run", "topic", "partition", "metadata_offset", "time_ms", "leader", "isr", "until_ms")
    return (states.alias("s").join(F.broadcast(deletions.alias("d")), ends, "left")
            .groupBy(*(F.col(f"s.{c}").alias(c) for c in columns)).agg(F.min("d.deleted_ms").alias("deleted_ms"))
            .select(*columns[:-1], F.coalesce("deleted_ms", "until_ms").alias("until_ms")))


def partition_seconds(history: DataFrame, runs: dict[str, Path], last: DataFrame) -> DataFrame:
    """Per run, partition and second: whether the partition had no leader (`offline`) and whether
    size(isr) < min.insync.replicas (`under_min_isr`, `min_isr_rule`), in the state committed at
    the end of the window (the last change at a time before (second + 1) * 1000). A partition not
    yet created at the end of a window has no row for it. `last`: (run, last_second)."""
    defaults, overrides = min_isr_tables(history.sparkSession, runs)
    states = partition_states(history).join(F.broadcast(last), "run")
    # The windows whose end the state holds at: time_ms < (w + 1) * 1000 <= until_ms.
    first = F.floor(F.col("time_ms") / WINDOW_MS).cast("long")
    end = F.when(F.col("until_ms").isNull(), F.col("last_second")).otherwise(
        F.floor(F.col("until_ms") / WINDOW_MS).cast("long") - 1)
    spans = states.withColumn("lo", first).withColumn("hi", F.least(end, F.col("last_second")))
    spans = spans.where(F.col("hi") >= F.col("lo"))  # changed again within the same second
    per_second = (spans.select("run", "topic", "partition", "leader", "isr", F.explode(F.sequence("lo", "hi")).alias("second"))
                  .join(F.broadcast(overrides), ["run", "topic"], "left")
                  .join(F.broadcast(defaults), "run", "left"))
    min_isr = F.coalesce(F.col("topic_min_isr"), F.col("run_min_isr"), F.lit(1))
    return per_second.select("run", "topic", "partition", "second", F.col("leader").isNull().alias("offline"),
                             (F.size("isr") < min_isr).alias("under_min_isr"))


def partition_windows(seconds: DataFrame) -> DataFrame:
    """Per run and second: partitions offline, and partitions under MinISR (`partition_seconds`)."""
    return (seconds.groupBy("run", "second")
            .agg(F.sum(F.col("offline").cast("long")).alias("partitions_offline"),
                 F.sum(F.col("under_min_isr").cast("long")).alias("partitions_under_min_isr")))


def fault_intervals(history: DataFrame) -> DataFrame:
    """Each fault the driver applied, with its span (run, start_ms, end_ms; end null: still active
    at the end of the history, so it lasts to the end).

    Matching rule: a fault ends at the first later `fault` row (in the driver's order: time_ms,
    then node_seq) that undoes it. `crash_process`, `crash_os`, `crash_disk`, `shutdown` and
    `fail_log_dir` of node X end at `restart` of X. `isolate`, `partition` and `link` end at `heal` of `all`, or at
    `heal` of a node the fault's target names (`b3` for isolate; any node of `b1,c1|b2,b3`; either
    end of `b1->b2`), since healing a node removes every network fault touching it, or at `heal` of
    that fault alone (`isolate:b3`, `partition:b1,c1|b2,b3`, `link:b1->b2`: a generated schedule's
    `undo`). (A partition healed for one of its nodes may still cut the others: it is counted as
    ended.)"""
    rows = history.where(F.col("kind") == "fault").select("run", "time_ms", "node_seq", "fault", "target")
    starts = rows.where(F.col("fault").isin(*RESTART_ENDED_FAULTS, *NETWORK_FAULTS)).alias("s")
    ends = rows.where(F.col("fault").isin("restart", "heal")).alias("e")
    later = ((F.col("e.time_ms") > F.col("s.time_ms"))
             | ((F.col("e.time_ms") == F.col("s.time_ms")) & (F.col("e.node_seq") > F.col("s.node_seq"))))
    undoes = (
        (F.col("s.fault").isin(*RESTART_ENDED_FAULTS) & (F.col("e.fault") == "restart") & (F.col("e.target") == F.col("s.target")))
        | (F.col("s.fault").isin(*NETWORK_FAULTS) & (F.col("e.fault") == "heal")
           & ((F.col("e.target") == "all")
              | (F.col("e.target") == F.concat(F.col("s.fault"), F.lit(":"), F.col("s.target")))  # fault_rows.undone_target
              | F.array_contains(F.split(F.col("s.target"), FAULT_TARGET_SEPARATORS), F.col("e.target")))))
    return (starts.join(ends, (F.col("e.run") == F.col("s.run")) & later & undoes, "left")
            .groupBy(F.col("s.run").alias("run"), F.col("s.time_ms").alias("start_ms"), F.col("s.node_seq").alias("node_seq"),
                     F.col("s.fault").alias("fault"), F.col("s.target").alias("target"))
            .agg(F.min("e.time_ms").alias("end_ms")))


def fault_windows(history: DataFrame, last: DataFrame) -> DataFrame:
    """Per run and second: faults active at some moment of [second, second + 1) s, i.e. start <
    window end and end > window start (a fault undone at the very ms it started counts in that one
    window)."""
    faults = fault_intervals(history).join(F.broadcast(last), "run")
    lo = F.floor(F.col("start_ms") / WINDOW_MS).cast("long")
    hi = F.when(F.col("end_ms").isNull(), F.col("last_second")).otherwise(
        F.greatest(F.ceil(F.col("end_ms") / WINDOW_MS).cast("long") - 1, lo))
    spans = faults.withColumn("lo", lo).withColumn("hi", F.least(hi, F.col("last_second")))
    return (spans.where(F.col("hi") >= F.col("lo"))
            .select("run", F.explode(F.sequence("lo", "hi")).alias("second"))
            .groupBy("run", "second").agg(F.count(F.lit(1)).alias("faults_active")))


def ack_windows(acks: DataFrame) -> DataFrame:
    """Per run and second with acks: records acknowledged ok, and their latencies (exact
    percentiles: Spark's `percentile`, linear interpolation). `acks`: the produce_ack rows."""
    return (acks.where(F.col("outcome") == "ok")
            .withColumn("second", F.floor(F.col("time_ms") / WINDOW_MS).cast("long"))
            .groupBy("run", "second")
            .agg(F.count(F.lit(1)).alias("acked"),
                 F.expr("percentile(latency_ms, array(0.5, 0.99, 0.999))").alias("p"),
                 F.max("latency_ms").alias("latency_max_ms")))


def compute_windows(history: History, runs: dict[str, Path], last_ms: dict[str, float]
                    ) -> tuple[DataFrame, DataFrame, dict[str, float]]:
    """The windows of every run (a DataFrame with SCHEMA's columns, cached), each partition's
    state per second (`partition_seconds`, cached: partitions.py reads it too), and each run's
    duration in seconds (max time_ms / 1000 over every row: run time starts at 0). `last_ms`:
    per run, its greatest time_ms (completeness.Census)."""
    durations = {run: ms / 1000.0 for run, ms in last_ms.items()}
    last = history.rows.sparkSession.createDataFrame(
        [(run, int(ms // WINDOW_MS)) for run, ms in sorted(last_ms.items())], "run string, last_second long")
    seconds = last.select("run", F.explode(F.sequence(F.lit(0).cast("long"), F.col("last_second"))).alias("second"))
    states = partition_seconds(history.control, runs, last).cache()
    keys = ["run", "second"]
    df = (seconds.join(ack_windows(history.views.acks), keys, "left")
          .join(partition_windows(states), keys, "left")
          .join(fault_windows(history.control, last), keys, "left")
          .select("run", F.col("second").cast("long"),
                  F.coalesce(F.col("acked"), F.lit(0)).cast("long").alias("acked"),
                  (F.coalesce(F.col("acked"), F.lit(0)) / F.lit(WINDOW_MS / 1000)).cast("double").alias("acked_per_s"),
                  F.col("p")[0].cast("double").alias("latency_p50_ms"),
                  F.col("p")[1].cast("double").alias("latency_p99_ms"),
                  F.col("p")[2].cast("double").alias("latency_p999_ms"),
                  F.col("latency_max_ms").cast("double"),
                  F.coalesce(F.col("partitions_offline"), F.lit(0)).cast("long").alias("partitions_offline"),
                  F.coalesce(F.col("partitions_under_min_isr"), F.lit(0)).cast("long").alias("partitions_under_min_isr"),
                  F.coalesce(F.col("faults_active"), F.lit(0)).cast("long").alias("faults_active"))
          .cache())
    return df, states, durations


def window_stats(windows: DataFrame, durations: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Per run, checks.json's overall figures from the windows:
    `throughput_rec_s`: records acknowledged ok / the history's duration in seconds (max time_ms /
    1000; null for a history of zero duration);
    `offline_s`: seconds (windows) with at least one partition offline at their end;
    `unavailable_s`: seconds with at least one partition offline or under MinISR."""
    rows = windows.groupBy("run").agg(
        F.sum("acked").alias("acked"),
        F.sum((F.col("partitions_offline") > 0).cast("long")).alias("offline_s"),
        F.sum(((F.col("partitions_offline") > 0) | (F.col("partitions_under_min_isr") > 0)).cast("long")).alias("unavailable_s"),
    ).collect()
    stats = {}
    for r in rows:
        duration_s = durations.get(r["run"], 0.0)
        stats[r["run"]] = {
            "throughput_rec_s": r["acked"] / duration_s if duration_s > 0 else None,
            "offline_s": int(r["offline_s"]),
            "unavailable_s": int(r["unavailable_s"]),
        }
    return stats


BATCH_ROWS = 65536


def write_windows(path: Path, windows: DataFrame) -> None:
    write_dataframe(path, windows.orderBy("run", "second"), SCHEMA)


def write_dataframe(path: Path, df: DataFrame, schema: pa.Schema) -> None:
    """`df`'s rows (in its order) as one Parquet file, streamed from Spark in batches (a campaign's
    rows need not fit in the driver's memory), written under a temporary name in the same folder
    and renamed."""
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, schema) as writer:
        batch: list[dict[str, Any]] = []
        for row in df.select(*schema.names).toLocalIterator():
            batch.append(row.asDict())
            if len(batch) >= BATCH_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        writer.write_table(pa.Table.from_pylist(batch, schema=schema))
