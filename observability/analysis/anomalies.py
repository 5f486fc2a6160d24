"""The contract's history anomalies (docs/reference/analysis.md), as few DataFrame jobs.

Every check reads record identities, (`producer`, `sequence`), out of four kinds of rows:
`produce_ack` (outcomes), `consume` (what consumers read), `final_read` (the committed log at the
end), `consumer_seek` (where a consumer started reading) and `consumer_done` (whether load
consumers caught up at the end, and how far they read). The four record anomalies
are filters of one aggregation per record (`HistoryViews.records`); the offset and poll anomalies
are one aggregation and one window each. Shallow plans with numeric aggregates: Spark aggregates
numbers by hashing, but sorts every row to take the `min` of a struct or to collect a set, which
cost twice the time at 10 million rows; and a deep plan (a lost-write plan of joins) overflowed a
1 GB RayDP executor's stack.

Counts are of distinct records (for `inconsistent-offsets`, the records read at an offset holding
another record too; of polls for the two poll anomalies), as the contract defines them; each check
also returns up to `EXAMPLES` examples, in a fixed order so that both engines give the same file.

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
# A consumer poll, the unit the two poll anomalies count (docs/reference: "of consumer polls"): one
# poll that went back in two partitions is one poll; a restarted consumer numbers polls from 0 again.
POLL = ["run", "consumer", "incarnation", "poll"]


@dataclass
class Anomaly:
    count: int
    examples: list[dict[str, Any]] = field(default_factory=list)
    per_run: dict[str, int] = field(default_factory=dict)  # runs with none are absent

    def as_json(self) -> dict[str, Any]:
        return {"count": self.count, "examples": self.examples}


RECORD_KINDS = ("produce_send", "produce_ack", "consume", "final_read")


def without_deleted_topics(history: DataFrame) -> DataFrame:
    """The history without the record-level rows of deleted topics (`topic_deleted`, by
    `topic_id`): a deleted topic's records are neither lost nor required (docs/reference), and a topic
    created again under the name is judged on its own records. The deleted ids are few: a
    broadcast anti-join, no shuffle of the records."""
    deleted = history.where(F.col("kind") == "topic_deleted").select("run", "topic_id").distinct()
    record = F.col("kind").isin(*RECORD_KINDS) & F.col("topic_id").isNotNull()
    return (history.where(~record)
            .unionByName(history.where(record).join(F.broadcast(deleted), ["run", "topic_id"], "left_anti")))


@dataclass
class HistoryViews:
    """The rows the checks read, each a selection of the history (not cached: a scan of a few
    columns of the files costs 1-3 s for 10 million rows, where building Spark's in-memory cache
    of the same rows costs two or three times that; each view is read by few jobs)."""

    acks: DataFrame  # produce_ack: run, time_ms, producer, sequence, topic, partition, acks, outcome, offset, latency_ms
    consumes: DataFrame  # consume: run, consumer, poll, topic, partition, offset, producer, sequence, incarnation, node_seq
    final: DataFrame  # final_read: run, topic, partition, offset, producer, sequence (replicas may repeat rows)
    # The record-level kinds' rows at once (run, kind, outcome, acks, IDENTITY, PLACE, offset, consumer):
    # acknowledgements, reads, the final read, and the sends (which the contract gives `acks`).
    record_rows: DataFrame

    @classmethod
    def of(cls, history: DataFrame) -> HistoryViews:
        history = without_deleted_topics(history)
        kind = F.col("kind")
        acks = history.where(kind == "produce_ack").select(
            "run", "time_ms", "producer", "sequence", "topic", "partition", "acks", "outcome", "offset", "latency_ms")
        consumes = history.where(kind == "consume").select(
            "run", "consumer", "poll", "topic", "partition", "offset", "producer", "sequence", "incarnation", "node_seq")
        final = history.where(kind == "final_read").select("run", "topic", "partition", "offset", "producer", "sequence")
        record_rows = history.where(kind.isin("produce_ack", "final_read", "consume", "produce_send")).select(
            "run", "kind", "outcome", "acks", "producer", "sequence", "topic", "partition", "offset", "consumer")
        return cls(acks, consumes, final, record_rows)

    def unpersist(self) -> None:
        if "records" in self.__dict__:
            self.records.unpersist()

    @cached_property
    def records(self) -> DataFrame:
        """What happened to each record: one row per identity seen in an acknowledgement, a read or
        the final read (cached), with
        - `acked`: 1 when some `produce_ack` had outcome ok, else 0;
        - `acks`: that acknowledgement's `acks` setting, numbered by its index in `ACKS_CODES` (null: none ok);
        - `final_lo`, `final_hi`: the least and the greatest fingerprint (`_place_fingerprint`) of
          the places (topic, partition, offset) the final read found it at; null when absent, and
          different exactly when it is at two places or more (up to a 64-bit hash collision:
          about 1e-19 for a pair of places);
        - `read_lo`, `read_hi`: the same of the places consumers read it at (null when never
          read): with the final read's, a record at two places or more in any read is a
          duplicate;
        - `read`: 1 when some consumer read it, else 0;
        - `failed`: 1 when some `produce_ack` had outcome fail ("surely not written"), else 0.

        One aggregation with numeric results (Spark's hash aggregation: 9 s for 7 million rows
        here, where `min` of structs and `collect_set` made it a sort aggregation of 20 s) replaces
        a join per anomaly: lost-write, duplicate, uncommitted-read and unseen are filters of this
        table, and their few examples are read back from the rows (`_details`)."""
        kind = F.col("kind")
        ok = (kind == "produce_ack") & (F.col("outcome") == "ok")
        failed = (kind == "produce_ack") & (F.col("outcome") == "fail")
        final = kind == "final_read"
        # The sends are left out (a filter after the scan, which decodes them anyway): an ok
        # acknowledgement carries its `acks` in kraftlab's histories; `sent_acks` reads the
        # sends' for histories whose acknowledgements lack it.
        return (self.record_rows.where(kind != "produce_send").groupBy(*IDENTITY)
                .agg(F.max(ok.cast("int")).alias("acked"),
                     F.max(F.when(ok, _acks_code())).alias("acks"),
                     F.min(F.when(final, _place_fingerprint())).alias("final_lo"),
                     F.max(F.when(final, _place_fingerprint())).alias("final_hi"),
                     F.min(F.when(kind == "consume", _place_fingerprint())).alias("read_lo"),
                     F.max(F.when(kind == "consume", _place_fingerprint())).alias("read_hi"),
                     F.max((kind == "consume").cast("int")).alias("read"),
                     F.max(failed.cast("int")).alias("failed"))
                .cache())


# `acks` settings as numbers (0: none or unknown; a hand-built history may leave `acks` out of its
# acknowledgements), so that the records' aggregation stays numeric.
ACKS_CODES = (None, "0", "1", "all")


def _acks_code() -> F.Column:
    code = F.lit(0)
    for i, setting in enumerate(ACKS_CODES[1:], start=1):
        code = F.when(F.col("acks") == setting, i).otherwise(code)
    return code


def _place_fingerprint() -> F.Column:
    return F.xxhash64("topic", "partition", "offset")


def _record_anomalies() -> dict[str, F.Column]:
    """The record anomalies as conditions on `HistoryViews.records`."""
    in_final = F.col("final_lo").isNotNull()
    acked, read = F.col("acked") == 1, F.col("read") == 1
    return {
        "lost-write": acked & ~in_final,  # acknowledged ok, absent from the final read (any acks setting)
        # At two places or more in the reads: the final read's and the consumers' (Jepsen's
        # duplicate: "a single value appears at more than one offset", in any read).
        "duplicate": F.least("final_lo", "read_lo") != F.greatest("final_hi", "read_hi"),
        "uncommitted-read": read & ~in_final,  # read by a consumer, absent from the final read
        "unseen": acked & in_final & ~read,  # acknowledged ok and committed, never read
        # Jepsen's G1a (aborted read): a write known to have failed, visible to a read.
        "aborted-read": (F.col("failed") == 1) & ~acked & (in_final | read),
    }


def _spark_order(values: tuple) -> tuple:
    """A sort key ordering tuples as Spark orders structs (nulls first)."""
    return tuple((v is not None, v) for v in values)


def _details(views: HistoryViews, identities: list[tuple]) -> dict[tuple, dict[str, list[tuple]]]:
    """For a few record identities (run, producer, sequence): their ok acknowledgements (topic,
    partition, offset, acks), their places in the final read (topic, partition, offset), their
    reads (topic, partition, offset, consumer) and their sends' `acks`, read back from the rows in
    one small job."""
    found: dict[tuple, dict[str, list[tuple]]] = {i: {"ack": [], "final": [], "read": [], "send": []} for i in identities}
    if not identities:
        return found
    spark = views.acks.sparkSession
    wanted = F.broadcast(spark.createDataFrame(identities, "run string, producer string, sequence long"))
    for r in views.record_rows.join(wanted, IDENTITY, "left_semi").collect():
        entry = found[(r["run"], r["producer"], r["sequence"])]
        if r["kind"] == "produce_ack" and r["outcome"] == "ok":
            entry["ack"].append((r["topic"], r["partition"], r["offset"], r["acks"]))
        elif r["kind"] == "final_read":
            entry["final"].append((r["topic"], r["partition"], r["offset"]))
        elif r["kind"] == "consume":
            entry["read"].append((r["topic"], r["partition"], r["offset"], r["consumer"]))
        elif r["kind"] == "produce_send":
            entry["send"].append((r["acks"],))
    return found


def _first(values: list[tuple]) -> tuple:
    return min(values, key=_spark_order)


def _record_example(name: str, identity: tuple, rows: dict[str, list[tuple]]) -> dict[str, Any]:
    """An example as checks.json shows it: the identity, and the least ok acknowledgement
    (lost-write, unseen), the distinct places in the reads, final and consumers' (duplicate), or the least read
    (uncommitted-read)."""
    example: dict[str, Any] = dict(zip(IDENTITY, identity, strict=True))
    if name == "lost-write":
        example.update(zip(("topic", "partition", "offset", "acks"), _first(rows["ack"]), strict=True))
        if example["acks"] is None and rows["send"]:
            example["acks"] = _first(rows["send"])[0]  # the contract gives `acks` to the send
    elif name == "unseen":
        example.update(zip(("topic", "partition", "offset"), _first(rows["ack"])[:3], strict=True))
    elif name == "duplicate":
        places = sorted(set(rows["final"]) | {r[:3] for r in rows["read"]}, key=_spark_order)
        example["at"] = [dict(zip(("topic", "partition", "offset"), p, strict=True)) for p in places]
    elif name == "aborted-read" and not rows["read"]:
        example.update(zip(("topic", "partition", "offset"), _first(rows["final"]), strict=True))
    else:
        example.update(zip(("topic", "partition", "offset", "consumer"), _first(rows["read"]), strict=True))
    return example


def consumers_reach(history: DataFrame) -> DataFrame:
    """Per (run, topic, partition), the furthest offset a load consumer reached by the end
    (`consumer_done`'s `offset`, as `reach`): a record at or beyond it was committed after every
    consumer had stopped, never offered to them, and is not unseen. A few rows per run."""
    done = history.where((F.col("kind") == "consumer_done") & F.col("topic").isNotNull() & F.col("offset").isNotNull())
    return done.groupBy(*PLACE).agg(F.max("offset").alias("reach"))


def unseen_within_reach(views: HistoryViews, candidates: DataFrame, reach: DataFrame) -> DataFrame:
    """Of `candidates` (IDENTITY: acknowledged, committed, never read), those with a place of the
    final read below the consumers' reach there, or in a partition no reach names (a history of
    one `consumer_done` row per consumer). Run only when some candidate exists: the candidates are
    few, the final read's rows are joined with them (a semi-join) and then with the small reach."""
    places = views.final.join(candidates, IDENTITY, "left_semi")
    return (places.join(F.broadcast(reach), PLACE, "left")
            .where(F.col("reach").isNull() | (F.col("offset") < F.col("reach")))
            .select(*IDENTITY).distinct())


