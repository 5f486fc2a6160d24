"""The committed metadata as the history tells it: every controller voter writes a row for each
committed partition or broker record (`partition_change`, `broker_change`), at slightly different
times; the record is the same (same `metadata_offset`). Each is taken once here, keeping the
earliest report (the first moment any voter knew it committed; ties broken by node name, so that
both engines take the same row)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

PARTITION_COLUMNS = ("leader", "leader_epoch", "partition_epoch", "replicas", "isr", "elr", "min_isr")
BROKER_COLUMNS = ("epoch", "fenced")


def _committed(history: DataFrame, kind: str, key: tuple[str, ...], columns: tuple[str, ...]) -> DataFrame:
    return (history.where(F.col("kind") == kind)
            .groupBy("run", *key, "metadata_offset")
            .agg(F.min_by(F.struct(*columns), F.struct("time_ms", "node")).alias("s"), F.min("time_ms").alias("time_ms"))
            .select("run", *key, "metadata_offset", "time_ms", "s.*"))


def committed_partitions(history: DataFrame) -> DataFrame:
    """(run, topic, topic_id, partition, metadata_offset, time_ms, PARTITION_COLUMNS...), one row per
    record. A topic deleted and created again under its name has another `topic_id`: its partitions'
    epochs start anew."""
    return _committed(history, "partition_change", ("topic", "topic_id", "partition"), PARTITION_COLUMNS)


def committed_brokers(history: DataFrame) -> DataFrame:
    """(run, broker, metadata_offset, time_ms, epoch, fenced), one row per record."""
    return _committed(history, "broker_change", ("broker",), BROKER_COLUMNS)
