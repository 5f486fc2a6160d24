"""LeaderCompleteness, its truncation part, re-checked from the history by Spark: a committed
record never disappears from a replica's log by a truncation, except where the protocol allows it.

Why a truncation below the HWM shows an incomplete leader: "Once an offset is committed, it is
stable which means it will survive leader changes" (the protocol description §6.6). A replica only ever truncates
as a follower, to where its leader's log stops matching its own (KIP-101's diverging epoch, or the
leader's log end when it answers OFFSET_OUT_OF_RANGE; `actors/replication/replica.py`). Everything
below the replica's local HWM is committed (the local HWM never exceeds the true HWM, §6.4) and
matches the log of the leader it learned that HWM from. So a cut below the local HWM means the
leader it follows lacks a committed record, or holds another one there: the leader is incomplete,
which the online checker reports as LeaderCompleteness.

A cut after which the replica fetches the very batches again (same base offset, count and CRC,
another leader epoch) lost nothing committed: its leader holds them (see
`_excuse_the_same_records_fetched_again`). The protocol also allows committed records to go
(protocol-facts.md, NoCommittedRecordLostGlobally: "may only fail after >= MinISR lossy unclean
shutdowns, or after an unclean election / unclean recovery"), so two more kinds of cut are excused:
- after an unclean election or unclean recovery (`election` of kind `unclean` or
  `last_known_leader`) of the partition, whose leader epoch is above the epoch the replica learned
  its HWM in and not above the epoch it truncated in: the records it knew committed were committed
  before that election, which chose a leader that may lack them (§6.8);
- after the partition went beyond tolerance (`beyond_tolerance`: at least MinISR leader candidates
  lost unflushed data in unclean shutdowns, §6.2), as the online checker stops reporting
  NoCommittedRecordLostGlobally there from then on. That judgement is read from the history, where
  the run's checker recorded it, rather than re-derived: re-deriving it needs each replica's log
  before every crash replayed and compared with what survived.

The local HWM a truncation cut below is rebuilt per replica incarnation (run, node, incarnation,
topic, partition) in `node_seq` order: the newest HWM it learned (`replica_hwm`; the checkpointed
one it recovered with, `replica_recovered`; 0 once `replica_deleted`: a replica created again
starts empty), lowered by every truncation since, as a truncation lowers it to the new log end
without an event of its own (events.ReplicaHwm).

Narrower than the online LeaderCompleteness, for two reasons, so its findings are a subset of the
online ones (tests/spark/test_cross_validation.py): an incomplete leader is only seen here when a
follower that knew the missing records committed truncates to it (a leader lacking records no
follower cuts, or records only acknowledged, goes unseen); and the excused cuts above are
LeaderCompleteness violations to the online checker, which reports an unclean election or a
lossy-crash leader that lacks committed records as any other (the scenarios that do so list it in
`expect_violations`). A record lost by a crash itself (a log recovered shorter) is not a
truncation, and not judged here. An exact re-check is out of reach of shallow jobs: the online check
compares the acting leader's whole log, at every event, with every batch below the true HWM (the
largest HWM any leader had, restarted at each unclean election) and every acks=all batch, which
needs each replica's log rebuilt at every moment (appends, cuts, what survived each crash).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from observability.events import UNCLEAN_ELECTIONS

NAME = "LeaderCompleteness"
# One replica in one process life (a topic deleted and created again under its name: two replicas,
# told apart by `topic_key`, the topic id, "" where a history has none: a join key is never null).
REPLICA = ("run", "node", "incarnation", "topic", "topic_key", "partition")


def _with_topic_key(rows: DataFrame) -> DataFrame:
    return rows.withColumn("topic_key", F.coalesce(F.col("topic_id"), F.lit("")))
ROLE_KINDS = ("become_leader", "become_follower")
TIMELINE_KINDS = ("replica_recovered", "replica_hwm", "replica_deleted", "truncated", *ROLE_KINDS)
NO_EPOCH = -1


def _replica_so_far():
    """A replica's events in the order it emitted them, from its first to the current one."""
    return Window.partitionBy(*REPLICA).orderBy("node_seq").rowsBetween(Window.unboundedPreceding, Window.currentRow)


