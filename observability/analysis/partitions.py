"""Per-partition figures (`partitions.parquet`): one row per run, topic and partition, so that a
run of 1,000 partitions (or a campaign) shows which partitions paid for a fault.

- `acked`, `failed`, `indeterminate`: records by outcome (`produce_ack`): ok, not ok (fail or
  info, as the summary's `failed`), and of those info (unknown);
- `throughput_rec_s`: records acknowledged ok / the run's duration in seconds;
- `latency_p50_ms` ... `latency_max_ms`: exact percentiles (Spark's `percentile`, linear
  interpolation) of those records' latencies, null when none;
- `offline_s`, `under_min_isr_s`: seconds (windows) whose end found the partition without a leader,
  or with size(ISR) < min.insync.replicas (windows.py, `partition_seconds`);
- `elections`: leader elections the controller committed (`election`, every kind), and
  `unclean_elections` those of kind unclean or last_known_leader.

Partitions appear once they exist (a committed record) or once a record was acknowledged for them.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from observability.events import UNCLEAN_ELECTIONS

from .loading import History

SCHEMA = pa.schema([
    ("run", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("acked", pa.int64()),
    ("failed", pa.int64()),
    ("indeterminate", pa.int64()),
    ("throughput_rec_s", pa.float64()),
    ("latency_p50_ms", pa.float64()),
    ("latency_p99_ms", pa.float64()),
    ("latency_p999_ms", pa.float64()),
    ("latency_max_ms", pa.float64()),
    ("offline_s", pa.int64()),
    ("under_min_isr_s", pa.int64()),
    ("elections", pa.int64()),
    ("unclean_elections", pa.int64()),
])

KEY = ["run", "topic", "partition"]


def partition_figures(history: History, seconds: DataFrame, durations: dict[str, float]) -> DataFrame:
    """The rows of partitions.parquet (SCHEMA's columns), ordered by run, topic, partition.
    `seconds`: windows.py's `partition_seconds`."""
    spark = history.rows.sparkSession
    outcome = F.col("outcome")
    acks = (history.views.acks.groupBy(*KEY)
            .agg(F.sum((outcome == "ok").cast("long")).alias("acked"),
                 F.sum((outcome != "ok").cast("long")).alias("failed"),
                 F.sum((outcome == "info").cast("long")).alias("indeterminate"),
                 F.expr("percentile(CASE WHEN outcome = 'ok' THEN latency_ms END, array(0.5, 0.99, 0.999))").alias("p"),
                 F.max(F.when(outcome == "ok", F.col("latency_ms"))).alias("latency_max_ms")))
    states = (seconds.groupBy(*KEY)
              .agg(F.sum(F.col("offline").cast("long")).alias("offline_s"),
                   F.sum(F.col("under_min_isr").cast("long")).alias("under_min_isr_s")))
    # Every voter reports each election: one per committed metadata offset.
    elections = (history.control.where(F.col("kind") == "election")
                 .select(*KEY, "metadata_offset", "election_kind").distinct().groupBy(*KEY)
                 .agg(F.count(F.lit(1)).alias("elections"),
                      F.sum(F.col("election_kind").isin(*UNCLEAN_ELECTIONS).cast("long")).alias("unclean_elections")))
    duration = spark.createDataFrame(sorted(durations.items()), "run string, duration_s double")
    zero = F.lit(0).cast("long")
    return (states.join(acks, KEY, "full").join(elections, KEY, "left").join(F.broadcast(duration), "run", "left")
            .select(*KEY,
                    *(F.coalesce(F.col(c), zero).alias(c) for c in ("acked", "failed", "indeterminate")),
                    F.when(F.col("duration_s") > 0, F.coalesce(F.col("acked"), zero) / F.col("duration_s")).alias("throughput_rec_s"),
                    F.col("p")[0].alias("latency_p50_ms"), F.col("p")[1].alias("latency_p99_ms"),
                    F.col("p")[2].alias("latency_p999_ms"), F.col("latency_max_ms").cast("double"),
                    *(F.coalesce(F.col(c), zero).alias(c) for c in ("offline_s", "under_min_isr_s", "elections", "unclean_elections")))
            .orderBy(*KEY))
