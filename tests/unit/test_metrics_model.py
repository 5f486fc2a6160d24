"""The metrics model (observability/metrics/model.py) on hand-fed events: each series as Kafka's
MBean on that node would read, or as kraftlab defines it."""

from __future__ import annotations

from observability.events import (
    BecomeFollower,
    BecomeLeader,
    BrokerChange,
    ControllerActive,
    Election,
    EventRecord,
    Fault,
    PartitionChange,
    ProcessStart,
    RaftLeaderElected,
    RaftStateChange,
)
from observability.metrics.model import MetricsModel


class Feed:
    def __init__(self) -> None:
        self.model = MetricsModel(("c1", "c2"), 2)
        self.seq = 0

    def __call__(self, node: str, event) -> Feed:
        self.seq += 1
        self.model(EventRecord(float(self.seq), node, 0, self.seq, event))
        return self

    def value(self, name: str, **labels) -> float:
        want = tuple(sorted((k, str(v)) for k, v in labels.items()))
        found = [v for _, (n, ls, v) in self.model.samples() if n == name and tuple(sorted(ls)) == want]
        assert len(found) == 1, (name, labels, found)
        return found[0]


def change(offset: int, leader, isr, elr=(), under: bool = False) -> PartitionChange:
    return PartitionChange("t", 0, leader, offset, offset, (1, 2), tuple(isr), tuple(elr), (), offset, under, 2, "", "test")


def test_broker_series_follow_the_brokers_roles_and_the_committed_isr():
    f = Feed()
    f("c1", change(1, 1, (1, 2)))("b1", BecomeLeader("t", 0, 1, 0, 0, (1, 2)))
    assert f.value("kafka_server_replicamanager_leadercount", node="b1") == 1
    assert f.value("kafka_server_replicamanager_underreplicatedpartitions", node="b1") == 0
    f("c1", change(2, 1, (1,), under=True))
    assert f.value("kafka_server_replicamanager_underreplicatedpartitions", node="b1") == 1
    assert f.value("kafka_server_replicamanager_underminisrpartitioncount", node="b1") == 1
    f("driver", Fault("crash_os", "b1"))  # a crashed broker leads nothing
    assert f.value("kafka_server_replicamanager_leadercount", node="b1") == 0
    assert f.value("kraftlab_fault_active", fault="crash_os", target="b1") == 1
    f("driver", Fault("restart", "b1"))
    assert f.value("kraftlab_fault_active", fault="crash_os", target="b1") == 0
    f("b2", BecomeLeader("t", 0, 2, 0, 0, (2,)))("b2", BecomeFollower("t", 0, 1, 3, "leader", 0, 0))
    assert f.value("kafka_server_replicamanager_leadercount", node="b2") == 0


def test_controller_series_are_the_active_controllers_and_elections_count_per_voter():
    f = Feed()
    f("c1", RaftStateChange("candidate", "leader", 4))("c1", RaftLeaderElected(4, 0))("c1", ControllerActive(4))
    f("c2", RaftStateChange("unattached", "follower", 4))
    f("c1", change(1, None, (1,), elr=(2,)))("c1", BrokerChange(1, 7, True, 2))
    assert f.value("kafka_controller_kafkacontroller_activecontrollercount", node="c1") == 1
    assert f.value("kafka_controller_kafkacontroller_activecontrollercount", node="c2") == 0
    assert f.value("kafka_controller_kafkacontroller_offlinepartitionscount", node="c1") == 1
    assert f.value("kafka_controller_kafkacontroller_offlinepartitionscount", node="c2") == 0  # only the active reports
    assert f.value("kafka_controller_kafkacontroller_fencedbrokercount", node="c1") == 1
    assert f.value("kafka_server_raftmetrics_current_leader", node="c2") == 1
    assert f.value("kafka_server_raftmetrics_current_epoch", node="c2") == 4
    assert f.value("kraftlab_partition_leader", topic="t", partition=0) == -1
    assert f.value("kraftlab_partition_elr_size", topic="t", partition=0) == 1
    for voter in ("c1", "c2"):  # every voter reports the committed election
        f(voter, Election("t", 0, 2, 5, "elr", 9))
    f("c1", Election("t", 0, 1, 6, "clean", 10))
    assert f.value("kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total", node="c2") == 1
    assert f.value("kafka_controller_controllerstats_uncleanleaderelections_total", node="c1") == 0
    assert f.value("kraftlab_elections_total", kind="elr") == 1 and f.value("kraftlab_elections_total", kind="clean") == 1
    f("c1", RaftStateChange("leader", "resigned", 4))
    assert f.value("kafka_controller_kafkacontroller_activecontrollercount", node="c1") == 0


def test_network_faults_end_at_heal_of_a_node_they_name_or_of_all():
    f = Feed()
    f("driver", Fault("partition", "b1,c1|b2,c2"))("driver", Fault("isolate", "b2"))
    f("driver", Fault("heal", "c1"))
    assert f.value("kraftlab_fault_active", fault="partition", target="b1,c1|b2,c2") == 0
    assert f.value("kraftlab_fault_active", fault="isolate", target="b2") == 1
    f("driver", Fault("heal", "all"))
    assert f.value("kraftlab_fault_active", fault="isolate", target="b2") == 0


def test_a_restarted_voter_s_election_meters_start_over_and_count_its_replayed_log_once():
    # Kafka's meters live in the process: a restarted voter shows 0, then what it replays. Before,
    # its counter kept the count and added the replayed election again (2 for one election).
    f = Feed()
    f("c1", Election("t", 0, 2, 5, "unclean", 9))
    f("c1", ProcessStart(False))("c1", Election("t", 0, 2, 5, "unclean", 9))
    assert f.value("kafka_controller_controllerstats_uncleanleaderelections_total", node="c1") == 1
    assert f.value("kraftlab_elections_total", kind="unclean") == 1
    assert f.value("kraftlab_elections_total", kind="preferred") == 0  # every kind exists from the start
    assert f.value("kraftlab_invariant_violations_total", invariant="LeaderCompleteness") == 0
