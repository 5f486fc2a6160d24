"""Protocol invariants (docs/explanation/protocol-facts.md) re-checked from the history by Spark, over the
whole run at once, and the run's own online verdicts (summary.json) beside them.

Spark re-checks those that the history's committed metadata, elections, role changes and
replicas' HWMs and truncations show directly, as shallow DataFrame jobs (dedupe, window `lag`,
group counts, as-of joins, anti-joins):

| name            | re-checked here                                                          |
|-----------------|--------------------------------------------------------------------------|
| ElectionSafety  | at most one leader per epoch: per KRaft epoch, one voter elected (`raft_leader_elected`); per (partition, leader epoch), one broker that became leader (`become_leader`) and one leader in the committed records (`partition_change`) |
| MonotonicEpochs | in committed-metadata order, a partition's leader epoch and partition epoch and a broker's epoch never go back (`partition_change`, `broker_change`) |
| IsrElrShape     | every committed partition record: ISR and ELR subsets of the replicas, disjoint, ELR empty when size(ISR) >= MinISR |
| NoFencedInIsr   | (its election part) a broker elected from the ELR is unfenced in the committed metadata at the election |
| UncleanExclusion| (its election part) a broker elected from the ELR whose current registration followed an unclean shutdown has been back in the partition's ISR since then (KIP-966 removes such a broker from the ELR) |
| LeaderCompleteness | (its truncation part, truncations.py) no replica cuts its log below the local HWM it knew (`truncated` against `replica_hwm`/`replica_recovered`), except after an unclean election or recovery, or once the partition went beyond tolerance (`beyond_tolerance`) |

Semantics follow the online checker (observability/checks/) where it checks the same thing, so that
both give the same verdicts (tests/spark/test_cross_validation.py runs the scenario library): the
committed records are taken once each, in metadata-offset order, as `MetadataChecks` takes them.
The two "election part" checks are narrower than their online namesakes, which also judge ISR
members and log ends; so is LeaderCompleteness's "truncation part", which sees an incomplete leader
only through a follower cutting committed records to match it and excuses the cuts the protocol
allows (truncations.py says why its findings are a subset of the online ones). The others are the
online checks' statements in full (ElectionSafety's partition part is Spark's own: the online
checker judges the quorum's only).

Not re-checked by Spark (they need replaying each replica's log): LeaderCompleteness in full,
LogMatching, LeaderCandidateCompleteness, ReplicationQuorumSuperset, NoCommittedRecordLostGlobally,
StrictMinIsrHWM, TrueHWMMonotonic, AppliedHWM, ConsistentRead and the Raft log invariants. For
those, checks.json reports the online checker's findings (summary.json), marked `source: online`
(`both` for LeaderCompleteness when Spark's part found it too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .anomalies import EXAMPLES
from .committed import committed_brokers, committed_partitions
from .errors import AnalysisInputError
from .truncations import committed_record_truncations

RECHECKED = ("ElectionSafety", "MonotonicEpochs", "IsrElrShape", "NoFencedInIsr", "UncleanExclusion",
             "LeaderCompleteness")

Found = dict[str, dict[str, dict[str, Any]]]  # run -> invariant -> {count, examples: [{at_ms, detail}]}


def _findings(df: DataFrame, name: str, detail: F.Column) -> DataFrame:
    """A violation DataFrame in one shape: (run, invariant, at_ms, detail)."""
    return df.select("run", F.lit(name).alias("invariant"), F.col("time_ms").alias("at_ms"), detail.alias("detail"))


def _place() -> F.Column:
    return F.concat_ws("-", F.col("topic"), F.col("partition").cast("string"))


def election_safety(history: DataFrame, partitions: DataFrame) -> list[DataFrame]:
    quorum = (history.where(F.col("kind") == "raft_leader_elected")
              .groupBy("run", "epoch").agg(F.sort_array(F.collect_set("node")).alias("leaders"), F.min("time_ms").alias("time_ms"))
              .where(F.size("leaders") > 1))
    brokers = (history.where(F.col("kind") == "become_leader")
               .groupBy("run", "topic", "topic_id", "partition", "leader_epoch")
               .agg(F.sort_array(F.collect_set("node")).alias("leaders"), F.min("time_ms").alias("time_ms"))
               .where(F.size("leaders") > 1))
    committed = (partitions.where(F.col("leader").isNotNull())
                 .groupBy("run", "topic", "topic_id", "partition", "leader_epoch")
                 .agg(F.sort_array(F.collect_set("leader")).alias("leaders"), F.min("time_ms").alias("time_ms"))
                 .where(F.size("leaders") > 1))
    return [
        _findings(quorum, "ElectionSafety", F.format_string("KRaft epoch %d led by %s", F.col("epoch"), F.array_join("leaders", " and "))),
        _findings(brokers, "ElectionSafety", F.format_string(
            "%s leader epoch %d: brokers %s both became leader", _place(), F.col("leader_epoch"), F.array_join("leaders", " and "))),
        _findings(committed, "ElectionSafety", F.format_string(
            "%s leader epoch %d: committed records name leaders %s", _place(), F.col("leader_epoch"),
            F.array_join(F.col("leaders").cast("array<string>"), " and "))),
    ]


def monotonic_epochs(partitions: DataFrame, brokers: DataFrame) -> list[DataFrame]:
    order = Window.partitionBy("run", "topic", "topic_id", "partition").orderBy("metadata_offset")
    p = (partitions.withColumn("prev_leader_epoch", F.lag("leader_epoch").over(order))
         .withColumn("prev_partition_epoch", F.lag("partition_epoch").over(order))
         .where((F.col("leader_epoch") < F.col("prev_leader_epoch")) | (F.col("partition_epoch") < F.col("prev_partition_epoch"))))
    b_order = Window.partitionBy("run", "broker").orderBy("metadata_offset")
    b = brokers.withColumn("prev_epoch", F.lag("epoch").over(b_order)).where(F.col("epoch") < F.col("prev_epoch"))
    return [
        _findings(p, "MonotonicEpochs", F.format_string(
            "%s: (leader epoch, partition epoch) went from (%d, %d) to (%d, %d) at metadata offset %d", _place(),
            F.col("prev_leader_epoch"), F.col("prev_partition_epoch"), F.col("leader_epoch"), F.col("partition_epoch"),
            F.col("metadata_offset"))),
        _findings(b, "MonotonicEpochs", F.format_string(
            "broker %d's epoch went from %d to %d at metadata offset %d", F.col("broker"), F.col("prev_epoch"), F.col("epoch"),
            F.col("metadata_offset"))),
    ]


def isr_elr_shape(partitions: DataFrame) -> list[DataFrame]:
    bad = partitions.where(
        (F.size(F.array_except("isr", "replicas")) > 0) | (F.size(F.array_except("elr", "replicas")) > 0)
        | (F.size(F.array_intersect("isr", "elr")) > 0) | ((F.size("elr") > 0) & (F.size("isr") >= F.col("min_isr"))))
    return [_findings(bad, "IsrElrShape", F.format_string(
        "%s: replicas %s, ISR %s, ELR %s, MinISR %d (metadata offset %d)", _place(), F.col("replicas").cast("string"),
        F.col("isr").cast("string"), F.col("elr").cast("string"), F.col("min_isr"), F.col("metadata_offset")))]


def elr_elections(history: DataFrame, partitions: DataFrame, brokers: DataFrame) -> list[DataFrame]:
    """The two election checks: an ELR member elected must be unfenced and clean at its election.

    As-of joins on the metadata offset: the elected broker's newest committed registration at or
    before the election tells its epoch and whether it is fenced; the broker's own
    `broker_registered` row for that epoch tells whether it came back from an unclean shutdown
    (`clean` false after its first start, as the online checker reads it); if so, a committed
    record of the partition between that registration and the election must have it in the ISR."""
    elections = (history.where((F.col("kind") == "election") & (F.col("election_kind") == "elr"))
                 .select("run", "topic", "partition", "leader", "leader_epoch", F.col("metadata_offset").alias("at_offset"),
                         "time_ms").dropDuplicates(["run", "topic", "partition", "at_offset"]))
    reg = brokers.select("run", F.col("broker").alias("leader"), F.col("metadata_offset").alias("reg_offset"), "epoch", "fenced")
    state = (elections.join(reg, ["run", "leader"])
             .where(F.col("reg_offset") <= F.col("at_offset"))
             .groupBy("run", "topic", "partition", "leader", "leader_epoch", "at_offset", "time_ms")
             .agg(F.max_by(F.struct("epoch", "fenced"), "reg_offset").alias("s"))
             .select("*", "s.epoch", "s.fenced").drop("s"))
    fenced = state.where(F.col("fenced"))
    # When the broker registered with that epoch: the first committed record carrying it.
    first_of_epoch = reg.groupBy("run", "leader", "epoch").agg(F.min("reg_offset").alias("registered_offset"))
    unclean_regs = (history.where((F.col("kind") == "broker_registered") & ~F.col("clean") & (F.col("incarnation") > 0))
                    .select("run", F.substring("node", 2, 10).cast("int").alias("leader"), "epoch").distinct())
    suspects = (state.join(unclean_regs, ["run", "leader", "epoch"], "left_semi")
                .join(first_of_epoch, ["run", "leader", "epoch"]))
    in_isr = partitions.select("run", "topic", "partition", F.col("metadata_offset").alias("isr_offset"), "isr")
    back = (suspects.join(in_isr, ["run", "topic", "partition"])
            .where((F.col("isr_offset") > F.col("registered_offset")) & (F.col("isr_offset") < F.col("at_offset"))
                   & F.array_contains("isr", F.col("leader")))
            .select("run", "topic", "partition", "at_offset").distinct())
    unclean = suspects.join(back, ["run", "topic", "partition", "at_offset"], "left_anti")
    return [
        _findings(fenced, "NoFencedInIsr", F.format_string(
            "%s: broker %d elected from the ELR (leader epoch %d, metadata offset %d) while fenced", _place(),
            F.col("leader"), F.col("leader_epoch"), F.col("at_offset"))),
        _findings(unclean, "UncleanExclusion", F.format_string(
            "%s: broker %d elected from the ELR (leader epoch %d, metadata offset %d), registered after an unclean "
            "shutdown (epoch %d) and not back in the ISR since", _place(), F.col("leader"), F.col("leader_epoch"),
            F.col("at_offset"), F.col("epoch"))),
    ]


def recheck_invariants(history: DataFrame, rows: DataFrame) -> Found:
    """Per run, the violations Spark finds: {invariant: {count, examples}}; runs with none absent.
    `history`: the cached control rows; `rows`: every row, read only where a check needs more."""
    partitions = committed_partitions(history).cache()
    brokers = committed_brokers(history).cache()
    parts = [*election_safety(history, partitions), *monotonic_epochs(partitions, brokers),
             *isr_elr_shape(partitions), *elr_elections(history, partitions, brokers),
             committed_record_truncations(history, rows)]
    violations = parts[0]
    for df in parts[1:]:
        violations = violations.unionByName(df)
    # One small job: the counts, and the first examples of each (run, invariant) in time order.
    ranked = violations.withColumn("i", F.row_number().over(
        Window.partitionBy("run", "invariant").orderBy("at_ms", "detail")))
    rows = (ranked.groupBy("run", "invariant")
            .agg(F.count(F.lit(1)).alias("count"),
                 F.sort_array(F.collect_list(F.when(F.col("i") <= EXAMPLES, F.struct("i", "at_ms", "detail")))).alias("examples"))
            .collect())
    partitions.unpersist()
    brokers.unpersist()
    found: Found = {}
    for r in sorted(rows, key=lambda r: (r["run"], r["invariant"])):
        found.setdefault(r["run"], {})[r["invariant"]] = {
            "count": int(r["count"]),
            "examples": [{"at_ms": e["at_ms"], "detail": e["detail"]} for e in r["examples"]],
        }
    return found


def summary_violations(run_dir: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """The run's online verdicts: violations per invariant name ({count, examples: [{at_ms,
    detail}]}) from its `summary.json`, and where from (a hand-built history has no summary)."""
    path = Path(run_dir) / "summary.json"
    if not path.exists():
        return {}, "none: no summary.json"
    try:
        summary = json.loads(path.read_text())
        violations = (summary.get("violations") or []) + (summary.get("epilogue_violations") or [])
    except (json.JSONDecodeError, AttributeError, TypeError) as exc:
        raise AnalysisInputError(f"{path}: not a run summary ({exc})") from None
    found: dict[str, dict[str, Any]] = {}
    for v in violations:
        entry = found.setdefault(v["invariant"], {"count": 0, "examples": []})
        entry["count"] += int(v.get("count", 1))  # the summary keeps the first one and a count
        if len(entry["examples"]) < EXAMPLES:
            entry["examples"].append({"at_ms": v.get("at_ms"), "detail": v.get("detail")})
    return dict(sorted(found.items())), "summary.json"


def merged(spark_found: dict[str, dict[str, Any]], online: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """checks.json's `invariants` for one run: Spark's re-checks and the online checker's findings
    by name, each marked with its `source` ("spark", "online", or "both" when both found it;
    the count and examples are Spark's then, and `online_count` the online checker's: the two
    count different things, Spark the violating states it re-found, the checker how many of its
    checks after an event found the invariant broken)."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(spark_found) | set(online)):
        if name in spark_found:
            entry = dict(spark_found[name])
            entry["source"] = "both" if name in online else "spark"
            if name in online:
                entry["online_count"] = online[name]["count"]
        else:
            entry = dict(online[name])
            entry["source"] = "online"
        out[name] = entry
    return out
