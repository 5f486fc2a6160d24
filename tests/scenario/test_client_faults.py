"""Network faults on a client's links (`link`, `isolate`, `partition` and `heal` may name the
steps' `producer` and `consumer`, and each load's `load-producer-N` and `load-consumer-N`): the way
Jepsen loses a client's answers, so that a write's outcome is unknown to the writer."""

from observability.history import read_history
from observability.history_anomalies import count_anomalies

from .cli_runs import run_text

# The leader's answers to the load producer are lost for 6 s: the batch in flight was written, its
# acknowledgement never arrives, and after the request timeout (5 s) the producer sends it again.
LOST_ANSWERS = """
name: lost-produce-answers
cluster: {brokers: 3, config: {min.insync.replicas: 2}}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - load: {producers: 1, consumers: 1, rate_per_s: 20, acks: all, idempotent: IDEMPOTENT}
  - wait: 2000
  - link: {from: b1, to: load-producer-1, drop: 1}
  - wait: 6000
  - heal: all
  - wait: 8000
"""


def test_a_retry_after_a_lost_answer_writes_the_record_twice_unless_the_producer_is_idempotent(tmp_path):
    for name in ("plain", "idempotent"):
        (tmp_path / name).mkdir()
    summary, _ = run_text(tmp_path / "plain", LOST_ANSWERS.replace("IDEMPOTENT", "false"))
    events = tmp_path / "plain" / "run" / "events"
    history = read_history(events).to_pylist()
    faults = [r for r in history if r["kind"] == "fault"]
    assert [(f["fault"], f["target"]) for f in faults] == [("link", "b1->load-producer-1"), ("heal", "all")]
    retries = [r for r in history if r["kind"] == "produce_retry"]
    assert retries and retries[0]["error"] == "REQUEST_TIMED_OUT"
    assert count_anomalies(events)["duplicate"] >= 1
    assert summary["ok"]  # no invariant is broken: a non-idempotent retry may duplicate (Kafka's at-least-once)

    run_text(tmp_path / "idempotent", LOST_ANSWERS.replace("IDEMPOTENT", "true"))
    assert count_anomalies(tmp_path / "idempotent" / "run" / "events")["duplicate"] == 0
