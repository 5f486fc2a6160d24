"""The contract's history anomalies of one run, counted in plain Python from its `events/`, for the
campaigns: a campaign judges each run where it ran (`expect: catch` and `clean` name anomalies,
docs/reference/campaign-format.md), and cannot start Spark for each of a hundred thousand runs.

The rules are `observability/analysis/anomalies.py`'s (the Spark analysis, which also gives
examples and reads whole campaigns); `tests/spark/test_history_anomalies.py` holds the two to the
same counts on the library's histories. Counts only, per anomaly name:

- record anomalies, per identity (producer, sequence): `lost-write` (acknowledged ok, absent from
  the final read), `duplicate` (at two places of the reads: the final read and the consumers'), `uncommitted-read` (read, absent
  from the final read), `unseen` (acknowledged, committed, never read; judged only when the run's
  consumers followed it to the end, and below the offsets they reached), `aborted-read` (failed, never acknowledged, read or in the
  final read);
- `inconsistent-offsets`: a (topic, partition, offset) holding different records across the
  consumers' reads and the final read, counted in the distinct records found at such offsets;
- the poll anomalies, counted in polls (a poll is a consumer's, in one incarnation, whichever
  partitions it read): `nonmonotonic-poll` (a consumer's offset in a partition did not move
  forward) and `poll-skip` (it jumped over an offset the final read holds). A
  `consumer_seek` sets where a reading starts; a consumer's first read of a partition in an
  incarnation without a seek before it is not judged.

A partition whose final read did not complete (`final_read_done` with `complete` false) is left
out of every rule that reads the final read: its records would all look lost, and the analysis
calls such a history's verdict unknown.

Some of these are what Kafka's clients are promised may happen (`count_allowed`): a `lost-write` of
a record acknowledged with acks 1 or 0 that no consumer read (the leader alone had it, and a leader
change may drop it), and a `duplicate` of a record of a load producer without idempotence (a retry
of a batch whose first attempt was appended). A campaign that says it allows them (its `allow`)
excuses them (kraftlab/campaign/outcome.py); the counts above include them, as the analysis's do.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from observability.anomaly_names import ANOMALY_NAMES
from observability.history import SCHEMA, history_files

KINDS = ("produce_ack", "consume", "final_read", "final_read_done", "consumer_seek", "consumer_done", "topic_deleted",
         "load_started")
COLUMNS = ("node", "incarnation", "node_seq", "producer", "sequence", "topic", "topic_id", "partition", "offset", "outcome",
           "consumer", "poll", "complete", "acks", "idempotent")
# The record-level kinds: rows of a deleted topic (by `topic_id`) are left out of every rule.
RECORD_KINDS = ("produce_ack", "consume", "final_read")


def count_anomalies(events_dir: Path) -> dict[str, int]:
    """Every anomaly name of the contract with its count in the run whose history is `events_dir`."""
    return count_with_allowed(events_dir)[0]


def count_with_allowed(events_dir: Path) -> tuple[dict[str, int], dict[str, int]]:
    """`count_anomalies`, and of those counts the part Kafka's clients are promised may happen
    (the module's docstring): `lost-write` and `duplicate` only."""
    by_kind = _rows_by_kind(events_dir)
    _leave_out_deleted_topics(by_kind)
    incomplete = {(r["topic"], r["partition"]) for r in by_kind["final_read_done"] if not r["complete"]}
    final = [r for r in by_kind["final_read"] if (r["topic"], r["partition"]) not in incomplete]
    counts = dict.fromkeys(ANOMALY_NAMES, 0)
    records, allowed = _record_anomalies(by_kind, final, incomplete)
    counts.update(records)
    counts["inconsistent-offsets"] = _inconsistent_offsets(by_kind["consume"], final, incomplete)
    counts.update(_poll_anomalies(by_kind, final))
    return counts, allowed


def _leave_out_deleted_topics(by_kind: dict[str, list[dict]]) -> None:
    """A deleted topic's records are neither lost nor required (docs/reference): its rows go, so that
    a topic created again under the name is judged on its own records."""
    deleted = {r["topic_id"] for r in by_kind["topic_deleted"]}
    if deleted:
        for kind in RECORD_KINDS:
            by_kind[kind] = [r for r in by_kind[kind] if r["topic_id"] not in deleted]


def _rows_by_kind(events_dir: Path) -> dict[str, list[dict]]:
    """The rows of `KINDS`, per kind, as dicts of the columns that kind uses (read with Parquet's
    filter, then turned into Python values column by column: a run's history holds tens of
    thousands of these rows, and building one dict per row through pyarrow costs a second)."""
    files = history_files(events_dir)
    by_kind: dict[str, list[dict]] = defaultdict(list)
    if not files:
        return by_kind
    table = pa.concat_tables([pq.read_table(f, columns=["kind", *COLUMNS], filters=[("kind", "in", list(KINDS))], schema=SCHEMA)
                              for f in files])
    for kind in KINDS:
        part = table.filter(pc.equal(table["kind"], kind))
        if part.num_rows:
            columns = {name: part[name].to_pylist() for name in COLUMNS}
            by_kind[kind] = [dict(zip(COLUMNS, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    return by_kind


def _record_anomalies(by_kind, final: list[dict], incomplete: set) -> tuple[dict[str, int], dict[str, int]]:
    acked, failed, read = set(), set(), set()
    weakly_acked = set()  # acknowledged with acks 1 or 0: the leader's append, not the ISR's
    places: dict[tuple, set] = defaultdict(set)
    judged = set()  # identities seen outside the partitions whose final read did not complete
    for r in by_kind["produce_ack"]:
        identity = (r["producer"], r["sequence"])
        if (r["topic"], r["partition"]) not in incomplete:
            judged.add(identity)
        if r["outcome"] == "ok":
            acked.add(identity)
            if r["acks"] != "all":
                weakly_acked.add(identity)
        elif r["outcome"] == "fail":
            failed.add(identity)
    retrying_producers = {r["node"] for r in by_kind["load_started"] if r["idempotent"] is False}
    read_places: dict[tuple, set] = defaultdict(set)
    for r in by_kind["consume"]:
        identity = (r["producer"], r["sequence"])
        read.add(identity)
        read_places[identity].add((r["topic"], r["partition"], r["offset"]))
        if (r["topic"], r["partition"]) not in incomplete:
            judged.add(identity)
    for r in final:
        identity = (r["producer"], r["sequence"])
        places[identity].add((r["topic"], r["partition"], r["offset"]))
        judged.add(identity)
    unseen_judged = _consumers_ran_to_the_end(by_kind, final)
    reach = _consumers_reach(by_kind)
    counts = dict.fromkeys(("lost-write", "duplicate", "uncommitted-read", "unseen", "aborted-read"), 0)
    allowed = dict.fromkeys(("lost-write", "duplicate"), 0)
    for identity in judged:
        in_final = identity in places
        is_acked, is_read = identity in acked, identity in read
        lost = is_acked and not in_final
        duplicate = len(places.get(identity, set()) | read_places.get(identity, set())) > 1
        counts["lost-write"] += lost
        counts["duplicate"] += duplicate
        allowed["lost-write"] += lost and not is_read and identity in weakly_acked
        allowed["duplicate"] += duplicate and identity[0] in retrying_producers
        counts["uncommitted-read"] += is_read and not in_final
        counts["unseen"] += unseen_judged and is_acked and in_final and not is_read and _within_reach(reach, places[identity])
        counts["aborted-read"] += identity in failed and not is_acked and (in_final or is_read)
    return counts, allowed


def _consumers_ran_to_the_end(by_kind, final: list[dict]) -> bool:
    """Whether `unseen` is judged: every load consumer said it caught up (`consumer_done`), or,
    without such rows, some consumer read every partition of the final read from its first offset
    to its last (analysis/anomalies.py, `consumers_ran_to_the_end`)."""
    done = by_kind["consumer_done"]
    if done:
        return all(r["complete"] for r in done)
    if not by_kind["consume"] or not final:
        return False
    bounds: dict[tuple, list[int]] = {}
    for r in final:
        b = bounds.setdefault((r["topic"], r["partition"]), [r["offset"], r["offset"]])
        b[0], b[1] = min(b[0], r["offset"]), max(b[1], r["offset"])
    ends: dict[tuple, set[str]] = defaultdict(set)  # (topic, partition, consumer) -> {"first", "last"}
    for r in by_kind["consume"]:
        b = bounds.get((r["topic"], r["partition"]))
        if b is not None:
            if r["offset"] == b[0]:
                ends[(r["topic"], r["partition"], r["consumer"])].add("first")
            if r["offset"] == b[1]:
                ends[(r["topic"], r["partition"], r["consumer"])].add("last")
    covered = {(t, p) for (t, p, _), seen in ends.items() if len(seen) == 2}
    return covered >= set(bounds)


def _consumers_reach(by_kind) -> dict[tuple, int]:
    """Per (topic, partition), the furthest offset a load consumer reached there by the end
    (`consumer_done`'s `offset`): a record at or beyond it was committed after every consumer had
    stopped, never offered to them, and is not unseen (analysis/anomalies.py, `consumers_reach`)."""
    reach: dict[tuple, int] = {}
    for r in by_kind["consumer_done"]:
        if r["topic"] is not None and r["offset"] is not None:
            key = (r["topic"], r["partition"])
            reach[key] = max(reach.get(key, 0), r["offset"])
    return reach


def _within_reach(reach: dict[tuple, int], places: set[tuple]) -> bool:
    """Whether a record of the final read at `places` is below what the consumers reached at one
    of them (a partition no `consumer_done` row names, as in histories of one row per consumer:
    yes)."""
    return any(reach.get((topic, partition)) is None or offset < reach[(topic, partition)] for topic, partition, offset in places)


def _inconsistent_offsets(consumes: list[dict], final: list[dict], incomplete: set) -> int:
    held: dict[tuple, set] = defaultdict(set)
    for r in consumes:
        if (r["topic"], r["partition"]) not in incomplete:
            held[(r["topic"], r["partition"], r["offset"])].add((r["producer"], r["sequence"]))
    for r in final:
        held[(r["topic"], r["partition"], r["offset"])].add((r["producer"], r["sequence"]))
    # Counted in records (docs/reference: "the number of distinct records showing it"): every
    # record read at an offset that holds another one too.
    return len(set().union(*(records for records in held.values() if len(records) > 1)))


def _poll_anomalies(by_kind, final: list[dict]) -> dict[str, int]:
    """Each consumer's reads and seeks per (incarnation, topic, partition) in its own order
    (node_seq): a read not exactly one past the offset before it is a step to judge."""
    lanes: dict[tuple, list[tuple]] = defaultdict(list)
    for r in by_kind["consumer_seek"]:
        lanes[(r["consumer"], r["incarnation"], r["topic"], r["partition"])].append((r["node_seq"], r["offset"] - 1, None))
    for r in by_kind["consume"]:
        lanes[(r["consumer"], r["incarnation"], r["topic"], r["partition"])].append((r["node_seq"], r["offset"], r["poll"]))
    committed: dict[tuple, list[int]] = defaultdict(list)
    for r in final:
        committed[(r["topic"], r["partition"])].append(r["offset"])
    for offsets in committed.values():
        offsets.sort()
    # Counted in polls (docs/reference): one poll that went back in two partitions is one poll. A
    # restarted consumer numbers its polls from 0 again, so a poll is (consumer, incarnation, poll).
    backwards, skipped = set(), set()
    for (consumer, incarnation, topic, partition), lane in lanes.items():
        lane.sort()
        previous = None
        for _, offset, poll in lane:
            if poll is not None and previous is not None and offset != previous + 1:
                if offset <= previous:
                    backwards.add((consumer, incarnation, poll))
                elif _holds_between(committed.get((topic, partition), []), previous, offset):
                    skipped.add((consumer, incarnation, poll))
            previous = offset
    return {"nonmonotonic-poll": len(backwards), "poll-skip": len(skipped)}


def _holds_between(offsets: list[int], low: int, high: int) -> bool:
    """Whether the sorted `offsets` hold one strictly between `low` and `high`."""
    i = bisect_right(offsets, low)
    return i < len(offsets) and offsets[i] < high