def record_anomalies(views: HistoryViews, unseen_runs: list[str], reach: DataFrame | None = None
                     ) -> tuple[dict[str, Anomaly], dict[str, dict[str, Any]]]:
    """lost-write, duplicate, uncommitted-read and unseen (this one only in `unseen_runs`, see
    `consumers_ran_to_the_end`, and only below the consumers' `reach`), and per run the record figures of checks.json's stats
    (`final_read`: distinct records in the final read; `lost_by_acks`: lost writes by the `acks`
    setting of their acknowledgement, or of their send when the acknowledgement has none): one job
    for every count, one per anomaly found for its first identities, one for their details."""
    records = views.records
    checked = F.col("run").isin(*unseen_runs) if unseen_runs else F.lit(False)
    conditions = _record_anomalies()
    conditions["unseen"] = conditions["unseen"] & checked
    sums = [F.sum(cond.cast("long")).alias(name) for name, cond in conditions.items()]
    in_final = F.col("final_lo").isNotNull().cast("long")
    rows = records.groupBy("run", "acks").agg(F.sum(in_final).alias("final_read"), *sums).collect()
    per_run: dict[str, dict[str, int]] = {name: {} for name in conditions}
    stats: dict[str, dict[str, Any]] = {}
    # Lost writes whose acknowledgement had no `acks` (code 0): their sends say (`sent_acks`).
    by_send = sent_acks(views, records.where(conditions["lost-write"] & (F.col("acks") == 0))) \
        if any(r["lost-write"] and r["acks"] == 0 for r in rows) else {}
    for r in rows:
        run_stats = stats.setdefault(r["run"], {"final_read": 0, "lost_by_acks": {}})
        run_stats["final_read"] += int(r["final_read"])
        if r["lost-write"] and r["acks"] == 0:
            for setting, n in by_send.get(r["run"], {}).items():
                run_stats["lost_by_acks"][setting] = run_stats["lost_by_acks"].get(setting, 0) + n
        elif r["lost-write"]:
            setting = ACKS_CODES[r["acks"]] if r["acks"] is not None else None
            run_stats["lost_by_acks"][setting] = run_stats["lost_by_acks"].get(setting, 0) + int(r["lost-write"])
        for name in conditions:
            if r[name]:
                per_run[name][r["run"]] = per_run[name].get(r["run"], 0) + int(r[name])
    for s in stats.values():
        s["lost_by_acks"] = dict(sorted(s["lost_by_acks"].items(), key=lambda kv: _spark_order((kv[0],))))
    selected = {name: records.where(cond).select(*IDENTITY) for name, cond in conditions.items()}
    if per_run["unseen"] and reach is not None:
        selected["unseen"] = unseen_within_reach(views, selected["unseen"], reach).cache()
        per_run["unseen"] = {r["run"]: int(r["n"]) for r in selected["unseen"].groupBy("run").agg(F.count(F.lit(1)).alias("n")).collect()}
    shown = {name: [tuple(x) for x in selected[name].orderBy(*IDENTITY).limit(EXAMPLES).collect()]
             for name in conditions if per_run[name]}
    if selected["unseen"].is_cached:
        selected["unseen"].unpersist()  # counted and shown: its two jobs are done
    details = _details(views, sorted({i for ids in shown.values() for i in ids}))
    found = {}
    for name in conditions:
        examples = [_record_example(name, i, details[i]) for i in shown.get(name, [])]
        found[name] = Anomaly(sum(per_run[name].values()), examples, dict(sorted(per_run[name].items())))
    return found, stats


