"""An offline partition whose topic is given `unclean.leader.election.enable: true` gets a leader
from the active controller's periodic look at leaderless partitions (Kafka's QuorumController
.maybeScheduleNextElectUncleanLeaders, every `unclean.leader.election.interval.ms`), not only when a
broker comes back. Modelled on Kafka's UncleanLeaderElectionTest
.testTopicUncleanLeaderElectionEnableWithAlterTopicConfigs (ELR off, as that test runs)."""

from observability.history import read_history

from .cli_runs import assert_ran_as_expected, run_text

ENABLE_WHILE_OFFLINE = """
name: unclean-election-enabled-while-offline
cluster:
  brokers: 3
  controllers: 1
  protocol: {elr: false}
  config: {unclean.leader.election.interval.ms: 2000}
topics:
  - {name: t, replication_factor: 2, assignment: {0: [1, 2]}}
steps:
  - produce: {topic: t, partition: 0, values: [first], acks: all, expect: acked}
  - shutdown: b2
  - produce: {topic: t, partition: 0, values: [second], acks: all, expect: acked}   # b1 alone
  - shutdown: b1
  - restart: b2
  - wait_for: {broker: 2, fenced: false, timeout_ms: 20000}
  - wait: 5000                                     # two looks at the partition: unclean not allowed
  - expect: {partition: t-0, leader: null, isr: [1], elections_unclean: 0}
  - alter_config: {topic: t, config: {unclean.leader.election.enable: true}}
  - wait_for: {partition: t-0, leader: 2, timeout_ms: 2500}   # at the next look, within the interval
  - expect: {elections_unclean: 1}
  - produce: {topic: t, partition: 0, values: [third], acks: all, expect: acked}
  - consume: {topic: t, partition: 0, from: 0, expect_values: [first, third]}   # "second" is gone
expect_violations:
  - LeaderCompleteness              # broker 2 leads without "second", which was committed
  - TrueHWMMonotonic
"""


def test_enabling_unclean_election_on_an_offline_topic_elects_a_leader_at_the_next_look(tmp_path):
    summary, result = run_text(tmp_path, ENABLE_WHILE_OFFLINE)
    assert_ran_as_expected(summary, result)
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    changes = [r for r in rows if r["kind"] == "partition_change" and r["reason"] == "unclean_election_check"]
    assert {(r["leader"], tuple(r["isr"])) for r in changes} == {(2, (2,))}
