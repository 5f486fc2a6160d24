"""The names of the history anomalies (contract.md, "`analysis/`"), without Spark: `kraftlab analyze`
counts them (observability/analysis/anomalies.py) and campaign files name them (`expect: catch`)."""

# The contract's seven, then kraftlab's addition: `aborted-read` (Jepsen's G1a), a record whose
# acknowledgement said `fail` ("surely not written") found in a read or in the final read.
ANOMALY_NAMES = ("lost-write", "duplicate", "inconsistent-offsets", "uncommitted-read", "nonmonotonic-poll", "poll-skip", "unseen",
                 "aborted-read")
