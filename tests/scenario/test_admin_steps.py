"""The admin steps and the controller keys of docs/reference in the simulator, as scenario files: each
step's answer is Kafka's error name (`expect_error`, the history's `admin_answer`), topics and
partitions made while the run goes on, reassignments merged and cancelled, a controlled shutdown
that lasts until the others know, and the automatic leader rebalance."""

import textwrap

import pytest
import yaml

from kraftlab.runner import run_scenario
from observability.history import read_rows
from workloads.scenario.loading import ScenarioError, validate


def run_yaml(tmp_path, body: str):
    text = textwrap.dedent(body)
    scenario = validate(yaml.safe_load(text), "inline.yaml", text)
    result = run_scenario(scenario, source="inline.yaml", out_dir=tmp_path / "run")
    return result.summary, read_rows(result.run_dir / "events")


def assert_ok(summary):
    assert summary["ok"], (summary["failures"], summary["violations"])


def test_admin_answers_are_kafkas_error_names_and_go_into_the_history(tmp_path):
    summary, rows = run_yaml(tmp_path, """
        name: admin-errors
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - elect: {partition: t-0, type: preferred, expect_error: ELECTION_NOT_NEEDED}
          - elect: {partition: t-0, type: unclean, expect_error: ELECTION_NOT_NEEDED}
          - elect: {partition: nope-0, expect_error: UNKNOWN_TOPIC_OR_PARTITION}
          - reassign: {partition: t-0, replicas: [1, 2, 9], expect_error: INVALID_REPLICA_ASSIGNMENT}
          - reassign: {partition: t-0, replicas: [1, 1, 2], expect_error: INVALID_REPLICA_ASSIGNMENT}
          - cancel_reassignment: {partition: t-0, expect_error: NO_REASSIGNMENT_IN_PROGRESS}
          - alter_config: {topic: nope, config: {min.insync.replicas: 2}, expect_error: UNKNOWN_TOPIC_OR_PARTITION}
          - create_topic: {name: t, expect_error: TOPIC_ALREADY_EXISTS}
          - create_topic: {name: u, replication_factor: 3, partitions: 1}
          - reassign: {partition: t-0, replicas: [3, 2, 1]}
        """)
    assert_ok(summary)
    answers = [(r["call"], r["error"]) for r in rows if r["kind"] == "admin_answer"]
    assert answers == [
        ("elect", "ELECTION_NOT_NEEDED"), ("elect", "ELECTION_NOT_NEEDED"), ("elect", "UNKNOWN_TOPIC_OR_PARTITION"),
        ("reassign", "INVALID_REPLICA_ASSIGNMENT"), ("reassign", "INVALID_REPLICA_ASSIGNMENT"),
        ("cancel_reassignment", "NO_REASSIGNMENT_IN_PROGRESS"), ("alter_config", "UNKNOWN_TOPIC_OR_PARTITION"),
        ("create_topic", "TOPIC_ALREADY_EXISTS"), ("create_topic", "NONE"), ("reassign", "NONE"),
    ]


def test_an_answer_other_than_the_expected_error_fails_the_step(tmp_path):
    summary, _ = run_yaml(tmp_path, """
        name: admin-unexpected
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - elect: {partition: t-0, type: preferred, expect_error: NONE}
        """)
    (failure,) = summary["failures"]
    assert failure["step"] == 0 and "expected NONE, the controller answered ELECTION_NOT_NEEDED" in failure["detail"]


def test_a_step_that_expects_an_error_may_name_what_does_not_exist_but_others_may_not(tmp_path):
    body = """
        name: bad-ref
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3}]
        steps:
          - reassign: {partition: nope-0, replicas: [1, 2, 3]}
        """
    with pytest.raises(ScenarioError, match=r"steps\[0\]\.reassign\.partition.*unknown topic 'nope'"):
        run_yaml(tmp_path, body)


