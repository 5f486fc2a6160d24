"""The names of the history anomalies (docs/reference/analysis.md), without Spark: `kraftlab analyze`
counts them (observability/analysis/anomalies.py) and campaign files name them (`expect: catch`)."""

from typing import NamedTuple

# The contract's seven, then kraftlab's addition: `aborted-read` (Jepsen's G1a), a record whose
# acknowledgement said `fail` ("surely not written") found in a read or in the final read.
ANOMALY_NAMES = ("lost-write", "duplicate", "inconsistent-offsets", "uncommitted-read", "nonmonotonic-poll", "poll-skip", "unseen",
                 "aborted-read")


class Anomaly(NamedTuple):
    """An anomaly's definition, for the documentation (kraftlab/reference_docs.py)."""

    name: str
    definition: str
    unit: str  # what `count` counts
    source: str


_JEPSEN = "Jepsen's Kafka workload (jepsen.tests.kafka)"
ANOMALIES: tuple[Anomaly, ...] = (
    Anomaly("lost-write", "acknowledged `ok`, absent from the final read", "records", _JEPSEN),
    Anomaly("duplicate", "one record (producer, sequence) at two or more offsets of the reads (the consumers' and the final read)",
            "records", _JEPSEN),
    Anomaly("inconsistent-offsets", "one partition offset holding different records in two reads", "records read at such an offset",
            _JEPSEN),
    Anomaly("uncommitted-read", "a consumer read a record that is absent from the final read", "records",
            "kraftlab's: a read of a record the log never committed"),
    Anomaly("nonmonotonic-poll", "a consumer's offsets in one partition go backwards from one poll to the next", "polls", _JEPSEN),
    Anomaly("poll-skip", "a consumer jumps over offsets present in the final read", "polls", _JEPSEN),
    Anomaly("unseen", "acknowledged `ok` and in the final read, never consumed, in a run whose consumers ran to the end", "records",
            _JEPSEN),
    Anomaly("aborted-read", "acknowledged `fail` (surely not written), yet in the final read or read by a consumer", "records",
            "Jepsen's G1a (aborted read), after Adya's isolation anomalies"),
)
assert tuple(a.name for a in ANOMALIES) == ANOMALY_NAMES
