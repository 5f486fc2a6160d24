"""The run's epilogue as its readers see it: the final read, the load consumers' catching up and
`acked_lost` must tell the same story: summary.json, metrics.om, `kraftlab analyze` and the
history, compared on runs where they could disagree."""

from observability.history import read_history
from observability.history_anomalies import count_anomalies

from .cli_runs import run_text

# KIP-966's Last Replica Standing without ELR, under load: broker 3, then broker 2 cut off; the
# leader broker 1 loses its page cache in an OS crash and is elected again with an empty log
# (epoch 2), losing every acknowledged record; the ISR becomes [1, 3] once broker 3 is back.
LAST_REPLICA_STANDING_NO_ELR = """
cluster:
  brokers: 3
  storage: page_cache
  config: {min.insync.replicas: 2, replica.lag.time.max.ms: 10000}
  protocol: {elr: false}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - load: {producers: 1, consumers: 1, rate_per_s: 500, message_bytes: 100, acks: all, config: {delivery.timeout.ms: 3000}}
  - wait: 2000
  - isolate: b3
  - wait_for: {partition: t-0, leader: 1, isr: [1, 2], timeout_ms: 30000}
  - wait: 2000
  - isolate: b2
  - wait_for: {partition: t-0, leader: 1, isr: [1], timeout_ms: 30000}
  - crash: {node: b1, mode: os}
  - wait_for: {partition: t-0, leader: null, timeout_ms: 30000}
  - restart: b1
  - wait_for: {broker: 1, fenced: false, timeout_ms: 30000}
  - wait: 1000
  - heal: b3
  - wait: 4000
"""


def rows(tmp_path, kind: str) -> list[dict]:
    return [r for r in read_history(tmp_path / "run" / "events").to_pylist() if r["kind"] == kind]


def test_a_consumer_reset_by_a_truncation_must_read_the_new_log_before_it_counts_as_caught_up(tmp_path):
    """The load consumer read the old log far past where the new one ends, and was reset to 0
    (KIP-320). Before, "how far it read" kept the old position, so it counted as caught up at
    once, got no time to read the new log, and its records came out `unseen` (20 here)."""
    summary, _ = run_text(tmp_path, "name: lrs-no-elr-consumer-reset\n" + LAST_REPLICA_STANDING_NO_ELR + """
expect_violations: [LeaderCompleteness, TrueHWMMonotonic, UncleanExclusion, LeaderCandidateCompleteness, ConsistentRead, LogMatching]
""")
    assert rows(tmp_path, "consumer_reset"), "the scenario must reset the consumer"
    (done,) = rows(tmp_path, "consumer_done")
    assert done["complete"] is True
    final = {r["offset"] for r in rows(tmp_path, "final_read")}
    reset_at = max(r["node_seq"] for r in rows(tmp_path, "consumer_reset"))
    read_after = {r["offset"] for r in rows(tmp_path, "consume") if r["node_seq"] > reset_at}
    assert final and final <= read_after
    assert count_anomalies(tmp_path / "run" / "events")["unseen"] == 0
    assert summary["stats"]["acked_lost"] > 0


def test_a_replica_left_behind_by_an_unclean_election_is_not_the_committed_log(tmp_path):
    """Then the new ISR [1, 3] stops and only broker 2 runs, out of the ISR, holding the old
    epoch's log. Before, the final read took broker 2's log for the committed log (the records
    of the new log looked lost, those the election lost looked present) and `acked_lost` fell to
    0. Now the final read reads only ISR and ELR members (none running: incomplete, so the
    analysis cannot judge), and `acked_lost` counts what the election lost."""
    summary, _ = run_text(tmp_path, "name: lrs-no-elr-stale-replica-left\n" + LAST_REPLICA_STANDING_NO_ELR + """
  - crash: {node: b1, mode: process}
  - crash: {node: b3, mode: process}
  - heal: all
  - wait: 2000
""")
    assert summary["final"]["partitions"]["t-0"]["isr"] == [1, 3]
    assert not rows(tmp_path, "final_read")
    assert sorted((r["broker"], r["complete"]) for r in rows(tmp_path, "final_read_done")) == [(1, False), (3, False)]
    lost_in_election = summary["stats"]["acked_lost"]
    assert lost_in_election > 0
    metrics = (tmp_path / "run" / "metrics.om").read_text().splitlines()
    assert [line for line in metrics if line.startswith("kraftlab_records_lost ")][-1].split()[1] == str(lost_in_election)