def sent_acks(views: HistoryViews, records: DataFrame) -> dict[str, dict[str | None, int]]:
    """Per run, `records` (rows of `HistoryViews.records`) counted by the `acks` of their
    `produce_send` (docs/reference gives `acks` to the send; kraftlab's acknowledgements carry it too,
    a history written by another tool may not): None when the send has none, or no send."""
    sends = (views.record_rows.where(F.col("kind") == "produce_send").select(*IDENTITY, "acks")
             .dropDuplicates(IDENTITY))
    counted: dict[str, dict[str | None, int]] = {}
    for r in records.select(*IDENTITY).join(sends, IDENTITY, "left").groupBy("run", "acks").count().collect():
        counted.setdefault(r["run"], {})[r["acks"]] = int(r["count"])
    return counted


def _anomaly(df: DataFrame, order: list[str]) -> Anomaly:
    """The count per run of `df`'s rows, and the first EXAMPLES of them in `order`."""
    per_run = {r["run"]: r["n"] for r in df.groupBy("run").agg(F.count(F.lit(1)).alias("n")).collect()}
    count = sum(per_run.values())
    examples = [row.asDict(recursive=True) for row in df.orderBy(*order).limit(EXAMPLES).collect()] if count else []
    return Anomaly(count, examples, dict(sorted(per_run.items())))


