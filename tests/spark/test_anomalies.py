"""Each anomaly of docs/reference/analysis.md) on a small hand-built history that shows exactly
it and nothing else; a clean history; and the histories that cannot give a verdict."""

from __future__ import annotations

import json

import pytest

from observability.analysis.analyze import analyze_run
from observability.analysis.anomalies import NAMES
from observability.events import ConsumerDone
from observability.history_anomalies import count_anomalies

from .histories import LOAD_CONSUMER, STEP_CONSUMER, History, clean, produced


def analyze(spark, history: History, tmp_path, summary: dict | None = None) -> dict:
    run_dir = history.write(tmp_path / "run")
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary))
    checks, _ = analyze_run(run_dir, engine="local", spark=spark)
    # What was returned is what was written.
    assert json.loads((run_dir / "analysis" / "checks.json").read_text()) == checks
    if checks["valid"] != "unknown":
        # The campaigns count the same anomalies in plain Python (observability/history_anomalies.py).
        assert count_anomalies(run_dir / "events") == counts(checks)
    return checks


def counts(checks: dict) -> dict[str, int]:
    return {name: a["count"] for name, a in checks["anomalies"].items()}


def only(name: str, count: int) -> dict[str, int]:
    return {n: (count if n == name else 0) for n in NAMES}


def test_a_clean_history_is_valid(spark, tmp_path):
    checks = analyze(spark, clean(), tmp_path)
    assert checks["valid"] is True and "reason" not in checks
    assert list(checks["anomalies"]) == list(NAMES)
    assert counts(checks) == only("lost-write", 0)
    assert checks["engine"] == "local" and checks["runs"] == 1 and checks["invariants"] == {}
    assert checks["events"] == 2 * 5 + 5 + 1 + 5 + 1  # sends, acks, consumed, done, final read, done
    stats = checks["stats"]
    assert (stats["sent"], stats["acked"], stats["failed"], stats["indeterminate"], stats["consumed"], stats["final_read"]) == (5, 5, 0, 0, 5, 5)
    assert stats["unseen_checked"]["checked"] is True
    # Latencies 10..14 ms (histories.py): exact percentiles by linear interpolation.
    assert stats["latency_ms"]["p50"] == 12.0 and stats["latency_ms"]["max"] == 14.0


def test_lost_write(spark, tmp_path):
    h = produced().consume(LOAD_CONSUMER, 0, range(4)).consumer_done().final(0, range(4)).final_done()
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("lost-write", 1)
    assert checks["anomalies"]["lost-write"]["examples"] == [
        {"producer": "p1", "sequence": 4, "topic": "t", "partition": 0, "offset": 4, "acks": "all"}]
    assert checks["stats"]["lost_by_acks"] == {"all": 1}
    assert checks["valid"] is False


