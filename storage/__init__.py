"""Log and quorum-state storage with crash semantics (fsync / page cache / process buffer)."""
