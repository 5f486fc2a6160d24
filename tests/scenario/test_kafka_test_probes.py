"""Behaviours checked against Kafka's own tests, each as a scenario: steps and the states Kafka's
test expects."""

import textwrap

import pyarrow.dataset as ds
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
    (never leader 3 with epoch 2, a pair no voter ever held)."""
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
    b1 (not as soon as the ISR within the target reached MinISR, without b3). The
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
    # the documented summary shows every voter's state; a crashed voter's is null, not absent.
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


def test_a_follower_whose_log_ends_inside_a_leader_batch_stops_fetching_until_a_new_epoch(tmp_path):
    """EpochDrivenReplicationProtocolAcceptanceTest.shouldNotAllowDivergentLogs with the leader
    epoch truncation off (before KIP-101). Broker 2 stops cleanly holding 10 records (HWM 10);
    broker 1 loses records 5-9 in an OS crash, leads again and writes 10 records as one batch at
    offsets 5-14. Broker 2 comes back, cuts its log to its HWM (10), inside that batch: the batch
    cannot be appended (Kafka's UnexpectedAppendOffsetException) and its fetcher marks the
    partition failed until a new leader epoch (AbstractFetcherThread.markPartitionFailed,
    addPartitions). Before, the follower skipped the batch as "already held" and fetched again at
    once, forever (25,070 messages where the run with truncation on needs 993), with no event."""
    summary = run_yaml(tmp_path, """
        name: divergent-logs-truncation-off
        cluster:
          brokers: 2
          storage: page_cache
          config: {min.insync.replicas: 1}
          protocol: {elr: false, leader_epoch_truncation: false}
          disk: {dirty_expire_ms: 4000, background_flush_interval_ms: 1000}
        topics: [{name: t, replication_factor: 2, assignment: {0: [1, 2]}}]
        steps:
          - produce: {topic: t, count: 5, acks: all, expect: acked}
          - wait: 6000
          - produce: {topic: t, count: 5, acks: all, expect: acked}
          - wait: 1000
          - shutdown: b2
          - crash: {node: b1, mode: os}
          - restart: b1
          - wait_for: {partition: t-0, leader: 1, timeout_ms: 30000}
          - expect: {replica: {partition: t-0, broker: 1}, leo: 5}
          - produce: {topic: t, count: 10, acks: all, expect: acked}
          - restart: b2
          - wait: 20000
          - expect: {partition: t-0, leader: 1, isr: [1]}
          - expect: {replica: {partition: t-0, broker: 2}, leo: 10}
          - shutdown: b1
          - restart: b1
          - wait_for: {partition: t-0, leader: 1, leader_epoch: ">= 3", timeout_ms: 30000}
          - wait: 5000
          - expect: {partition: t-0, isr: [1]}
        expect_violations: [UncleanExclusion, LeaderCandidateCompleteness, LeaderCompleteness, TrueHWMMonotonic, LogMatching]
        """)
    assert_ok(summary)
    # Two failures, one per leader epoch the follower fetched in (not one per fetch), and no
    # busy loop of fetches.
    rows = ds.dataset(tmp_path / "run-0" / "events", format="parquet").to_table(
        filter=ds.field("kind") == "replica_fetch_failed", columns=["node", "error", "offset", "batch_offset"]).to_pylist()
    assert rows == [{"node": "b2", "error": "UNEXPECTED_APPEND_OFFSET", "offset": 10, "batch_offset": 5}] * 2
    assert summary["stats"]["messages_delivered"] < 5000
