"""When the history cannot give a verdict (`valid: "unknown"`), and why.

- a `node_seq` gap: each (node, incarnation) numbers its rows from 0 without gaps, so fewer
  distinct numbers than max + 1 means rows were lost (one aggregation per group, no window);
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


def incomplete_reasons(history: DataFrame) -> list[str]:
    """Why the history is incomplete; empty when it is not."""
    reasons: list[str] = []
    gaps = (history.groupBy("node", "incarnation")
            .agg(F.min("node_seq").alias("first"), F.max("node_seq").alias("last"),
                 F.countDistinct("node_seq").alias("n"))
            .where((F.col("first") != 0) | (F.col("n") != F.col("last") + 1))
            .orderBy("node", "incarnation").collect())
    for g in gaps[:GAP_EXAMPLES]:
        reasons.append(f"node_seq gap: node {g['node']} incarnation {g['incarnation']} has {g['n']} rows "
                       f"numbered {g['first']}..{g['last']}")
    if len(gaps) > GAP_EXAMPLES:
        reasons.append(f"node_seq gap: {len(gaps) - GAP_EXAMPLES} more (node, incarnation) with gaps")
    done = (F.col("kind") == "final_read_done") & F.col("complete")
    kinds = {r["kind"]: r["n"] for r in history.where(F.col("kind").isin("produce_send", "final_read") | done)
             .groupBy("kind").agg(F.count(F.lit(1)).alias("n")).collect()}
    if kinds.get("produce_send", 0) and not kinds.get("final_read", 0) and not kinds.get("final_read_done", 0):
        reasons.append("no final read although records were produced (no final_read row, no complete "
                       "final_read_done): the committed log at the end is unknown")
    unfinished = (history.where((F.col("kind") == "final_read_done") & ~F.col("complete"))
                  .select("topic", "partition", "broker").distinct().orderBy("topic", "partition", "broker").collect())
    for u in unfinished:
        reasons.append(f"final read incomplete: {u['topic']}-{u['partition']} from broker {u['broker']}")
    return reasons
