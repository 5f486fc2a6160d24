"""The controller and the brokers' lifecycle in the simulator, as scenario files: steps and the
states the reference documents expect."""

import textwrap

import pytest
import yaml

from actors.contract import Envelope
from controller_quorum.requests import AlterPartitionRequest
from kraftlab.runner import run_scenario
from observability.history import read_rows
from workloads.drivers import sim_cluster
from workloads.scenario.loading import load_scenario, validate


def run_yaml(tmp_path, body: str, **overrides):
    text = textwrap.dedent(body)
    scenario = validate(yaml.safe_load(text), "inline.yaml", text)
    if overrides:
        scenario = scenario.model_copy(update=overrides)
    result = run_scenario(scenario, source="inline.yaml", out_dir=tmp_path / "run")
    return result.summary, read_rows(result.run_dir / "events")


def assert_ok(summary):
    assert summary["ok"], (summary["failures"], summary["violations"])


def test_kip966_steps_1_to_7_at_the_controller(tmp_path):
    scenario, _ = load_scenario("elr-controller-steps")
    result = run_scenario(scenario, source="elr-controller-steps", out_dir=tmp_path / "run")
    assert_ok(result.summary)
    assert result.summary["final"]["partitions"]["t-0"]["last_known_elr"] == [1]


def test_an_election_from_the_elr_is_counted_apart_and_still_clean(tmp_path):
    """R2 elected from the ELR (KIP-966 step 7): election_kind "elr", counted in elections_elr
    and, as a clean election, in elections_clean (Kafka 4.1's ElectionFromEligibleLeaderReplicasPerSec)."""
    scenario, _ = load_scenario("elr-controller-steps")
    result = run_scenario(scenario, source="elr-controller-steps", out_dir=tmp_path / "run")
    assert_ok(result.summary)
    stats = result.summary["stats"]
    assert (stats["elections_elr"], stats["elections_unclean"]) == (1, 0)
    assert stats["elections_clean"] >= stats["elections_elr"]
    events = read_rows(result.run_dir / "events")
    kinds = {(e["metadata_offset"], e["leader"], e["election_kind"]) for e in events if e["kind"] == "election"}
    assert [(leader, kind) for _, leader, kind in kinds if kind == "elr"] == [(2, "elr")]


def test_elections_elr_is_a_history_counter_conditions_can_check(tmp_path):
    summary, _ = run_yaml(
        tmp_path,
        """
        name: elr-counter
        cluster: {brokers: 3, controllers: 1, config: {min.insync.replicas: 2}}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - isolate: b3
          - wait_for: {partition: t-0, isr: [1, 2], timeout_ms: 20000}
          - isolate: b2
          - wait_for: {partition: t-0, isr: [1], elr: [2], timeout_ms: 20000}
          - expect: {elections_elr: 0}
          - isolate: b1
          - wait_for: {partition: t-0, leader: null, isr: [], elr: [1, 2], timeout_ms: 20000}
          - heal: b2
          - wait_for: {partition: t-0, leader: 2, elections_elr: 1, timeout_ms: 20000}
          - expect: {elections_elr: 1, elections_clean: ">= 1", elections_unclean: 0}
        """,
    )
    assert_ok(summary)
    assert summary["stats"]["elections_elr"] == 1


def test_topics_are_placed_round_robin_with_the_first_replica_leading(tmp_path):
    summary, _ = run_yaml(
        tmp_path,
        """
        name: placement
        topics: [{name: test, partitions: 3, replication_factor: 3}]
        steps:
          - expect: {partition: test-0, replicas: [1, 2, 3], leader: 1, isr: [1, 2, 3]}
          - expect: {partition: test-1, replicas: [2, 3, 1], leader: 2}
          - expect: {partition: test-2, replicas: [3, 1, 2], leader: 3}
        """,
    )
    assert_ok(summary)
    assert [summary["final"]["partitions"][f"test-{p}"]["replicas"] for p in range(3)] == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


def test_a_silent_broker_is_fenced_after_the_session_timeout_and_unfenced_with_the_same_epoch(tmp_path):
    summary, events = run_yaml(
        tmp_path,
        """
        name: fencing
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - isolate: b2
          - wait: 6000
          - expect: {broker: 2, fenced: false}
          - wait_for: {broker: 2, fenced: true, timeout_ms: 10000}
          - expect: {partition: t-0, isr: [1, 3], leader: 1}
          - heal: b2
          - wait_for: {broker: 2, fenced: false, timeout_ms: 10000}
        """,
    )
    assert_ok(summary)
    epochs = {e["epoch"] for e in events if e["kind"] in ("broker_fenced", "broker_unfenced") and e.get("broker") == 2}
    assert len(epochs) == 1  # §6.5.1: fencing alone does not end a broker epoch
    # Every voter reports each committed registration change of broker 2 (what a wait_for on a
    # broker also reads, observability/committed_history.py): once fenced, then unfenced.
    reports = [e for e in events if e["kind"] == "broker_change" and e["broker"] == 2]
    by_offset = {e["metadata_offset"]: e["fenced"] for e in reports}
    assert list(by_offset.values())[-2:] == [True, False]
    fenced_at = [offset for offset, fenced in by_offset.items() if fenced][-1]
    assert {e["node"] for e in reports if e["metadata_offset"] == fenced_at} == {"c1", "c2", "c3"}