def _replica_timeline(history: DataFrame) -> DataFrame:
    """The replica events that set its HWM or its leader epoch, or cut its log, each with the
    replica's leader epoch at that moment (`epoch`) and, on the rows that set an HWM, the HWM
    learned (`learned_hwm`) and the leader epoch it was learned in (`learned_epoch`)."""
    so_far = _replica_so_far()
    kind = F.col("kind")
    role_epoch = F.when(kind.isin(*ROLE_KINDS), F.col("leader_epoch"))
    rows = (_with_topic_key(history.where(kind.isin(*TIMELINE_KINDS)))
            .select(*REPLICA, "node_seq", "time_ms", "kind", "hwm", "last_epoch", "leader_epoch", "offset",
                    "from_offset", "reason")
            .withColumn("epoch", F.last(role_epoch, ignorenulls=True).over(so_far)))
    # A recovered replica learned its HWM in an earlier life: the epoch of its newest batch bounds
    # the epochs of the records that HWM covers.
    return (rows.withColumn("learned_hwm", F.when(kind.isin("replica_hwm", "replica_recovered"), F.col("hwm"))
                            .when(kind == "replica_deleted", F.lit(0)))
            .withColumn("learned_epoch", F.when(kind == "replica_hwm", F.coalesce("epoch", F.lit(NO_EPOCH)))
                        .when(kind == "replica_recovered", F.col("last_epoch"))
                        .when(kind == "replica_deleted", F.lit(NO_EPOCH))))


def _truncations_with_hwm(timeline: DataFrame) -> DataFrame:
    """Each `truncated` row with `hwm_before`, the replica's local HWM just before the cut: the
    newest HWM learned (0 if none yet), lowered to the log end after every cut since; and
    `learned_epoch`, the leader epoch that HWM was learned in."""
    so_far = _replica_so_far()
    # Rows since the newest HWM learned form one group: F.count counts the non-null values.
    grouped = timeline.withColumn("hwm_group", F.count("learned_hwm").over(so_far))
    group = Window.partitionBy(*REPLICA, "hwm_group").orderBy("node_seq")
    before = group.rowsBetween(Window.unboundedPreceding, -1)
    cut = F.when(F.col("kind") == "truncated", F.col("offset"))
    return (grouped
            .withColumn("group_hwm", F.coalesce(F.first("learned_hwm", ignorenulls=True).over(group), F.lit(0)))
            .withColumn("learned_epoch",
                        F.coalesce(F.first("learned_epoch", ignorenulls=True).over(group), F.lit(NO_EPOCH)))
            .withColumn("hwm_before", F.least("group_hwm", F.min(cut).over(before)))  # least() skips a null
            .where(F.col("kind") == "truncated"))


def _same_partition(left: str, right: str) -> F.Column:
    """The join condition of two aliased DataFrames on the same run's same partition."""
    return ((F.col(f"{left}.run") == F.col(f"{right}.run")) & (F.col(f"{left}.topic") == F.col(f"{right}.topic"))
            & (F.col(f"{left}.partition") == F.col(f"{right}.partition")))


def _excuse_unclean_elections(cuts: DataFrame, history: DataFrame) -> DataFrame:
    """Leave out the cuts an unclean election or unclean recovery explains: one of the partition
    whose leader epoch is above the epoch the replica learned its HWM in and not above the epoch
    it truncated in."""
    unclean = (history.where((F.col("kind") == "election") & F.col("election_kind").isin(*UNCLEAN_ELECTIONS))
               .select("run", "topic", "partition", F.col("leader_epoch").alias("unclean_epoch")).distinct())
    between = (_same_partition("c", "u")
               & (F.col("c.learned_epoch") < F.col("u.unclean_epoch")) & (F.col("u.unclean_epoch") <= F.col("c.epoch")))
    return cuts.alias("c").join(unclean.alias("u"), between, "left_anti")


def _excuse_beyond_tolerance(cuts: DataFrame, history: DataFrame) -> DataFrame:
    """Leave out the cuts made once the partition went beyond tolerance (its first
    `beyond_tolerance` row, by time: the cut comes after a restart and an election)."""
    beyond = (history.where(F.col("kind") == "beyond_tolerance")
              .groupBy("run", "topic", "partition").agg(F.min("time_ms").alias("beyond_ms")))
    after = _same_partition("c", "b") & (F.col("c.time_ms") >= F.col("b.beyond_ms"))
    return cuts.alias("c").join(beyond.alias("b"), after, "left_anti")


