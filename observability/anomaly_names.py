"""The names of the history anomalies (contract.md, "`analysis/`"), without Spark: `kraftlab analyze`
counts them (observability/analysis/anomalies.py) and campaign files name them (`expect: catch`)."""

ANOMALY_NAMES = ("lost-write", "duplicate", "inconsistent-offsets", "uncommitted-read", "nonmonotonic-poll", "poll-skip", "unseen")