def test_topics_and_partitions_made_while_the_run_goes_on_take_records(tmp_path):
    summary, rows = run_yaml(tmp_path, """
        name: create-while-running
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - expect: {partition: u-0, exists: false}
          - create_topic: {name: u, partitions: 2, replication_factor: 2}
          - wait_for: {partition: u-1, leader: "!= null", exists: true, timeout_ms: 5000}
          - produce: {topic: u, partition: 1, count: 5, acks: all, expect: acked}
          - create_partitions: {topic: t, count: 3, assignment: {1: [2, 3, 1], 2: [3, 1, 2]}}
          - wait_for: {partition: t-2, leader: 3, isr: [1, 2, 3], preferred_leader: 3, timeout_ms: 5000}
          - produce: {topic: t, partition: 2, count: 5, acks: all, expect: acked}
          - consume: {topic: t, partition: 2, expect_count: 5}
          - create_partitions: {topic: t, count: 3, expect_error: INVALID_PARTITIONS}
          - create_partitions: {topic: t, count: 4, assignment: {3: [1, 2]}, expect_error: INVALID_REPLICA_ASSIGNMENT}
        """)
    assert_ok(summary)
    assert summary["stats"]["acked"] == 10 and summary["stats"]["acked_lost"] == 0
    assert {"u-0", "u-1", "t-2"} <= set(summary["final"]["partitions"])
    # The epilogue's final read covers them too: their acknowledged records are neither lost nor unread.
    read = {(r["topic"], r["partition"]) for r in rows if r["kind"] == "final_read_done"}
    assert read == {("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)}


def test_load_covers_the_topics_and_partitions_made_before_it(tmp_path):
    """`load` reads the partitions as of its step: a topic made by `create_topic` may be named, and
    the default (every topic) takes in it and the partitions `create_partitions` added."""
    summary, rows = run_yaml(tmp_path, """
        name: load-on-new-partitions
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - create_topic: {name: u, partitions: 2, replication_factor: 3}
          - create_partitions: {topic: t, count: 2}
          - wait_for: {partition: u-1, leader: "!= null", timeout_ms: 5000}
          - wait_for: {partition: t-1, leader: "!= null", timeout_ms: 5000}
          - load: {topics: [u], rate_per_s: 100, consumers: 0}
          - load: {rate_per_s: 100, consumers: 0}
          - wait: 2000
        """)
    assert_ok(summary)
    acked = [r for r in rows if r["kind"] == "produce_ack" and r["outcome"] == "ok"]
    by_producer = {}
    for r in acked:
        by_producer.setdefault(r["producer"], set()).add((r["topic"], r["partition"]))
    first, second = (by_producer[name] for name in sorted(by_producer))  # one producer per load step
    assert first == {("u", 0), ("u", 1)} and second == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}
    assert summary["stats"]["acked_lost"] == 0


def test_load_on_a_topic_that_does_not_exist_fails_the_step(tmp_path):
    summary, _ = run_yaml(tmp_path, """
        name: load-on-a-deleted-topic
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3}]
        steps:
          - create_topic: {name: u, partitions: 1, replication_factor: 3}
          - delete_topic: {name: u}
          - wait_for: {partition: u-0, exists: false, timeout_ms: 5000}
          - load: {topics: [u], rate_per_s: 100}
        """)
    assert [(f["step"], f["detail"]) for f in summary["failures"]] == [(3, "load: no topic u exists now")]


def test_a_new_reassignment_replaces_the_one_in_progress_and_a_cancel_goes_back(tmp_path):
    """ReplicationControlManager.changePartitionReassignment computes a new target from the replica
    set as it is (4, already a replica, is no longer "adding"); cancelPartitionReassignment takes
    out the replicas being added (5) and keeps the rest: PartitionReassignmentRevert goes back one
    reassignment, not to the replicas before the first."""
    summary, rows = run_yaml(tmp_path, """
        name: reassign-merge-cancel
        cluster: {brokers: 5}
        topics: [{name: t, replication_factor: 2, assignment: {0: [1, 2]}}]
        steps:
          - isolate: b3
          - isolate: b4
          - reassign: {partition: t-0, replicas: [3, 4]}
          - wait_for: {partition: t-0, replicas: [3, 4, 1, 2], adding_replicas: [3, 4], removing_replicas: [1, 2], isr: [1, 2], timeout_ms: 1000}
          - reassign: {partition: t-0, replicas: [4, 5]}
          - wait_for: {partition: t-0, replicas: [4, 5, 1, 2, 3], adding_replicas: [5], removing_replicas: [1, 2, 3], timeout_ms: 1000}
          - cancel_reassignment: {partition: t-0}
          - wait_for: {partition: t-0, replicas: [4, 1, 2, 3], adding_replicas: [], removing_replicas: [], isr: [1, 2], leader: 1, timeout_ms: 1000}
        """)
    assert_ok(summary)
    kinds = [r["kind"] for r in rows if r["kind"].startswith("reassignment_")]
    assert kinds == ["reassignment_started", "reassignment_started", "reassignment_cancelled"]


def test_setting_a_topics_min_isr_to_its_own_value_keeps_the_elr(tmp_path):
    """ConfigurationControlManager writes no config record for an unchanged topic value, so
    nothing clears the ELR; a new value does."""
    summary, _ = run_yaml(tmp_path, """
        name: unchanged-min-isr
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}, config: {min.insync.replicas: 2}}]
        steps:
          - isolate: b3
          - wait_for: {partition: t-0, isr: [1, 2], timeout_ms: 30000}
          - isolate: b2
          - wait_for: {partition: t-0, isr: [1], elr: [2], timeout_ms: 30000}
          - alter_config: {topic: t, config: {min.insync.replicas: 2}}
          - wait: 500
          - expect: {partition: t-0, elr: [2]}
          - alter_config: {topic: t, config: {min.insync.replicas: 3}}
          - wait_for: {partition: t-0, elr: [], timeout_ms: 5000}
        """)
    assert_ok(summary)


def test_a_controlled_shutdown_lasts_until_the_others_know_and_the_flag_stays_until_registration(tmp_path):
    """BrokerHeartbeatManager: the leader b1 enters controlled shutdown, its leadership moves, and
    it may go once every active broker has applied those records; its registration keeps
    in_controlled_shutdown until it registers again."""
    summary, rows = run_yaml(tmp_path, """
        name: controlled-shutdown-flag
        cluster: {brokers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - shutdown: {node: b1, wait: false}
          - wait_for: {broker: 1, in_controlled_shutdown: true, alive: true, fenced: false, timeout_ms: 5000}
          - wait_for: {partition: t-0, leader: 2, isr: [2, 3], timeout_ms: 5000}
          - wait_for: {broker: 1, alive: false, timeout_ms: 10000}
          - expect: {broker: 1, fenced: true, in_controlled_shutdown: true}
          - restart: b1
          - wait_for: {broker: 1, fenced: false, in_controlled_shutdown: false, timeout_ms: 20000}
        """)
    assert_ok(summary)
    stop = next(r["time_ms"] for r in rows if r["kind"] == "process_stop" and r["node"] == "b1")
    moved = min(r["time_ms"] for r in rows if r["kind"] == "partition_change" and r["leader"] == 2)
    heartbeat_ms = 2000
    # Not in the same instant as the move (nor about 30 ms after the request): the other
    # brokers' next heartbeats must show the records applied first.
    assert stop > moved and stop - moved < 2 * heartbeat_ms + 1000


@pytest.mark.parametrize("enabled, leader", [(True, 1), (False, 2)])
def test_the_automatic_leader_rebalance_gives_the_preferred_replica_its_leadership_back(tmp_path, enabled, leader):
    summary, _ = run_yaml(tmp_path, f"""
        name: auto-rebalance
        cluster: {{brokers: 3, config: {{leader.imbalance.check.interval.seconds: 5, auto.leader.rebalance.enable: {str(enabled).lower()}}}}}
        topics: [{{name: t, replication_factor: 3, assignment: {{0: [1, 2, 3]}}}}]
        steps:
          - crash: {{node: b1, mode: process}}
          - wait_for: {{partition: t-0, leader: 2, timeout_ms: 20000}}
          - restart: b1
          - wait_for: {{partition: t-0, isr: [1, 2, 3], timeout_ms: 30000}}
          - wait: 11000
          - expect: {{partition: t-0, leader: {leader}, preferred_leader: 1}}
        """)
    assert_ok(summary)


@pytest.mark.parametrize("step, key, words", [
    ("elect: {partition: t-0, expect_error: not_a_name}", "steps[0].elect.expect_error", "pattern"),
    ("shutdown: {node: b1, wait: maybe}", "steps[0].shutdown.ShutdownArgs.wait", "boolean"),
    ("create_partitions: {topic: t, count: 0}", "steps[0].create_partitions.count", "greater than 0"),
    ("create_topic: {name: u, assignment: {0: [1, 9]}}", "steps[0].create_topic.assignment.0", "broker 9 does not exist"),
    ("expect: {partition: t-0, recovery_state: FINE}", "steps[0].expect.recovery_state", "'RECOVERED' or 'RECOVERING'"),
    ("expect: {broker: 1, in_controlled_shutdown: 1}", "steps[0].expect.in_controlled_shutdown", "boolean"),
])
def test_bad_input_to_the_new_steps_and_keys_names_the_key(tmp_path, step, key, words):
    with pytest.raises(ScenarioError) as refused:
        run_yaml(tmp_path, f"""
            name: bad
            cluster: {{brokers: 3}}
            topics: [{{name: t}}]
            steps:
              - {step}
            """)
    text = str(refused.value)
    assert key in text and words in text, text
