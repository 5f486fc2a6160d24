"""One pass over every row of the history (the census): how many rows of each sort each run has,
when its history ends, and when the history cannot give a verdict (`valid: "unknown"`), and why.

The census is the only job that reads every row: the counts of checks.json's stats, each run's
duration (windows.py) and the completeness rules below are sums and maxima of one aggregation
per (run, node, incarnation), where separate jobs would each scan the files again.

Why a history is incomplete:
- a `node_seq` gap: each (node, incarnation) numbers its rows from 0 without gaps, so fewer
  distinct numbers than max + 1 means rows were lost (no window, no sort of every row: see
  `DISTINCT_NODE_SEQ`);
- records were produced but there is no final read: without the committed log at the end, every
  acknowledged record would look lost. A final read that completed (`final_read_done`, `complete`)
  and found an empty log is an answer, not a missing one (a re-elected replica that lost its log,
  as in last-replica-standing-no-elr), so "no final read" means no `final_read` row and no
  completed `final_read_done`;
- a partition's final read did not complete (`final_read_done` with `complete` false): the
  records it did not reach would look lost too.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

GAP_EXAMPLES = 5
# The distinct `node_seq` of a group, exactly, as Spark 3.5's bitmaps count them: each bucket of
# 32,768 consecutive numbers gets a bitmap of the numbers present; a group's distinct count is the
# sum over its buckets. A `countDistinct` made Spark shuffle every row (10 million: 23 s on one
# core here, against 4 s this way, same counts).
DISTINCT_NODE_SEQ = "bitmap_count(bitmap_construct_agg(bitmap_bit_position(node_seq)))"
# checks.json's stats counts (COUNTS in checks.py), and the two the completeness rules need.
FINAL_READ_ROWS, FINAL_READS_DONE = "final_read_rows", "final_reads_done"


def _counters() -> dict[str, F.Column]:
    kind, outcome = F.col("kind"), F.col("outcome")
    ack = kind == "produce_ack"
    return {
        "events": F.lit(True),
        "sent": kind == "produce_send",
        "acked": ack & (outcome == "ok"),
        # Not acknowledged, as the summary's `failed` counts them: "fail" (surely not written) or
        # "info" (unknown), of which `indeterminate` are the latter, Jepsen's indeterminate
        # operations: an attempt may have been appended; neither lost nor required.
        "failed": ack & (outcome != "ok"),
        "indeterminate": ack & (outcome == "info"),
        "consumed": kind == "consume",
        FINAL_READ_ROWS: kind == "final_read",
        FINAL_READS_DONE: (kind == "final_read_done") & F.col("complete"),
    }


@dataclass
class Census:
    counts: dict[str, dict[str, int]]  # run -> the `_counters` sums
    last_ms: dict[str, float]  # run -> its greatest time_ms (run time starts at 0)
    reasons: dict[str, list[str]]  # run -> why its history is incomplete; complete runs absent


def take_census(rows: DataFrame, control: DataFrame) -> Census:
    """`rows`: every row (loading.History.rows); `control`: rows holding at least the
    `final_read_done` ones (loading.History.control)."""
    group = ["run", "node", "incarnation"]
    counters = _counters()
    buckets = (rows.groupBy(*group, F.expr("bitmap_bucket_number(node_seq)").alias("bucket"))
               .agg(F.min("node_seq").alias("first"), F.max("node_seq").alias("last"),
                    F.expr(DISTINCT_NODE_SEQ).alias("n"), F.max("time_ms").alias("last_ms"),
                    *(F.sum(c.cast("long")).alias(name) for name, c in counters.items())))
    nodes = (buckets.groupBy(*group)
             .agg(F.min("first").alias("first"), F.max("last").alias("last"), F.sum("n").alias("n"),
                  F.max("last_ms").alias("last_ms"), *(F.sum(name).alias(name) for name in counters))
             .cache())
    runs = nodes.groupBy("run").agg(F.max("last_ms").alias("last_ms"), *(F.sum(name).alias(name) for name in counters)).collect()
    gaps = (nodes.where((F.col("first") != 0) | (F.col("n") != F.col("last") + 1))
            .orderBy("run", "node", "incarnation").collect())
    nodes.unpersist()
    counts = {r["run"]: {name: int(r[name] or 0) for name in counters} for r in runs}
    last_ms = {r["run"]: float(r["last_ms"] or 0.0) for r in runs}
    reasons: dict[str, list[str]] = {}
    per_run_gaps: dict[str, list] = {}
    for g in gaps:
        per_run_gaps.setdefault(g["run"], []).append(g)
    for run, run_gaps in per_run_gaps.items():
        for g in run_gaps[:GAP_EXAMPLES]:
            reasons.setdefault(run, []).append(
                f"node_seq gap: node {g['node']} incarnation {g['incarnation']} has {g['n']} rows numbered {g['first']}..{g['last']}")
        if len(run_gaps) > GAP_EXAMPLES:
            reasons[run].append(f"node_seq gap: {len(run_gaps) - GAP_EXAMPLES} more (node, incarnation) with gaps")
    for run, c in sorted(counts.items()):
        if c["sent"] and not c[FINAL_READ_ROWS] and not c[FINAL_READS_DONE]:
            reasons.setdefault(run, []).append(
                "no final read although records were produced (no final_read row, no complete "
                "final_read_done): the committed log at the end is unknown")
    unfinished = (control.where((F.col("kind") == "final_read_done") & ~F.col("complete"))
                  .select("run", "topic", "partition", "broker").distinct()
                  .orderBy("run", "topic", "partition", "broker").collect())
    for u in unfinished:
        reasons.setdefault(u["run"], []).append(f"final read incomplete: {u['topic']}-{u['partition']} from broker {u['broker']}")
    return Census(counts, last_ms, dict(sorted(reasons.items())))


def incomplete_reasons(history: DataFrame) -> dict[str, list[str]]:
    """Per run, why its history is incomplete (`take_census` of `history` alone)."""
    return take_census(history, history).reasons