def inconsistent_offsets(views: HistoryViews) -> Anomaly:
    """One (topic, partition, offset) holding different records across every read: consumers'
    and the final read's, counted in records (docs/reference: "the number of distinct records showing
    it"), those read at such an offset. An offset holds two records exactly when the least and the
    greatest fingerprints of the (producer, sequence) read there differ, or the least and the
    greatest sequences do (exact but for a 64-bit hash collision of two records of equal
    sequence): one numeric aggregation over every read, where `min` of a struct made Spark sort
    every read. Only when some offset is inconsistent are the reads joined with those offsets to
    count their records, and the records of the few offsets shown as examples collected."""
    reads = (views.record_rows.where(F.col("kind").isin("consume", "final_read"))
             .select(*PLACE, "offset", "producer", "sequence"))
    fingerprint = F.xxhash64("producer", "sequence")
    bad = (reads.groupBy(*PLACE, "offset")
           .agg(F.min(fingerprint).alias("lo"), F.max(fingerprint).alias("hi"),
                F.min("sequence").alias("seq_lo"), F.max("sequence").alias("seq_hi"))
           .where((F.col("lo") != F.col("hi")) | (F.col("seq_lo") != F.col("seq_hi")))
           .select(*PLACE, "offset").cache())
    per_run: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    if not bad.isEmpty():
        per_run = {r["run"]: r["n"] for r in reads.join(bad, [*PLACE, "offset"], "left_semi").select(*IDENTITY).distinct()
                   .groupBy("run").agg(F.count(F.lit(1)).alias("n")).collect()}
        record = F.struct("producer", "sequence")
        shown = bad.orderBy(*PLACE, "offset").limit(EXAMPLES)
        examples = [row.asDict(recursive=True) for row in
                    reads.join(F.broadcast(shown), [*PLACE, "offset"], "left_semi").groupBy(*PLACE, "offset")
                    .agg(F.sort_array(F.collect_set(record)).alias("records")).orderBy(*PLACE, "offset").collect()]
    bad.unpersist()
    return Anomaly(sum(per_run.values()), examples, dict(sorted(per_run.items())))