def _excuse_the_same_records_fetched_again(cuts: DataFrame, rows: DataFrame) -> DataFrame:
    """Leave out the cuts after which the replica appended again, at every base offset below the
    HWM it knew, the very batch it had held there (same count and CRC): its leader holds those
    committed records, stamped with another leader epoch. A zombie leader that advanced its HWM
    alone (Maximal ISR off) and a new leader that took the producer's retry of the same batch do
    that: the record is not lost, so the leader is complete (the online checker's LeaderCompleteness
    compares batches by base offset, count and CRC, which, as in Kafka's batch format, leaves the
    leader epoch out); the epochs differ, which is LogMatching's to report. A replica that did not
    fetch them again (it crashed first) keeps the finding: nothing shows its leader held them.

    In two stages, so that a common cut costs one narrow pass over the appends: first the batch at
    the cut offset alone (a leader with another log, e.g. one emptied by a crash, differs there);
    only the cuts whose first batch came back the same have their whole window compared."""
    spark = cuts.sparkSession
    # The cuts are few: collected once (one small job over the cached control rows), so that the
    # joins below do not compute them again.
    c = cuts.select(*REPLICA, F.col("node_seq").alias("cut_seq"), F.col("offset").alias("cut_offset"), "hwm_before")
    found = c.collect()
    if not found:
        return cuts
    c = F.broadcast(spark.createDataFrame(found, c.schema))
    appends = (_with_topic_key(rows.where(F.col("kind") == "appended"))
               .select(*REPLICA, "node_seq", F.col("offset").alias("base"), "count", "batch_crc"))
    cut = [*REPLICA, "cut_seq"]
    at_cut_offsets = appends.where(F.col("base").isin(sorted({r["cut_offset"] for r in found})))
    first_same = _same_batches(at_cut_offsets.join(c, on=list(REPLICA)).where(F.col("base") == F.col("cut_offset")), cut).collect()
    if not first_same:
        return cuts
    window = F.broadcast(c.join(spark.createDataFrame(first_same, schema=[*cut]), on=cut, how="left_semi"))
    held = (appends.join(window, on=list(REPLICA))
            .where((F.col("base") + F.col("count") > F.col("cut_offset")) & (F.col("base") < F.col("hwm_before"))))
    same = _same_batches(held, cut)
    return cuts.join(same.withColumnRenamed("cut_seq", "node_seq"), on=[*REPLICA, "node_seq"], how="left_anti")


def _same_batches(held: DataFrame, cut: list[str]) -> DataFrame:
    """The cuts (`cut` columns) at whose every base offset in `held` the replica's first append
    after the cut is the batch it held there when it cut (its newest append before)."""
    batch = F.struct("count", "batch_crc")
    key = [*cut, "base"]
    before = held.where(F.col("node_seq") < F.col("cut_seq")).groupBy(*key).agg(F.max_by(batch, "node_seq").alias("before"))
    after = held.where(F.col("node_seq") > F.col("cut_seq")).groupBy(*key).agg(F.min_by(batch, "node_seq").alias("after"))
    changed = (before.join(after, on=key, how="left")
               .where(F.col("after").isNull() | (F.col("before") != F.col("after"))).select(*cut))
    return before.select(*cut).distinct().join(changed, on=cut, how="left_anti")


def committed_record_truncations(history: DataFrame, rows: DataFrame) -> DataFrame:
    """(run, invariant, at_ms, detail): each truncation that cut a replica's log below the HWM it
    knew, and that neither an unclean election nor a breach of tolerance explains, nor the same
    records fetched again. `history`: the control rows; `rows`: every row (for the appends)."""
    cuts = _truncations_with_hwm(_replica_timeline(history)).where(F.col("offset") < F.col("hwm_before"))
    cuts = _excuse_beyond_tolerance(_excuse_unclean_elections(cuts, history), history)
    cuts = _excuse_the_same_records_fetched_again(cuts, rows)
    detail = F.format_string(
        "%s-%d: %s cut its log from %d to %d (%s) in leader epoch %d, below the HWM %d it knew: "
        "its leader lacks committed records",
        F.col("topic"), F.col("partition"), F.col("node"), F.col("from_offset"), F.col("offset"), F.col("reason"),
        F.coalesce("epoch", F.lit(NO_EPOCH)), F.col("hwm_before"))
    return cuts.select("run", F.lit(NAME).alias("invariant"), F.col("time_ms").alias("at_ms"), detail.alias("detail"))
