"""Departures found by translating Kafka's own tests into scenario files (2026-11-25), each as the
scenario that showed it: steps and the states Kafka's test expects. Each failed before its fix."""

import textwrap

import yaml

from kraftlab.runner import run_scenario
from workloads.scenario.loading import validate


def run_yaml(tmp_path, body: str, seed: int = 0):
    text = textwrap.dedent(body)
    scenario = validate(yaml.safe_load(text), "inline.yaml", text).model_copy(update={"seed": seed})
    return run_scenario(scenario, source="inline.yaml", out_dir=tmp_path / f"run-{seed}").summary


def assert_ok(summary):
    assert summary["ok"], (summary["failures"], summary["violations"])


def test_the_quorum_leader_is_the_leader_of_the_latest_epoch_or_none(tmp_path):
    """RaftEventSimulationTest's Cluster.latestLeader(): the leader known in the latest epoch.
    The leader c3 is cut off; once c1 or c2 canvassed into epoch 2, no voter leads epoch 2 yet,
    and c3, still leading epoch 1 until Check Quorum deposes it, is not the quorum's leader
    (before: leader 3 with epoch 2, a pair no voter ever held)."""
    summary = run_yaml(tmp_path, """
        name: quorum-leader-of-latest-epoch
        cluster: {brokers: 3, controllers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - expect: {quorum: true, leader: 3, epoch: 1}
          - isolate: c3
          - wait_for: {quorum: true, epoch: 2, timeout_ms: 15000}
          - expect: {quorum: true, leader: null, states: {3: leader}}
          - wait_for: {quorum: true, leader: "!= null", timeout_ms: 15000}
          - expect: {quorum: true, epoch: 2, leader: "!= 3"}
        """)
    assert_ok(summary)


def test_brokers_follow_the_new_controller_while_the_deposed_one_is_still_reachable(tmp_path):
    """RaftEventSimulationTest.canMakeProgressIfMajorityIsReachable, seen from the observers: the
    leader c3 is cut off from the other voters only (the brokers keep every link). c3 resigns on
    Check Quorum and answers fetches NOT_LEADER naming nobody; an observer must then look for the
    leader among the voters (KafkaRaftClient.pollFollowerAsObserver). Before, the brokers asked c3
    again forever, missed their heartbeats to the new leader c1 and were all fenced."""
    summary = run_yaml(tmp_path, """
        name: brokers-find-new-controller
        cluster: {brokers: 3, controllers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - expect: {quorum: true, leader: 3, epoch: 1}
          - partition: [[c3], [c1, c2]]
          - wait_for: {quorum_elections: 2, timeout_ms: 15000}
          - wait: 15000
          - expect: {broker: 1, fenced: false}
          - expect: {broker: 2, fenced: false}
          - expect: {broker: 3, fenced: false}
          - expect: {partition: t-0, leader: 1, isr: [1, 2, 3]}
          - produce: {topic: t, count: 3, acks: all, expect: acked}
        """)
    assert_ok(summary)


def test_a_leader_voter_losing_its_disk_loses_no_committed_metadata(tmp_path):
    """RaftEventSimulationTest.canRecoverFromSingleNodeCommittedDataLoss: the leader voter's disk is
    lost; its committed entries are on the majority. Before, the RaftDurability check read the
    followers' match with the committed log as of their own last change, and reported entries the
    leader committed just before the crash as "on no voter" (seeds 0-3)."""
    body = """
        name: raft-single-voter-committed-data-loss
        cluster: {brokers: 3, controllers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - crash: {node: controller-leader, mode: disk}
          - wait_for: {quorum: true, leader: "!= null", epoch: ">= 2", timeout_ms: 15000}
          - crash: {node: b3, mode: process}
          - wait_for: {broker: 3, fenced: true, timeout_ms: 20000}
          - restart: c3
          - wait: 5000
          - expect: {quorum: true, states: {3: follower}, leader: "!= 3"}
          - restart: b3
          - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 40000}
        """
    for seed in range(3):
        summary = run_yaml(tmp_path, body, seed=seed)
        assert_ok(summary)
        assert summary["violations"] == []


