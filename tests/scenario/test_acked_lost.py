"""`acked_lost` counts acknowledged acks=all records missing from the committed log now
(docs/reference/steps-and-conditions.md, "Conditions"). While a partition has no leader, its committed log is whatever a
leader could come back with: the logs of its ISR and ELR members, running or stopped.
A clean shutdown flushes, so shutting every replica down loses nothing, while an OS crash of every
replica on page-cache storage loses what was never flushed ("why-kafka-does-not-need-fsync")."""

from observability.history import read_history
from observability.history_anomalies import count_anomalies

from .cli_runs import assert_ran_as_expected, run_text

CLUSTER = """
cluster:
  brokers: 3
  storage: page_cache
  config: {min.insync.replicas: 2}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
"""

# Ten records acknowledged by all three replicas, then every replica shut down (flushed).
SHUT_DOWN_AFTER_TEN = CLUSTER + """
steps:
  - produce: {topic: t, partition: 0, count: 10, acks: all, expect: acked}
  - shutdown: b3
  - shutdown: b2
  - shutdown: b1
"""

ALL_SHUT_DOWN = "name: all-replicas-shut-down\n" + SHUT_DOWN_AFTER_TEN + """
  - wait_for: {partition: t-0, leader: null, timeout_ms: 20000}
  - expect: {acked: 10, acked_lost: 0}          # on the stopped brokers' disks
  - restart: b1
  - restart: b2
  - restart: b3
  - wait_for: {partition: t-0, leader: "!= null", isr: [1, 2, 3], timeout_ms: 60000}
  - consume: {topic: t, partition: 0, expect_count: 10}
  - expect: {acked_lost: 0}
"""

ALL_CRASHED = "name: all-replicas-crash-their-os\n" + CLUSTER + """
steps:
  - produce: {topic: t, partition: 0, count: 10, acks: all, expect: acked}
  - crash: {node: b1, mode: os}
  - crash: {node: b2, mode: os}
  - crash: {node: b3, mode: os}
  - expect: {acked: 10, acked_lost: 10}         # acknowledged from the page caches, never flushed
"""


def test_records_on_the_disks_of_cleanly_stopped_replicas_are_not_lost(tmp_path):
    summary, result = run_text(tmp_path, ALL_SHUT_DOWN)
    assert_ran_as_expected(summary, result)
    assert summary["stats"]["acked_lost"] == 0


def test_records_only_in_the_page_caches_of_crashed_replicas_are_lost(tmp_path):
    summary, result = run_text(tmp_path, ALL_CRASHED)
    assert_ran_as_expected(summary, result)
    assert summary["stats"]["acked_lost"] == 10


ENDS_WITH_EVERY_REPLICA_DOWN = "name: ends-with-every-replica-down\n" + SHUT_DOWN_AFTER_TEN


def test_a_run_ending_with_every_replica_down_says_its_final_read_did_not_complete(tmp_path):
    # Not lost (on the disks) and not readable: the history must not let the final read's
    # absence pass for an empty log (docs/reference: `valid` is "unknown" then).
    summary, result = run_text(tmp_path, ENDS_WITH_EVERY_REPLICA_DOWN)
    assert_ran_as_expected(summary, result)
    assert summary["stats"]["acked_lost"] == 0
    history = read_history(tmp_path / "run" / "events").to_pylist()
    # One incomplete read for each replica that holds the committed log (ISR and ELR members),
    # none running.
    final = summary["final"]["partitions"]["t-0"]
    done = [(r["broker"], r["complete"]) for r in history if r["kind"] == "final_read_done"]
    assert sorted(done) == [(b, False) for b in sorted(set(final["isr"]) | set(final["elr"]))] and done
    assert not [r for r in history if r["kind"] == "final_read"]


LEADER_NOT_TAKEN_OVER = """
name: leader-back-without-a-controller
cluster:
  brokers: 3
  controllers: 1
  storage: page_cache
  config: {min.insync.replicas: 2}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [3, 1, 2]}}
steps:
  - produce: {topic: t, partition: 0, count: 10, acks: all, expect: acked}
  - wait: 2000                                   # the followers learn the HWM
  - crash: {node: c1, mode: process}             # no controller: nobody will fence broker 3
  - crash: {node: b3, mode: os}                  # the leader loses its page cache
  - restart: b3
  - wait: 3000
  - expect: {partition: t-0, leader: 3, acked_lost: 0}   # still the leader on paper, not acting
"""


def test_the_final_read_skips_a_leader_that_has_not_taken_over(tmp_path):
    # Broker 3 is back with an empty log and cannot register: it does not lead, so the records it
    # lost are on the followers, and the final read reads them there (as with no leader).
    summary, result = run_text(tmp_path, LEADER_NOT_TAKEN_OVER)
    assert_ran_as_expected(summary, result)
    history = read_history(tmp_path / "run" / "events").to_pylist()
    final = {(r["offset"], r["source"]) for r in history if r["kind"] == "final_read"}
    assert {offset for offset, _ in final} == set(range(10)) and {source for _, source in final} == {"replica"}
    assert count_anomalies(tmp_path / "run" / "events")["lost-write"] == 0