def test_an_offline_partition_read_from_a_replica_whose_hwm_lags_its_log_is_incomplete(tmp_path):
    """t-0 ends offline (unclean recovery `manual`): broker 2 came back holding the 10 committed
    records with a local HWM of 0. Before, the final read read it up to that HWM (nothing),
    called itself complete, and the analysis found 13 lost writes where nothing was lost."""
    summary, _ = run_text(tmp_path, """
name: offline-end-stale-hwm
cluster:
  brokers: 3
  storage: page_cache
  config: {min.insync.replicas: 2, replica.lag.time.max.ms: 5000, unclean.recovery.strategy: manual}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - link: {from: b3, to: b1, drop: 1}
  - wait_for: {partition: t-0, isr: [1, 2], timeout_ms: 20000}
  - produce: {topic: t, count: 10, acks: all, expect: acked}
  - consume: {topic: t, expect_count: 10}
  - crash: {node: b2, mode: process}
  - wait_for: {partition: t-0, isr: [1], elr: [2], timeout_ms: 20000}
  - produce: {topic: t, count: 3, acks: 1, expect: acked}
  - crash: {node: b1, mode: os}
  - wait_for: {partition: t-0, leader: null, isr: [], elr: [1, 2], timeout_ms: 20000}
  - restart: b1
  - restart: b2
  - wait_for: {partition: t-0, elr: [], last_known_elr: [1, 2], timeout_ms: 20000}
  - wait: 5000
  - expect: {partition: t-0, leader: null, offline: true, acked_lost: 0}
""")
    assert summary["ok"] is True, summary["failures"]
    done = rows(tmp_path, "final_read_done")
    assert done and not any(r["complete"] for r in done)
    counts = count_anomalies(tmp_path / "run" / "events")
    assert counts["lost-write"] == 0 and counts["uncommitted-read"] == 0


def test_an_invariant_broken_in_the_epilogue_is_reported_apart_and_fails_the_verdict(tmp_path):
    """The last step cuts off the leader broker 1, the only ISR member, holding 5 records no
    other replica has; the run's epilogue (its final read waits for broker 1) lasts long enough
    for the controller to fence it and elect broker 2 or 3 uncleanly, losing them. Before, the
    checks stopped at the last step: `ok`, no violation, yet `acked_lost` 5. Now the summary
    reports them as `epilogue_violations`, they count in `ok` (docs/reference: `ok` is judged from
    every violation) and the exit code, and a campaign counts them as findings."""
    from kraftlab.campaign.outcome import findings

    summary, result = run_text(tmp_path, """
name: epilogue-unclean-election
cluster:
  brokers: 3
  config: {min.insync.replicas: 1, unclean.leader.election.enable: true, broker.session.timeout.ms: 3000,
           broker.heartbeat.interval.ms: 1000, replica.lag.time.max.ms: 2000}
  protocol: {elr: false}
topics: [{name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
steps:
  - produce: {topic: t, count: 5, acks: all, expect: acked}
  - link: {from: b1, to: b2, drop: 1}
  - link: {from: b1, to: b3, drop: 1}
  - wait_for: {partition: t-0, isr: [1], timeout_ms: 20000}
  - produce: {topic: t, count: 5, acks: all, expect: acked}
  - isolate: b1
""")
    assert summary["ok"] is False and summary["failures"] == [] and summary["violations"] == [] and result.exit_code == 1
    (steps_done,) = rows(tmp_path, "steps_done")
    late = {v["invariant"]: v["at_ms"] for v in summary["epilogue_violations"]}
    assert "LeaderCompleteness" in late and min(late.values()) > steps_done["time_ms"]
    assert summary["stats"]["acked_lost"] == 5
    assert "LeaderCompleteness" in findings(summary, len(summary.get("failures", [])) + 6)[0]
    assert "after the last step: LeaderCompleteness" in result.output


def test_a_leader_whose_hwm_is_below_its_leso_gives_an_incomplete_final_read(tmp_path):
    """Broker 1 acknowledged 5 records with ISR [1, 2] and crashed; broker 2 leads with ISR [2],
    under MinISR, so its HWM stays below its LESO (5) and it cannot tell what is committed
    (the protocol description §6.4.2). Before, its read was taken for the whole committed log
    and analysis reported 5 lost writes that broker 2 held."""
    summary, _ = run_text(tmp_path, """
name: stale-hwm-under-minisr-at-the-end
cluster:
  brokers: 3
  config: {min.insync.replicas: 2}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - isolate: b3
  - wait_for: {partition: t-0, isr: [1, 2], timeout_ms: 60000}
  - produce: {topic: t, count: 5, acks: all, expect: acked}
  - crash: {node: b1, mode: process}
  - wait_for: {partition: t-0, leader: 2, under_min_isr: true, timeout_ms: 20000}
  - wait: 3000
""")
    assert summary["ok"] and summary["stats"]["acked"] == 5 and summary["stats"]["acked_lost"] == 0
    (leader,) = [r for r in rows(tmp_path, "become_leader") if r["node"] == "b2"]
    assert leader["leso"] == 5 and summary["final"]["partitions"]["t-0"]["hwm"] < 5
    (done,) = rows(tmp_path, "final_read_done")
    assert (done["broker"], done["complete"]) == (2, False)
    assert count_anomalies(tmp_path / "run" / "events")["lost-write"] == 0