def poll_steps(views: HistoryViews, history: DataFrame) -> DataFrame:
    """Every consumer's consume rows, each with the offset its consumer read before in that
    partition (`previous`); only the rows that did not move exactly one offset forward, the few
    both poll anomalies judge (cache it).

    A `consumer_seek` row sets the consumer's position (`previous` is then the offset before it):
    kraftlab's consumers write one where each reading starts (a load consumer at 0, a `consume`
    step at its `from`, which may read a partition again), so reads are judged from where they were
    asked to start. A consumer's first read of a partition in an incarnation with no seek before
    it is not judged (`previous` null): nothing says where it was to start. Rows are in the order
    the consumer emitted them, its (incarnation, node_seq); a restarted consumer starts over."""
    kind = F.col("kind")
    seeks = history.where(kind == "consumer_seek").select(
        "run", "consumer", "topic", "partition", "incarnation", "node_seq",
        (F.col("offset") - 1).alias("offset"), F.lit(True).alias("seek"))
    reads = views.consumes.select("run", "consumer", "topic", "partition", "incarnation", "node_seq", "offset",
                                  F.lit(False).alias("seek"), "poll", "producer", "sequence")
    rows = reads.unionByName(seeks, allowMissingColumns=True)
    order = Window.partitionBy("run", "consumer", "incarnation", "topic", "partition").orderBy("node_seq")
    return (rows.withColumn("previous", F.lag("offset").over(order))
            .where(~F.col("seek") & F.col("previous").isNotNull() & (F.col("offset") != F.col("previous") + 1))
            .drop("seek"))