# [1, 2, 3] -> [4, 2, 3] while b3 is down; b3 comes back once b4 is in sync.
REASSIGN_WHILE_B3_IS_DOWN = textwrap.dedent("""
    cluster: {brokers: 4, config: {min.insync.replicas: 2}}
    topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
    steps:
      - produce: {topic: t, count: 10, acks: all, expect: acked}
      - crash: {node: b3, mode: process}
      - wait_for: {partition: t-0, isr: [1, 2], timeout_ms: 20000}
      - reassign: {partition: t-0, replicas: [4, 2, 3]}
      - wait_for: {partition: t-0, isr: [1, 2, 4], timeout_ms: 30000}
      - wait: 5000
      - expect: {partition: t-0, replicas: [1, 2, 3, 4], leader: 1}
      - restart: b3
      - wait_for: {partition: t-0, replicas: [2, 3, 4], timeout_ms: 40000}
      - expect: {partition: t-0, isr: [2, 3, 4], leader: "!= 1"}
""")


def test_a_reassignment_completes_only_with_every_target_replica_in_the_isr(tmp_path):
    """PartitionReassignmentReplicas.maybeCompleteReassignment: "newTargetIsr.containsAll(
    newTargetReplicas)". b4 catches up and joins the ISR, but the replica set stays [4, 2, 3, 1]
    under leader 1 until b3, kept, is back in the ISR; then it is [4, 2, 3] and leadership leaves
    b1 (before: completed without b3, as soon as the ISR within the target reached MinISR). The
    produce right after the move is retried by its producer (b1 appended it, then stopped leading
    before answering) and, idempotent by default with acks all as Kafka's producer is, not
    written twice."""
    summary = run_yaml(tmp_path, "name: reassign-waits-for-all-target-replicas-in-isr" + REASSIGN_WHILE_B3_IS_DOWN
                       + "  - produce: {topic: t, count: 5, acks: all, expect: acked}\n"
                       + "  - consume: {topic: t, expect_count: 15}\n"
                       + "  - expect: {acked_lost: 0}\n")
    assert_ok(summary)
    assert summary["stats"]["consumed"] == 15


def test_a_non_idempotent_step_producer_still_writes_a_retried_batch_twice(tmp_path):
    """The same move with `idempotent: false` (Kafka's enable.idempotence=false): the retry of the
    batch b1 appended and b4 took over is appended again, as Kafka's producer would without
    idempotence, so the switch still shows what idempotence is for."""
    summary = run_yaml(tmp_path, "name: reassign-non-idempotent-retry" + REASSIGN_WHILE_B3_IS_DOWN
                       + "  - produce: {topic: t, count: 5, acks: all, idempotent: false, expect: acked}\n"
                       + "  - consume: {topic: t, expect_count: 20}\n")
    assert_ok(summary)
    assert summary["stats"]["consumed"] == 20


def test_a_voter_s_disk_loss_after_a_process_crash_is_no_monotonic_epoch_violation(tmp_path):
    """A lost disk takes the quorum state with it, whatever the voter's past: the same disk loss
    gave MonotonicEpoch only when an earlier process crash had recorded the voter's durable epoch
    ("c1's durable epoch went from 1 to 0"), and nothing without it."""
    summary = run_yaml(tmp_path, """
        name: voter-disk-loss-after-process-crash
        cluster: {brokers: 3, controllers: 3}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - wait_for: {quorum: true, leader: "!= null", timeout_ms: 10000}
          - crash: {node: controller-follower, mode: process}
          - wait: 500
          - restart: c1
          - wait: 2000
          - crash: {node: controller-follower, mode: disk}
          - wait: 3000
          - expect: {quorum: true, leader: "!= null"}
        """)
    assert_ok(summary)
    assert summary["violations"] == []


def test_the_summary_s_quorum_states_name_every_voter_null_when_down(tmp_path):
    # contract.md's summary shows every voter's state; a crashed voter's is null (before: absent).
    summary = run_yaml(tmp_path, """
        name: quorum-states-of-every-voter
        cluster: {brokers: 3, controllers: 3}
        topics: [{name: t, replication_factor: 3}]
        steps:
          - wait_for: {quorum: true, leader: "!= null", timeout_ms: 10000}
          - crash: {node: controller-follower, mode: process}
        """)
    assert_ok(summary)
    states = summary["final"]["quorum"]["states"]
    assert sorted(states) == ["1", "2", "3"] and list(states.values()).count(None) == 1