def test_a_restarted_broker_gets_a_new_epoch_only_after_the_old_one_was_fenced(tmp_path):
    summary, events = run_yaml(
        tmp_path,
        """
        name: epochs
        steps:
          - crash: {node: b1, mode: process}
          - restart: b1
          - wait: 3000
          - expect: {broker: 1, fenced: false}
          - wait_for: {broker: 1, fenced: true, timeout_ms: 10000}
          - wait_for: {broker: 1, fenced: false, timeout_ms: 10000}
        """,
    )
    assert_ok(summary)
    registered = [e for e in events if e["kind"] == "registration_accepted" and e["broker"] == 1]
    assert len(registered) == 2
    first, second = registered
    assert second["epoch"] > first["epoch"]
    assert second["clean"] is False  # no clean-shutdown marker: an unclean restart
    fenced_at = next(e["time_ms"] for e in events if e["kind"] == "broker_fenced" and e.get("broker") == 1)
    assert second["time_ms"] > fenced_at


def test_controlled_shutdown_moves_leadership_away_then_stops_and_the_restart_is_clean(tmp_path):
    summary, events = run_yaml(
        tmp_path,
        """
        name: controlled-shutdown
        topics: [{name: t, partitions: 3, replication_factor: 3}]
        steps:
          - shutdown: b1
          - expect: {broker: 1, alive: false, fenced: true}
          - expect: {partition: t-0, leader: 2, isr: [2, 3]}
          - expect: {partition: t-2, leader: 3, isr: [2, 3]}
          - restart: b1
          - wait_for: {broker: 1, fenced: false, timeout_ms: 10000}
          - elect: {partition: t-0, type: preferred}
          - wait_for: {partition: t-0, leader: 2, timeout_ms: 2000}
        """,
    )
    # b1 is not back in t-0's ISR (that needs the data plane), so the preferred election keeps 2.
    assert_ok(summary)
    registered = [e for e in events if e["kind"] == "registration_accepted" and e["broker"] == 1]
    assert registered[-1]["clean"] is True


def test_a_dynamic_min_isr_change_clears_the_elr(tmp_path):
    summary, _ = run_yaml(
        tmp_path,
        """
        name: min-isr-change
        cluster: {config: {min.insync.replicas: 2}}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - isolate: b3
          - isolate: b2
          # Fenced in id order at the same tick: b2 leaves an ISR still at MinISR (case F), b3 then
          # drops it below (case A).
          - wait_for: {partition: t-0, isr: [1], elr: [3], timeout_ms: 20000}
          - alter_config: {topic: t, config: {min.insync.replicas: 1}}
          - wait_for: {partition: t-0, isr: [1], elr: [], timeout_ms: 2000}
        """,
    )
    assert_ok(summary)


def test_with_elr_off_the_last_replica_standing_stays_in_the_isr_while_fenced(tmp_path):
    summary, _ = run_yaml(
        tmp_path,
        """
        name: last-replica-standing
        cluster: {config: {min.insync.replicas: 2}, protocol: {elr: false}}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - isolate: b3
          - isolate: b2
          - wait_for: {partition: t-0, isr: [1], elr: [], timeout_ms: 20000}
          - crash: {node: b1, mode: os}
          - wait_for: {broker: 1, fenced: true, timeout_ms: 20000}
          - expect: {partition: t-0, leader: null, isr: [1], elr: [], offline: true}
          - restart: b1
          - wait_for: {partition: t-0, leader: 1, isr: [1], timeout_ms: 20000}
        """,
    )
    # The unclean restart of the last replica standing made it leader again (the data loss of
    # KIP-966's motivation shows once the data plane exists).
    assert_ok(summary)


def alter_partition_world(**protocol):
    text = textwrap.dedent(
        """
        name: alter-partition
        cluster: {config: {min.insync.replicas: 2}}
        topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        """
    )
    raw = yaml.safe_load(text)
    raw["cluster"]["protocol"] = protocol
    return sim_cluster(validate(raw, "inline.yaml"))


def send_alter_partition(cluster, new_isr_epochs, partition_epoch=None):
    image = cluster.image()
    part = image.partitions[("t", 0)]
    leader = part.leader
    name = f"c{cluster.view().quorum().leader}"
    seen = len(cluster.sim.trace.sinks)
    rejected = []
    cluster.sim.trace.sinks.append(lambda r: rejected.append(r.event.error) if r.kind == "alter_partition_rejected" else None)
    req = AlterPartitionRequest(
        leader, image.brokers[leader].epoch, "t", 0, part.leader_epoch,
        part.partition_epoch if partition_epoch is None else partition_epoch, tuple(new_isr_epochs), part.leader_recovery_state,
    )
    cluster.sim.transmit(Envelope(f"b{leader}", name, req))
    cluster.sim.run_for(500)
    del cluster.sim.trace.sinks[seen:]
    return rejected, cluster.image().partitions[("t", 0)]


