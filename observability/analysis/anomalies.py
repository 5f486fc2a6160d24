"""The contract's history anomalies (contract.md, "`analysis/`"), one DataFrame job each.

Every check reads record identities, (`producer`, `sequence`), out of four kinds of rows:
`produce_ack` (outcomes), `consume` (what consumers read), `final_read` (the committed log at the
end) and `consumer_done` (whether load consumers caught up at the end). Set differences are left
anti joins on the identity, and the group checks are single aggregations: shallow plans, which
matter on RayDP (a deep lost-write plan overflowed a 1 GB executor's stack there).

Counts are of distinct records (of distinct offsets for `inconsistent-offsets`, of polls for the
two poll anomalies), as the contract defines them; each check also returns up to `EXAMPLES`
examples, in a fixed order so that both engines give the same file.

Every key includes `run` (loading.py): a campaign is one dataset, and a record, an offset or a poll
of one run never meets another run's. Counts are kept per run (`Anomaly.per_run`) as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from observability.anomaly_names import ANOMALY_NAMES

EXAMPLES = 5
NAMES = ANOMALY_NAMES
IDENTITY = ["run", "producer", "sequence"]
PLACE = ["run", "topic", "partition"]


@dataclass
class Anomaly:
    count: int
    examples: list[dict[str, Any]] = field(default_factory=list)
    per_run: dict[str, int] = field(default_factory=dict)  # runs with none are absent

    def as_json(self) -> dict[str, Any]:
        return {"count": self.count, "examples": self.examples}


@dataclass
class HistoryViews:
    """The rows the checks read, each selected once from the history."""

    acks: DataFrame  # produce_ack: run, time_ms, producer, sequence, topic, partition, acks, outcome, offset, latency_ms
    consumes: DataFrame  # consume: run, consumer, poll, topic, partition, offset, producer, sequence, incarnation, node_seq
    final: DataFrame  # final_read: run, topic, partition, offset, producer, sequence (distinct: replicas repeat rows)

    @classmethod
    def of(cls, history: DataFrame) -> HistoryViews:
        acks = history.where(F.col("kind") == "produce_ack").select(
            "run", "time_ms", "producer", "sequence", "topic", "partition", "acks", "outcome", "offset", "latency_ms")
        consumes = history.where(F.col("kind") == "consume").select(
            "run", "consumer", "poll", "topic", "partition", "offset", "producer", "sequence", "incarnation", "node_seq")
        final = history.where(F.col("kind") == "final_read").select(
            "run", "topic", "partition", "offset", "producer", "sequence").distinct()
        return cls(acks, consumes, final)

    def cache(self) -> HistoryViews:
        """Keep the three views in memory, built now: about ten jobs read each."""
        for df in (self.acks, self.consumes, self.final):
            df.cache().count()
        return self

    def unpersist(self) -> None:
        built = [self.records] if "records" in self.__dict__ else []
        for df in (self.acks, self.consumes, self.final, *built):
            df.unpersist()

    @cached_property
    def records(self) -> DataFrame:
        """What happened to each record, one row per identity seen anywhere (cached): `ack` (its
        acknowledgement with outcome ok: topic, partition, offset, acks; null when none), `final_at`
        (the distinct places (topic, partition, offset) the final read found it at, sorted; empty
        when absent) and `first_read` (the least (topic, partition, offset, consumer) a consumer
        read it at; null when never read).

        One aggregation over the union of the three views replaces a join per anomaly: lost-write,
        duplicate, uncommitted-read and unseen are filters of this table. Structs' `min` is
        deterministic (both engines choose the same row) and ignores nulls."""
        none = F.lit(None)
        ack_t = "struct<topic:string,partition:int,offset:bigint,acks:string>"
        at_t = "struct<topic:string,partition:int,offset:bigint>"
        read_t = "struct<topic:string,partition:int,offset:bigint,consumer:string>"
        acks = self.acks.where(F.col("outcome") == "ok").select(
            *IDENTITY, F.struct("topic", "partition", "offset", "acks").cast(ack_t).alias("ack"),
            none.cast(at_t).alias("at"), none.cast(read_t).alias("read"))
        final = self.final.select(*IDENTITY, none.cast(ack_t).alias("ack"),
                                  F.struct("topic", "partition", "offset").cast(at_t).alias("at"), none.cast(read_t).alias("read"))
        reads = self.consumes.select(*IDENTITY, none.cast(ack_t).alias("ack"), none.cast(at_t).alias("at"),
                                     F.struct("topic", "partition", "offset", "consumer").cast(read_t).alias("read"))
        return (acks.unionByName(final).unionByName(reads).groupBy(*IDENTITY)
                .agg(F.min("ack").alias("ack"), F.sort_array(F.collect_set("at")).alias("final_at"),
                     F.min("read").alias("first_read"))
                .cache())


def _examples(df: DataFrame, order: list[str]) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.orderBy(*order).limit(EXAMPLES).collect()]


def _anomaly(df: DataFrame, order: list[str]) -> Anomaly:
    per_run = {r["run"]: r["n"] for r in df.groupBy("run").agg(F.count(F.lit(1)).alias("n")).collect()}
    count = sum(per_run.values())
    return Anomaly(count, _examples(df, order) if count else [], dict(sorted(per_run.items())))


def lost_writes(views: HistoryViews) -> DataFrame:
    """Acknowledged ok, absent from the final read (any acks setting; `acks` says which)."""
    r = views.records
    return r.where(F.col("ack").isNotNull() & (F.size("final_at") == 0)).select(*IDENTITY, "ack.*")


def lost_write(views: HistoryViews) -> Anomaly:
    return _anomaly(lost_writes(views), IDENTITY)


def duplicate(views: HistoryViews) -> Anomaly:
    """One record at two (or more) offsets of the final read."""
    df = views.records.where(F.size("final_at") > 1).select(*IDENTITY, F.col("final_at").alias("at"))
    return _anomaly(df, IDENTITY)


def inconsistent_offsets(views: HistoryViews) -> Anomaly:
    """One (topic, partition, offset) holding different records across every read: consumers'
    and the final read's. An offset holds two records exactly when the least and the greatest
    (producer, sequence) read there differ: one cheap aggregation over every read (a distinct
    count would cost a second one); the records of the few offsets shown as examples are then
    collected apart."""
    reads = views.consumes.select(*PLACE, "offset", "producer", "sequence").unionByName(
        views.final.select(*PLACE, "offset", "producer", "sequence"))
    record = F.struct("producer", "sequence")
    bad = (reads.groupBy(*PLACE, "offset").agg(F.min(record).alias("lo"), F.max(record).alias("hi"))
           .where(F.col("lo") != F.col("hi")).select(*PLACE, "offset").cache())
    per_run = {r["run"]: r["n"] for r in bad.groupBy("run").agg(F.count(F.lit(1)).alias("n")).collect()}
    examples: list[dict[str, Any]] = []
    if per_run:
        shown = bad.orderBy(*PLACE, "offset").limit(EXAMPLES)
        examples = [row.asDict(recursive=True) for row in
                    reads.join(F.broadcast(shown), [*PLACE, "offset"], "left_semi").groupBy(*PLACE, "offset")
                    .agg(F.sort_array(F.collect_set(record)).alias("records")).orderBy(*PLACE, "offset").collect()]
    bad.unpersist()
    return Anomaly(sum(per_run.values()), examples, dict(sorted(per_run.items())))


def uncommitted_read(views: HistoryViews) -> Anomaly:
    """A record a consumer read that the final read does not hold (first read offset shown)."""
    df = views.records.where(F.col("first_read").isNotNull() & (F.size("final_at") == 0)).select(*IDENTITY, "first_read.*")
    return _anomaly(df, IDENTITY)


def following_reads(views: HistoryViews, history: DataFrame) -> DataFrame:
    """Consume rows of the consumers that followed their partitions from offset 0 to the end of
    the run (load consumers: those with a `consumer_done` row), each with the offset its consumer
    read before in that partition (`previous`, -1 for the first).

    Why only those: the step consumer (`consume` steps) runs separate commands, each from its own
    `from_offset` (reading a partition again from 0 is what a step asks for), and the history does
    not say which command a poll served; its polls have no order to break."""
    followers = history.where(F.col("kind") == "consumer_done").select("run", "consumer").distinct()
    reads = views.consumes.join(followers, ["run", "consumer"], "left_semi")
    # Rows in the order the consumer emitted them: its (incarnation, node_seq).
    order = Window.partitionBy("run", "consumer", "topic", "partition").orderBy("incarnation", "node_seq")
    return reads.withColumn("previous", F.coalesce(F.lag("offset").over(order), F.lit(-1)))


def nonmonotonic_poll(follows: DataFrame) -> Anomaly:
    """Polls in which a consumer's offset in a partition did not move forward (went back, or read
    one offset again)."""
    bad = follows.where(F.col("offset") <= F.col("previous"))
    df = bad.groupBy("run", "consumer", "topic", "partition", "poll").agg(
        F.min(F.struct("offset", "previous", "producer", "sequence")).alias("first")).select(
        "run", "consumer", "topic", "partition", "poll", "first.*")
    return _anomaly(df, ["run", "consumer", "topic", "partition", "poll"])


def poll_skip(follows: DataFrame, views: HistoryViews) -> Anomaly:
    """Polls in which a consumer jumped over offsets that the final read holds: an offset strictly
    between the one read before and the one read now."""
    jumps = follows.where(F.col("offset") > F.col("previous") + 1).alias("j")
    committed = views.final.select(*PLACE, F.col("offset").alias("skipped")).distinct().alias("f")
    # A range join, but only on the rows that jumped (few): no full cross product.
    same_place = ((F.col("j.run") == F.col("f.run")) & (F.col("j.topic") == F.col("f.topic"))
                  & (F.col("j.partition") == F.col("f.partition")))
    skipped = jumps.join(committed, same_place & (F.col("f.skipped") > F.col("j.previous")) & (F.col("f.skipped") < F.col("j.offset")))
    df = (skipped.groupBy("j.run", "j.consumer", "j.topic", "j.partition", "j.poll")
          .agg(F.min(F.struct("j.offset", "j.previous", "j.producer", "j.sequence")).alias("first"),
               F.countDistinct("f.skipped").alias("skipped"))
          .select("run", "consumer", "topic", "partition", "poll", "first.*", "skipped"))
    return _anomaly(df, ["run", "consumer", "topic", "partition", "poll"])


def consumers_ran_to_the_end(history: DataFrame) -> dict[str, tuple[bool, str]]:
    """Per run, whether `unseen` can be checked there: some load consumer ran, and every one said
    at the end of the run (`consumer_done`) that it had read every partition up to the committed
    end. Without it, a record nobody consumed may just be one nobody was there to read.
    Runs with no `consumer_done` row are absent (not checked)."""
    done = history.where(F.col("kind") == "consumer_done").groupBy("run").agg(
        F.count(F.lit(1)).alias("n"), F.sum(F.when(F.col("complete"), 0).otherwise(1)).alias("incomplete")).collect()
    verdicts = {}
    for d in done:
        if d["incomplete"]:
            verdicts[d["run"]] = (False, f"{d['incomplete']} of {d['n']} load consumers did not catch up at the end "
                                         "(consumer_done complete=false)")
        else:
            verdicts[d["run"]] = (True, "every load consumer caught up with the committed log at the end")
    return verdicts


NOT_CHECKED = "no load consumer followed the run to its end (no consumer_done row)"


def unseen(views: HistoryViews, checked_runs: list[str]) -> Anomaly:
    """Acknowledged ok and in the final read, never consumed; only in the runs whose consumers
    ran to the end (`consumers_ran_to_the_end`)."""
    if not checked_runs:
        return Anomaly(0, [])
    spark = views.acks.sparkSession
    runs = F.broadcast(spark.createDataFrame([(r,) for r in checked_runs], "run string"))
    df = (views.records.join(runs, "run", "left_semi")
          .where(F.col("ack").isNotNull() & (F.size("final_at") > 0) & F.col("first_read").isNull())
          .select(*IDENTITY, "ack.topic", "ack.partition", "ack.offset"))
    return _anomaly(df, IDENTITY)


def find_anomalies(history: DataFrame, views: HistoryViews) -> tuple[dict[str, Anomaly], dict[str, tuple[bool, str]]]:
    """Every anomaly of the contract, by name (all present), and per run how `unseen` was decided
    (runs absent: not checked, `NOT_CHECKED`). `history`: rows of the history holding at least
    its `consumer_done` rows (loading.History.control)."""
    follows = following_reads(views, history).cache()
    unseen_rule = consumers_ran_to_the_end(history)
    found = {
        "lost-write": lost_write(views),
        "duplicate": duplicate(views),
        "inconsistent-offsets": inconsistent_offsets(views),
        "uncommitted-read": uncommitted_read(views),
        "nonmonotonic-poll": nonmonotonic_poll(follows),
        "poll-skip": poll_skip(follows, views),
        "unseen": unseen(views, sorted(r for r, (ok, _) in unseen_rule.items() if ok)),
    }
    follows.unpersist()
    assert tuple(found) == NAMES
    return found, unseen_rule
