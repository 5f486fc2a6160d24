"""A broker whose session expires leaves every ISR before it is fenced, in the metadata log's
order (Kafka's ReplicationControlManager.handleBrokerFenced): a large fencing spans many records
that may commit in parts, and no committed prefix may show a fenced broker in an ISR."""

from workloads.drivers import sim_cluster
from workloads.scenario.loading import validate


def test_the_isr_changes_come_before_the_fencing_record():
    cluster = sim_cluster(validate({
        "name": "fencing-order",
        "cluster": {"brokers": 3, "controllers": 1, "config": {"min.insync.replicas": 2}},
        "topics": [{"name": "t", "partitions": 6, "replication_factor": 3}],
    }, "test_fencing_order.py"))
    records = []
    cluster.sim.trace.sinks.append(lambda rec: records.append(rec.event) if rec.event.kind in ("partition_change", "broker_change") else None)
    cluster.isolate("b1")
    assert cluster.run_until(lambda: cluster.view().brokers()[1].fenced is True, 30_000)
    fence = next(e.metadata_offset for e in records if e.kind == "broker_change" and e.broker == 1 and e.fenced)
    removals = [e.metadata_offset for e in records if e.kind == "partition_change" and e.reason == "broker_fenced"]
    assert len(set(removals)) == 6  # broker 1 was in every ISR
    assert max(removals) < fence
