"""Real clients as a scenario's load (`load.client: librdkafka`): the load step's producer and consumer
run as confluent-kafka clients in Ray actors, against the brokers' Kafka listeners, through a crash
of the partition's leader. The history counts exactly what the clients were told: one
`produce_send` and one `produce_ack` per record, written by the producer from its delivery reports
(none by the listeners), every acknowledged record in the committed log at the end, and the
consumer's reads as `consume` rows the checks judge."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest

from kraftlab.runner import run_scenario
from workloads.scenario.loading import validate

pytestmark = pytest.mark.ray

SCENARIO = {
    "name": "librdkafka-load", "runtime": "ray",
    "cluster": {"brokers": 3, "controllers": 3, "config": {"min.insync.replicas": 2}},
    "topics": [{"name": "t", "partitions": 1, "replication_factor": 3, "assignment": {0: [1, 2, 3]}}],
    "load": {"client": "librdkafka", "config": {"acks": "all", "enable.idempotence": True, "linger.ms": 5}},
    "steps": [
        {"load": {"producers": 1, "consumers": 1, "rate_per_s": 200}},
        {"wait": 2000},
        {"crash": {"node": "b1", "mode": "process"}},
        {"wait_for": {"partition": "t-0", "leader": 2, "timeout_ms": 30000}},
        {"wait": 2000},
        {"restart": "b1"},
        {"wait_for": {"partition": "t-0", "isr": [1, 2, 3], "timeout_ms": 60000}},
        {"wait": 1000},
        {"expect": {"acked_lost": 0}},
    ],
}


def test_a_librdkafka_load_through_a_leader_crash_loses_nothing_acknowledged(local_ray, tmp_path):
    scenario = validate(SCENARIO, "test_librdkafka_load.py")
    assert scenario.cluster.listeners == ["kafka"]  # turned on by load.client
    result = run_scenario(scenario, source="test_librdkafka_load.py", out_dir=tmp_path / "run")
    summary = result.summary
    assert summary["failures"] == [] and summary["violations"] == [] and summary["epilogue_violations"] == [], summary
    rows = ds.dataset(result.run_dir / "events", format="parquet").to_table(
        columns=["node", "kind", "producer", "sequence", "outcome", "offset", "batch_crc", "consumer"]).to_pylist()
    sends = [r for r in rows if r["kind"] == "produce_send"]
    acks = [r for r in rows if r["kind"] == "produce_ack"]
    appended = [r for r in rows if r["kind"] == "load_batch_appended"]
    # Every record's rows are the load client's own: the listeners wrote none for them.
    assert {r["producer"] for r in sends} == {r["producer"] for r in acks} == {"load-producer-1"}
    assert all(r["node"] == "load-producer-1" for r in sends + acks)
    assert sorted(r["sequence"] for r in sends) == sorted(r["sequence"] for r in acks) == list(range(len(sends)))
    assert len(sends) > 1000 and appended
    ok = [r for r in acks if r["outcome"] == "ok"]
    # The summary's acked is the number of successful delivery reports, each with its batch joined.
    assert summary["stats"]["acked"] == len(ok) > 1000
    assert all(r["offset"] is not None and r["batch_crc"] is not None for r in ok)
    assert summary["stats"]["acked_lost"] == 0
    # Every acknowledged record is in the committed log's final read, by its identity.
    final = {(r["producer"], r["sequence"]) for r in rows if r["kind"] == "final_read"}
    assert {(r["producer"], r["sequence"]) for r in ok} <= final
    # The consumer read them (one row per record, joined with the batch the listener served it).
    consumed = [r for r in rows if r["kind"] == "consume" and r["consumer"] == "load-consumer-1"]
    assert consumed and all(r["batch_crc"] is not None for r in consumed)
    assert {(r["producer"], r["sequence"]) for r in ok} <= {(r["producer"], r["sequence"]) for r in consumed}
