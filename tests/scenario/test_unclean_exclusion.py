"""UncleanExclusion is judged from the broker's unclean start, not from the replicas it still held:
after a disk loss the broker restarts with no log at all, its replica is created from the metadata,
and without ELR it is elected at once with nothing (the KIP-966 article)."""

from .cli_runs import assert_ran_as_expected, run_text

DISK_LOSS_WITHOUT_ELR = """
name: disk-loss-no-elr
cluster:
  brokers: 3
  storage: page_cache
  config: {min.insync.replicas: 2}
  protocol: {elr: false}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - produce: {topic: t, count: 10, acks: all, expect: acked}
  - isolate: b3
  - wait_for: {partition: t-0, leader: 1, isr: [1, 2], timeout_ms: 20000}
  - isolate: b2
  - wait_for: {partition: t-0, leader: 1, isr: [1], elr: [], timeout_ms: 20000}
  - crash: {node: b1, mode: disk}                   # the leader's disk is gone
  - wait_for: {partition: t-0, leader: null, isr: [1], timeout_ms: 20000}
  - restart: b1                                     # no log, no clean-shutdown marker
  - wait_for: {partition: t-0, leader: 1, isr: [1], timeout_ms: 30000}
  - heal: all
  - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
  - expect: {acked: 10, acked_lost: 10}
expect_violations:
  - UncleanExclusion                # back from an unclean start with LEO 0, it leads
  - LeaderCompleteness
  - TrueHWMMonotonic
  - LeaderCandidateCompleteness
  - NoCommittedRecordLostGlobally
"""


def test_a_broker_back_from_a_disk_loss_is_caught_leading_without_the_committed_records(tmp_path):
    summary, result = run_text(tmp_path, DISK_LOSS_WITHOUT_ELR)
    assert_ran_as_expected(summary, result)