def nonmonotonic_poll(steps: DataFrame) -> Anomaly:
    """Polls in which a consumer's offset in a partition did not move forward (went back, or read
    one offset again). `steps`: `poll_steps`."""
    bad = steps.where(F.col("offset") <= F.col("previous"))
    df = bad.groupBy(*POLL).agg(
        F.min(F.struct("topic", "partition", "offset", "previous", "producer", "sequence")).alias("first")).select(
        "run", "consumer", "incarnation", "poll", "first.*")
    return _anomaly(df, POLL)


def poll_skip(steps: DataFrame, views: HistoryViews) -> Anomaly:
    """Polls in which a consumer jumped over offsets that the final read holds: an offset strictly
    between the one read before and the one read now. `steps`: `poll_steps`."""
    jumps = steps.where(F.col("offset") > F.col("previous") + 1).alias("j")
    if not jumps.take(1):  # no consumer jumped (the usual case): spare the scan of the final read
        return Anomaly(0, [])
    committed = views.final.select(*PLACE, F.col("offset").alias("skipped")).distinct().alias("f")
    # A range join, but only on the rows that jumped (few): no full cross product.
    same_place = ((F.col("j.run") == F.col("f.run")) & (F.col("j.topic") == F.col("f.topic"))
                  & (F.col("j.partition") == F.col("f.partition")))
    skipped = jumps.join(committed, same_place & (F.col("f.skipped") > F.col("j.previous")) & (F.col("f.skipped") < F.col("j.offset")))
    df = (skipped.groupBy(*(f"j.{c}" for c in POLL))
          .agg(F.min(F.struct("j.topic", "j.partition", "j.offset", "j.previous", "j.producer", "j.sequence")).alias("first"),
               F.countDistinct("f.topic", "f.partition", "f.skipped").alias("skipped"))
          .select("run", "consumer", "incarnation", "poll", "first.*", "skipped"))
    return _anomaly(df, POLL)


def consumers_ran_to_the_end(history: DataFrame, views: HistoryViews, runs: list[str]) -> dict[str, tuple[bool, str]]:
    """Per run, whether `unseen` can be checked there: whether its consumers ran to the end, so
    that a record nobody consumed is not just one nobody was there to read.

    - A run with `consumer_done` rows (kraftlab's load consumers, a row per consumer and
      partition): when every one said at the end of the run that it had read every partition up
      to the committed end (then `unseen` judges the records below the offsets they reached,
      `consumers_reach`).
    - Otherwise (a history of consume steps, or one written by another tool from docs/reference):
      when every partition of the final read was read from its first offset to its last by some
      consumer: it was there from the start to the end (a record it skipped on the way is unseen,
      and a poll-skip).
    Runs with neither are absent (not checked)."""
    done_rows = history.where(F.col("kind") == "consumer_done")
    done = done_rows.groupBy("run").agg(
        F.countDistinct("consumer").alias("n"),
        F.countDistinct(F.when(~F.col("complete"), F.col("consumer"))).alias("incomplete")).collect()
    verdicts = {}
    for d in done:
        if d["incomplete"]:
            verdicts[d["run"]] = (False, f"{d['incomplete']} of {d['n']} load consumers did not catch up at the end "
                                         "(consumer_done complete=false)")
        else:
            verdicts[d["run"]] = (True, "every load consumer caught up with the committed log at the end")
    if any(run not in verdicts for run in runs):  # else (every run with load consumers) no scan of the reads
        verdicts.update(_read_start_to_end(views, done_rows.select("run").distinct() if verdicts else None))
    return verdicts


