"""After an unclean recovery the log starts over from its leader; a broker cut off before it still
believes it leads an older epoch, with that epoch's HWM. The checks must not take that stale HWM
for the true HWM of the new log: if they did, every new ISR member would look incomplete
(LeaderCandidateCompleteness) although it holds the whole new log.

Found by the `switches-kip-903` campaign (all switches on, seed 53), whose minimal scenario is this
one in spirit: the leader b1 isolated, then both other replicas lose their unflushed page cache in
OS crashes (MinISR lossy unclean shutdowns: beyond the protocol's tolerance, replication-
correctness.md §6.2), so the controller falls back to unclean recovery (KIP-966, balanced) and
elects an empty replica. What is lost there is the protocol's limit, and the checks report it
(the 5 records lost, LeaderCompleteness, TrueHWMMonotonic, and LogMatching between
the old log and the new one until b1 truncates); nothing else."""

import json

from click.testing import CliRunner

from kraftlab.cli import main

STALE_LEADER = """
name: stale-leader-after-unclean-recovery
cluster:
  brokers: 3
  storage: page_cache                  # nothing is flushed within 30 s (dirty_expire_ms)
  config: {min.insync.replicas: 2, broker.session.timeout.ms: 3000, broker.heartbeat.interval.ms: 1000}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - produce: {topic: t, count: 5, acks: all, expect: acked}   # HWM 5 on the leader b1
  - isolate: b1                                              # b1 keeps leading epoch 0, HWM 5
  - wait_for: {partition: t-0, leader: "!= 1", isr: [2, 3], timeout_ms: 20000}
  - crash: {node: b3, mode: os}                              # loses the 5 records
  - restart: b3
  - crash: {node: b2, mode: os}                              # loses them too: 2 = MinISR lossy
  - restart: b2
  - wait_for: {partition: t-0, leader: "!= null", elections_unclean: 1, timeout_ms: 30000}
  - produce: {topic: t, count: 3, acks: all, expect: acked}  # the new log
  - wait_for: {partition: t-0, isr: [2, 3], timeout_ms: 30000}   # b1 still cut off
  - wait: 2000
  - heal: all
  - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
  - expect: {acked: 8, acked_lost: 5}   # lost beyond tolerance (the check itself is excused there)
expect_violations:                     # what beyond-tolerance loss breaks, and only that
  - LeaderCompleteness
  - TrueHWMMonotonic
  - LogMatching                        # b1, back, compared before it truncates its old log
"""


def test_a_stale_leader_of_the_old_log_does_not_raise_the_true_hwm(tmp_path):
    source = tmp_path / "stale-leader.yaml"
    source.write_text(STALE_LEADER)
    result = CliRunner().invoke(main, ["run", str(source), "--out", str(tmp_path / "run")])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["failures"] == [], summary["failures"]
    found = {v["invariant"] for v in summary["violations"]}
    assert "LeaderCandidateCompleteness" not in found, summary["violations"]
    assert found == set(summary["expect_violations"]), summary["violations"]
    assert summary["ok"] is True and result.exit_code == 0, result.output