def test_alter_partition_with_a_stale_partition_epoch_is_rejected():
    cluster = alter_partition_world()
    img = cluster.image()
    epochs = {b: img.brokers[b].epoch for b in (1, 2, 3)}
    rejected, part = send_alter_partition(cluster, [(1, epochs[1]), (2, epochs[2])], partition_epoch=99)
    assert rejected == ["INVALID_UPDATE_VERSION"] and part.isr == (1, 2, 3)


def test_alter_partition_shrink_is_accepted_and_bumps_the_partition_epoch():
    cluster = alter_partition_world()
    img = cluster.image()
    before = img.partitions[("t", 0)]
    rejected, part = send_alter_partition(cluster, [(1, img.brokers[1].epoch), (2, img.brokers[2].epoch)])
    assert rejected == [] and part.isr == (1, 2)
    assert part.partition_epoch == before.partition_epoch + 1 and part.leader_epoch == before.leader_epoch


@pytest.mark.parametrize("switch,expected", [(True, ["INELIGIBLE_REPLICA"]), (False, [])])
def test_adding_a_replica_with_a_stale_broker_epoch_is_ineligible_unless_kip_903_is_off(switch, expected):
    cluster = alter_partition_world(broker_epoch_in_alter_partition=switch)
    img = cluster.image()
    # b3 stops fetching from the leader (b1), so the real leader does not add it back itself.
    cluster.sim.network.link("b3", "b1", drop=1.0)
    _, part = send_alter_partition(cluster, [(1, img.brokers[1].epoch), (2, img.brokers[2].epoch)])
    assert part.isr == (1, 2)
    stale = img.brokers[3].epoch - 1  # §6.5.1 case 3: the epoch of a session that has ended
    rejected, part = send_alter_partition(cluster, [(1, img.brokers[1].epoch), (2, img.brokers[2].epoch), (3, stale)])
    assert rejected == expected
    assert part.isr == ((1, 2) if switch else (1, 2, 3))


def test_adding_a_fenced_replica_is_ineligible():
    cluster = alter_partition_world()
    img = cluster.image()
    send_alter_partition(cluster, [(1, img.brokers[1].epoch), (2, img.brokers[2].epoch)])
    cluster.sim.network.isolate("b3")
    cluster.sim.run_for(12_000)
    assert cluster.image().brokers[3].fenced
    rejected, part = send_alter_partition(cluster, [(1, img.brokers[1].epoch), (2, img.brokers[2].epoch), (3, img.brokers[3].epoch)])
    assert rejected == ["INELIGIBLE_REPLICA"] and part.isr == (1, 2)


def test_a_cut_off_controller_leader_steps_down_after_the_heal_without_check_quorum(tmp_path):
    """With Check Quorum off the cut-off active controller keeps leading its old epoch; once the
    network heals, the new leader's periodic BeginQuorumEpoch (every half fetch timeout, Kafka's
    KafkaRaftClient.maybeSendBeginQuorumEpochRequests) reaches it and it follows. Before, the
    leader sent BeginQuorumEpoch once, at its election, and c3 led epoch 1 for ever."""
    summary, events = run_yaml(tmp_path, """
        name: stale-leader-without-check-quorum
        cluster: {brokers: 3, controllers: 3, protocol: {check_quorum: false}}
        topics: [{name: t, replication_factor: 3}]
        steps:
          - expect: {quorum: true, leader: 3, epoch: 1}
          - isolate: c3
          - wait_for: {quorum_elections: 2, timeout_ms: 10000}
          - wait: 3000
          - expect: {quorum: true, states: {3: leader}}     # it has not heard of epoch 2
          - heal: all
          - wait: 2000
          - expect: {quorum: true, epoch: 2, states: {3: follower}}
    """)
    assert_ok(summary)
    c3 = [e for e in events if e["node"] == "c3" and e["kind"] == "raft_state"]
    assert [(e["state"], e["epoch"]) for e in c3][-1] == ("follower", 2)


@pytest.mark.parametrize("seed", range(6))
def test_a_consume_step_waits_for_the_values_it_expects(tmp_path, seed):
    """An acks=1 record is acknowledged before the followers have it, so the leader's HWM may not
    cover it yet when the consume step's first fetch arrives: the step reads on until it has as
    many records as `expect_values` lists (or its timeout), as Kafka's tests consume. It used to
    stop at the first HWM it caught up with and read nothing (seed 4)."""
    summary, _ = run_yaml(tmp_path, """
        name: consume-waits-for-values
        cluster: {brokers: 3, controllers: 1}
        topics: [{name: t, replication_factor: 3}]
        steps:
          - produce: {topic: t, partition: 0, values: [a], acks: 1, expect: acked}
          - consume: {topic: t, partition: 0, from: 0, expect_values: [a]}
    """, seed=seed)
    assert_ok(summary)