def test_duplicate(spark, tmp_path):
    # Record 4 twice in the committed log (offsets 4 and 5), read there both times.
    h = (produced().consume(LOAD_CONSUMER, 0, range(5)).consume(LOAD_CONSUMER, 5, [4]).consumer_done()
         .final(0, range(5)).final(5, [4]).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("duplicate", 1)
    (example,) = checks["anomalies"]["duplicate"]["examples"]
    assert (example["producer"], example["sequence"]) == ("p1", 4)
    assert [a["offset"] for a in example["at"]] == [4, 5]


def test_a_record_a_consumer_read_at_two_offsets_is_a_duplicate(spark, tmp_path):
    # Jepsen's duplicate is "a single value ... at more than one offset" in any read, not only the
    # final read: the consumer read record 2 at offset 2, then again at offset 5 (a log the final
    # read no longer shows past 4).
    h = (produced().consume(LOAD_CONSUMER, 0, range(5)).consume(LOAD_CONSUMER, 5, [2]).consumer_done()
         .final(0, range(5)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("duplicate", 1)
    (example,) = checks["anomalies"]["duplicate"]["examples"]
    assert (example["producer"], example["sequence"]) == ("p1", 2)
    assert [a["offset"] for a in example["at"]] == [2, 5]


def test_every_replica_reading_a_record_at_the_same_place_is_no_duplicate(spark, tmp_path):
    # With no leader at the end, the final read reads every replica's log (its rows repeat): a
    # record found at one place by three replicas is one record at one place; record 4 is at
    # offset 4 on two replicas and at offset 5 on the third, so it is at two places.
    h = produced().consume(LOAD_CONSUMER, 0, range(5)).consumer_done()
    for broker in (1, 2, 3):
        h = h.final(0, range(4), broker=broker).final_done(broker=broker)
    h = h.final(4, [4], broker=1).final(4, [4], broker=2).final(5, [4], broker=3)
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("duplicate", 1)
    (example,) = checks["anomalies"]["duplicate"]["examples"]
    assert (example["sequence"], [a["offset"] for a in example["at"]]) == (4, [4, 5])
    assert checks["stats"]["final_read"] == 5  # distinct records, not rows


def test_inconsistent_offsets(spark, tmp_path):
    # The consumer read records 3 and 4 at each other's offsets: two offsets, two records each;
    # and each of the two records at two offsets, which Jepsen counts as a duplicate too.
    h = (produced().consume(LOAD_CONSUMER, 0, range(3)).consume(LOAD_CONSUMER, 3, [4, 3]).consumer_done()
         .final(0, range(5)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == {**only("inconsistent-offsets", 2), "duplicate": 2}
    examples = checks["anomalies"]["inconsistent-offsets"]["examples"]
    assert [(e["offset"], [r["sequence"] for r in e["records"]]) for e in examples] == [(3, [3, 4]), (4, [3, 4])]


def test_inconsistent_offsets_counts_the_records_at_the_offset_not_the_offsets(spark, tmp_path):
    # An unclean election as a consumer sees it: it read records 0-4 at offsets 0-4; the log that
    # won lost record 3 and holds record 4 at offset 3. One offset (3) holds two records, 3 and 4:
    # docs/reference counts "the number of distinct records showing it", 2. Record 3 is also lost
    # and was read uncommitted; record 4, at offset 4 of a read and 3 of the final read, is at two
    # offsets: a duplicate, as Jepsen counts one ("a single value ... at more than one offset").
    h = (produced().consume(LOAD_CONSUMER, 0, range(5)).consumer_done()
         .final(0, range(3)).final(3, [4]).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == {**only("inconsistent-offsets", 2), "lost-write": 1, "uncommitted-read": 1, "duplicate": 1}
    examples = checks["anomalies"]["inconsistent-offsets"]["examples"]
    assert [(e["offset"], [r["sequence"] for r in e["records"]]) for e in examples] == [(3, [3, 4])]


def test_uncommitted_read_and_an_indeterminate_record_is_not_lost(spark, tmp_path):
    # Record 5's outcome is unknown ("info"): the consumer read it at offset 5, the final read
    # lacks it. Reading it is an anomaly; its absence is not a lost write.
    h = (produced().produce([5], None, outcome="info").consume(LOAD_CONSUMER, 0, range(6)).consumer_done()
         .final(0, range(5)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("uncommitted-read", 1)
    assert checks["anomalies"]["uncommitted-read"]["examples"] == [
        {"producer": "p1", "sequence": 5, "topic": "t", "partition": 0, "offset": 5, "consumer": LOAD_CONSUMER}]
    assert checks["stats"]["indeterminate"] == 1 and checks["stats"]["acked"] == 5


def test_aborted_read_a_failed_record_found_in_the_log(spark, tmp_path):
    """Jepsen's G1a: record 5's acknowledgement said `fail` ("surely not written"), yet the final
    read holds it at offset 5 (read by no consumer: the example shows the final read's place).
    A record of unknown outcome (`info`) in the log is no anomaly: it may have been written."""
    h = (produced().produce([5], None, outcome="fail").produce([6], None, outcome="info")
         .consume(LOAD_CONSUMER, 0, range(5)).consumer_done().final(0, range(7)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("aborted-read", 1)
    assert checks["anomalies"]["aborted-read"]["examples"] == [
        {"producer": "p1", "sequence": 5, "topic": "t", "partition": 0, "offset": 5}]
    assert checks["valid"] is False


def test_a_failed_record_absent_from_every_read_is_no_anomaly(spark, tmp_path):
    h = produced().produce([5], None, outcome="fail").consume(LOAD_CONSUMER, 0, range(5)).consumer_done().final(0, range(5)).final_done()
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("aborted-read", 0) and checks["valid"] is True


def test_nonmonotonic_poll(spark, tmp_path):
    # The third poll goes back to offset 2.
    h = (produced().consume(LOAD_CONSUMER, 0, range(3)).consume(LOAD_CONSUMER, 3, range(3, 5))
         .consume(LOAD_CONSUMER, 2, range(2, 5)).consumer_done().final(0, range(5)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("nonmonotonic-poll", 1)
    assert checks["anomalies"]["nonmonotonic-poll"]["examples"] == [
        {"consumer": LOAD_CONSUMER, "incarnation": 0, "poll": 2, "topic": "t", "partition": 0, "offset": 2, "previous": 4,
         "producer": "p1", "sequence": 2}]


def test_poll_skip(spark, tmp_path):
    # The load consumer jumps from offset 1 to 3 over committed offset 2 (which the step consumer
    # reads, so that record 2 is not unseen).
    h = (produced().consume(LOAD_CONSUMER, 0, range(2)).consume(LOAD_CONSUMER, 3, range(3, 5)).consumer_done()
         .consume(STEP_CONSUMER, 2, [2]).final(0, range(5)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("poll-skip", 1)
    assert checks["anomalies"]["poll-skip"]["examples"] == [
        {"consumer": LOAD_CONSUMER, "incarnation": 0, "poll": 1, "topic": "t", "partition": 0, "offset": 3, "previous": 1,
         "producer": "p1", "sequence": 3, "skipped": 1}]


def test_a_step_consumer_reading_again_from_an_earlier_offset_is_no_poll_anomaly(spark, tmp_path):
    # Two consume steps, each from offset 0: what the scenario asked for (each starts with a seek).
    h = (clean().seek(STEP_CONSUMER, 0).consume(STEP_CONSUMER, 0, range(5))
         .seek(STEP_CONSUMER, 0).consume(STEP_CONSUMER, 0, range(5)))
    checks = analyze(spark, h, tmp_path)
    assert checks["valid"] is True, counts(checks)


def test_without_a_seek_reading_again_from_an_earlier_offset_is_a_nonmonotonic_poll(spark, tmp_path):
    h = clean().seek(STEP_CONSUMER, 0).consume(STEP_CONSUMER, 0, range(5)).consume(STEP_CONSUMER, 0, range(5))
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("nonmonotonic-poll", 1)


def test_a_seek_makes_its_consumer_s_first_read_judged_from_there(spark, tmp_path):
    # A load consumer told to start at 0 whose first read is at offset 2 jumped over 0 and 1.
    h = (produced().seek(LOAD_CONSUMER, 0).consume(LOAD_CONSUMER, 2, range(2, 5)).consumer_done()
         .consume(STEP_CONSUMER, 0, range(2)).final(0, range(5)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == only("poll-skip", 1)


def unread_last_record(complete: bool | None) -> History:
    h = produced().consume(LOAD_CONSUMER, 0, range(4))
    if complete is not None:
        h.consumer_done(complete=complete)
    return h.final(0, range(5)).final_done()


def test_unseen_when_the_consumers_ran_to_the_end(spark, tmp_path):
    checks = analyze(spark, unread_last_record(complete=True), tmp_path)
    assert counts(checks) == only("unseen", 1)
    assert checks["anomalies"]["unseen"]["examples"] == [{"producer": "p1", "sequence": 4, "topic": "t", "partition": 0, "offset": 4}]


def test_unseen_judges_only_what_the_consumers_reached(spark, tmp_path):
    """Records 3 and 4 were committed after the load consumer stopped at offset 3 (an acks=1
    record acknowledged before the catch-up began, committed as it ended): never offered to it,
    not unseen. A record below where it stopped that it never read (1: it jumped from 0 to 2) is."""
    h = (produced().consume(LOAD_CONSUMER, 0, [0]).consume(LOAD_CONSUMER, 2, [2]).consumer_done(reached=3)
         .final(0, range(5)).final_done())
    checks = analyze(spark, h, tmp_path)
    assert counts(checks) == {**only("unseen", 1), "poll-skip": 1}
    assert checks["anomalies"]["unseen"]["examples"] == [{"producer": "p1", "sequence": 1, "topic": "t", "partition": 0, "offset": 1}]
    assert checks["stats"]["unseen_checked"]["checked"] is True


@pytest.mark.parametrize("complete", [False, None], ids=["consumer-behind", "no-load-consumer"])
def test_unseen_is_not_checked_unless_the_consumers_ran_to_the_end(spark, tmp_path, complete):
    checks = analyze(spark, unread_last_record(complete), tmp_path)
    assert counts(checks) == only("unseen", 0)
    assert checks["valid"] is True
    assert checks["stats"]["unseen_checked"]["checked"] is False
    # Without consumer_done rows, whether a consumer read t-0 from its first offset to its last.
    assert ("consumer_done" if complete is False else "not read from their first to their last offset") in checks["stats"]["unseen_checked"]["reason"]


def test_a_node_seq_gap_makes_the_verdict_unknown(spark, tmp_path):
    # Three rows of the load consumer never reached the history before its last one.
    h = clean().add(LOAD_CONSUMER, ConsumerDone(LOAD_CONSUMER, True), skip_seq=3)
    checks = analyze(spark, h, tmp_path)
    assert checks["valid"] == "unknown"
    assert f"node_seq gap: node {LOAD_CONSUMER} incarnation 0" in checks["reason"]
    assert counts(checks) == only("lost-write", 0)  # the anomalies are still counted


def test_no_final_read_makes_the_verdict_unknown_not_invalid(spark, tmp_path):
    h = produced().consume(LOAD_CONSUMER, 0, range(5)).consumer_done()
    checks = analyze(spark, h, tmp_path)
    assert checks["valid"] == "unknown"
    assert "no final read although records were produced" in checks["reason"]
    # Every acknowledged record looks lost without a final read: counted, but no verdict.
    assert checks["anomalies"]["lost-write"]["count"] == 5


def test_a_completed_final_read_of_an_empty_log_is_an_answer(spark, tmp_path):
    # Every acknowledged record was wiped: the final read completed and found nothing.
    h = produced().final_done(hwm=0)
    checks = analyze(spark, h, tmp_path)
    assert checks["valid"] is False and "reason" not in checks
    assert checks["anomalies"]["lost-write"]["count"] == 5


def test_an_incomplete_final_read_makes_the_verdict_unknown(spark, tmp_path):
    h = produced().consume(LOAD_CONSUMER, 0, range(5)).consumer_done().final(0, range(3)).final_done(complete=False)
    checks = analyze(spark, h, tmp_path)
    assert checks["valid"] == "unknown"
    assert "final read incomplete: t-0 from broker 1" in checks["reason"]


def test_online_invariant_violations_from_the_summary_make_the_history_invalid(spark, tmp_path):
    # LeaderCompleteness needs each replica's log replayed: Spark does not re-check it, the
    # run's own online checker did (summary.json), and checks.json says so.
    summary = {"violations": [{"invariant": "LeaderCompleteness", "at_ms": 12.5, "detail": "t-0: ...", "count": 3}]}
    checks = analyze(spark, clean(), tmp_path, summary)
    assert counts(checks) == only("lost-write", 0)
    assert checks["invariants"] == {"LeaderCompleteness": {"count": 3, "examples": [{"at_ms": 12.5, "detail": "t-0: ..."}],
                                                           "source": "online"}}
    assert checks["valid"] is False


def test_node_seq_gaps_are_found_exactly_across_bitmap_buckets(spark):
    # The distinct count sums Spark's bitmaps of 32,768 numbers each (completeness.py): a group
    # spanning several buckets, a gap at a bucket's edge, duplicates hiding a gap from a row count.
    from observability.analysis.completeness import incomplete_reasons

    def rows(node: str, numbers) -> list[tuple]:
        return [("r", node, 0, n) for n in numbers]

    whole = rows("whole", range(70_000))
    edge = rows("edge", [n for n in range(70_000) if n != 32_768])  # 32,768 ends bucket 1
    # as many rows as 0..69,999 would have, 65,536 written twice and 40,000 missing
    hidden = rows("hidden", [n for n in range(70_000) if n != 40_000] + [65_536])
    late = rows("late", range(1, 100))  # does not start at 0
    df = spark.createDataFrame(whole + edge + hidden + late, "run string, node string, incarnation int, node_seq long")
    df = df.selectExpr("*", "CAST(NULL AS STRING) AS kind", "CAST(NULL AS BOOLEAN) AS complete",
                       "CAST(0 AS DOUBLE) AS time_ms", "CAST(NULL AS STRING) AS outcome",
                       "CAST(NULL AS STRING) AS topic", "CAST(NULL AS INT) AS partition", "CAST(NULL AS INT) AS broker")
    reasons = incomplete_reasons(df)["r"]
    assert reasons == [
        "node_seq gap: node edge incarnation 0 has 69999 rows numbered 0..69999",
        "node_seq gap: node hidden incarnation 0 has 69999 rows numbered 0..69999",
        "node_seq gap: node late incarnation 0 has 99 rows numbered 1..99",
    ]
