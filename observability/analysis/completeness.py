"""When the history cannot give a verdict (`valid: "unknown"`), and why.

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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

GAP_EXAMPLES = 5
# The distinct `node_seq` of a group, exactly, as Spark 3.5's bitmaps count them: each bucket of
# 32,768 consecutive numbers gets a bitmap of the numbers present; a group's distinct count is the
# sum over its buckets. A `countDistinct` made Spark shuffle every row (10 million: 23 s on one
# core here, against 4 s this way, same counts).
DISTINCT_NODE_SEQ = "bitmap_count(bitmap_construct_agg(bitmap_bit_position(node_seq)))"


def incomplete_reasons(history: DataFrame) -> dict[str, list[str]]:
    """Per run, why its history is incomplete; runs whose history is complete are absent."""
    reasons: dict[str, list[str]] = {}
    group = ["run", "node", "incarnation"]
    buckets = (history.groupBy(*group, F.expr("bitmap_bucket_number(node_seq)").alias("bucket"))
               .agg(F.min("node_seq").alias("first"), F.max("node_seq").alias("last"),
                    F.expr(DISTINCT_NODE_SEQ).alias("n")))
    gaps = (buckets.groupBy(*group)
            .agg(F.min("first").alias("first"), F.max("last").alias("last"), F.sum("n").alias("n"))
            .where((F.col("first") != 0) | (F.col("n") != F.col("last") + 1))
            .orderBy("run", "node", "incarnation").collect())
    per_run_gaps: dict[str, list] = {}
    for g in gaps:
        per_run_gaps.setdefault(g["run"], []).append(g)
    for run, run_gaps in per_run_gaps.items():
        for g in run_gaps[:GAP_EXAMPLES]:
            reasons.setdefault(run, []).append(
                f"node_seq gap: node {g['node']} incarnation {g['incarnation']} has {g['n']} rows numbered {g['first']}..{g['last']}")
        if len(run_gaps) > GAP_EXAMPLES:
            reasons[run].append(f"node_seq gap: {len(run_gaps) - GAP_EXAMPLES} more (node, incarnation) with gaps")
    done = (F.col("kind") == "final_read_done") & F.col("complete")
    kinds = (history.where(F.col("kind").isin("produce_send", "final_read") | done)
             .groupBy("run").pivot("kind", ["produce_send", "final_read", "final_read_done"])
             .agg(F.count(F.lit(1))).collect())
    for k in kinds:
        if (k["produce_send"] or 0) and not (k["final_read"] or 0) and not (k["final_read_done"] or 0):
            reasons.setdefault(k["run"], []).append(
                "no final read although records were produced (no final_read row, no complete "
                "final_read_done): the committed log at the end is unknown")
    unfinished = (history.where((F.col("kind") == "final_read_done") & ~F.col("complete"))
                  .select("run", "topic", "partition", "broker").distinct()
                  .orderBy("run", "topic", "partition", "broker").collect())
    for u in unfinished:
        reasons.setdefault(u["run"], []).append(f"final read incomplete: {u['topic']}-{u['partition']} from broker {u['broker']}")
    return dict(sorted(reasons.items()))