def _read_start_to_end(views: HistoryViews, decided: DataFrame | None) -> dict[str, tuple[bool, str]]:
    """For the runs with consume rows, less those in `decided` (a DataFrame of `run`, joined, not
    listed: a campaign may have a hundred thousand runs): whether every partition of the final read
    had a consumer that read its first and its last offset (two jobs: the runs that read, and the
    final read's bounds per partition joined with the reads at those two offsets)."""
    reads, final = views.consumes, views.final
    if decided is not None:
        reads = reads.join(F.broadcast(decided), "run", "left_anti")
        final = final.join(F.broadcast(decided), "run", "left_anti")
    bounds = final.groupBy(*PLACE).agg(F.min("offset").alias("first"), F.max("offset").alias("last"))
    ends = reads.select(*PLACE, "consumer", "offset").join(F.broadcast(bounds), PLACE).where(
        (F.col("offset") == F.col("first")) | (F.col("offset") == F.col("last")))
    covered = (ends.groupBy(*PLACE, "consumer")
               .agg(F.max((F.col("offset") == F.col("first")).cast("int")).alias("has_first"),
                    F.max((F.col("offset") == F.col("last")).cast("int")).alias("has_last"))
               .where((F.col("has_first") == 1) & (F.col("has_last") == 1))
               .select(*PLACE).distinct().withColumn("covered", F.lit(1)))
    read_runs = [r["run"] for r in reads.select("run").distinct().collect()]
    if not read_runs:
        return {}
    # Per run: the partitions of its final read, and how many of them a consumer read end to end.
    counts = {r["run"]: (r["n"], r["ok"]) for r in bounds.join(covered, PLACE, "left").groupBy("run")
              .agg(F.count(F.lit(1)).alias("n"), F.count("covered").alias("ok")).collect()}
    verdicts = {}
    for run in read_runs:
        n, ok = counts.get(run, (0, 0))
        if n == 0:
            continue  # no final read: `valid` is unknown there anyway (completeness.py)
        if ok == n:
            verdicts[run] = (True, f"every partition of the final read ({n}) was read from its first to its last offset")
        else:
            verdicts[run] = (False, f"{n - ok} of {n} partitions of the final read were not read from their first "
                                    "to their last offset by any consumer")
    return verdicts


NOT_CHECKED = "no consumer was seen to follow the run to its end (no consumer_done row; no consume rows, or no final read)"


def find_anomalies(history: DataFrame, views: HistoryViews, runs: list[str]
                   ) -> tuple[dict[str, Anomaly], dict[str, tuple[bool, str]], dict[str, dict[str, Any]]]:
    """Every anomaly of the contract, by name (all present); per run how `unseen` was decided
    (runs absent: not checked, `NOT_CHECKED`); and per run the record figures of checks.json's
    stats (`record_anomalies`). `history`: rows of the history holding at least its
    `consumer_done` and `consumer_seek` rows (loading.History.control); `runs`: the run ids."""
    unseen_rule = consumers_ran_to_the_end(history, views, runs)
    found, record_stats = record_anomalies(views, sorted(r for r, (ok, _) in unseen_rule.items() if ok), consumers_reach(history))
    found["inconsistent-offsets"] = inconsistent_offsets(views)
    steps = poll_steps(views, history).cache()
    found["nonmonotonic-poll"] = nonmonotonic_poll(steps)
    found["poll-skip"] = poll_skip(steps, views)
    steps.unpersist()
    return {name: found[name] for name in NAMES}, unseen_rule, record_stats
