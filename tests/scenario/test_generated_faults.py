"""The steps a generated schedule is made of (docs/reference/steps-and-conditions.md: `fault`,
`undo`, `trigger`), as the reference describes them: a fault aimed at a role hits whoever holds it
when the fault fires, a selector that names nobody skips its fault without failing the run, a
trigger waits for a state of the protocol and says whether it came, and `undo` heals and restarts
what its fault did."""

from __future__ import annotations

import textwrap

from observability.fault_rows import fault_undone_by
from observability.history import read_history
from tests.scenario.cli_runs import assert_ran_as_expected, run_text

# KIP-966's Last Replica Standing, written as a swarm would aim it: the followers cut off one by
# one until the ISR is the leader alone, then the last replica standing's host crashes.
LAST_REPLICA = textwrap.dedent("""
    name: generated-last-replica
    cluster: {brokers: 3, controllers: 3, storage: page_cache,
      config: {min.insync.replicas: 2, replica.lag.time.max.ms: 5000, broker.heartbeat.interval.ms: 1000,
               broker.session.timeout.ms: 3000}}
    topics: [{name: t, partitions: 1, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
    steps:
      - load: {producers: 1, consumers: 1, rate_per_s: 50, acks: all}
      - wait: 3000
      - fault: {id: 0, kind: crash_os, node: partition-elr:t-0}      # nobody is in the ELR yet: skipped
      - fault: {id: 1, kind: isolate, node: partition-follower:t-0}  # b2, the lowest in-sync follower
      - trigger: {state: broker_fenced, timeout_ms: 20000}           # b2's session expires
      - fault: {id: 2, kind: isolate, node: partition-follower:t-0}  # b3, the one left
      - trigger: {state: isr_leader_only, partition: t-0, timeout_ms: 20000}
      - expect: {partition: t-0, leader: 1, isr: [1], elr: [3]}     # b3 left the ISR below MinISR
      - fault: {id: 3, kind: crash_os, node: partition-last-isr:t-0} # b1, the last replica standing
      - trigger: {state: leader_change, partition: t-0, timeout_ms: 20000}
      - expect: {partition: t-0, leader: null}                       # b3, the ELR, is fenced: nobody to elect yet
      - undo: 2                                                      # b3 is heard from again
      - wait_for: {partition: t-0, leader: 3, timeout_ms: 30000}
      - undo: all                                                    # b2 healed, b1 restarted
      - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
      - expect: {acked_lost: 0}
""")


def test_faults_aimed_at_roles_follow_the_ISR_down_to_the_last_replica_standing(tmp_path):
    summary, result = run_text(tmp_path, LAST_REPLICA)
    assert_ran_as_expected(summary, result)
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    faults = [(r["fault"], r["target"]) for r in rows if r["kind"] == "fault"]
    assert faults[:3] == [("isolate", "b2"), ("isolate", "b3"), ("crash_os", "b1")]
    assert ("heal", "isolate:b3") in faults and ("heal", "all") in faults and ("restart", "b1") in faults
    [skipped] = [r for r in rows if r["kind"] == "fault_skipped"]
    assert (skipped["fault"], skipped["target"]) == ("crash_os", "partition-elr:t-0")
    assert "no eligible leader replica" in skipped["detail"]
    triggers = [(r["state"], r["target"], r["fired"]) for r in rows if r["kind"] == "trigger"]
    assert triggers == [("broker_fenced", "", True), ("isr_leader_only", "t-0", True), ("leader_change", "t-0", True)]


def test_a_trigger_that_never_comes_ends_at_its_timeout_and_the_run_goes_on(tmp_path):
    text = textwrap.dedent("""
        name: quiet-trigger
        topics: [{name: t, partitions: 1, replication_factor: 3}]
        steps:
          - wait_for: {partition: t-0, leader: "!= null", timeout_ms: 10000}
          - trigger: {state: broker_fenced, timeout_ms: 2000}
          - fault: {id: 0, kind: link, node: controller-leader, to: fenced-broker, drop: 1.0}
          - undo: 0
          - undo: all
        """)
    summary, result = run_text(tmp_path, text)
    assert_ran_as_expected(summary, result)
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    [trigger] = [r for r in rows if r["kind"] == "trigger"]
    assert (trigger["state"], trigger["fired"], trigger["waited_ms"]) == ("broker_fenced", False, 2000)
    assert [r["target"] for r in rows if r["kind"] == "fault_skipped"] == ["controller-leader->fenced-broker"]


def test_a_lossy_budget_turns_the_crashes_past_it_into_process_crashes(tmp_path):
    """Within the protocol's tolerance (MinISR 2: one lossy unclean shutdown at most), the second
    OS crash of a broker is a process crash; a crash skipped (its role named nobody) spent nothing."""
    text = textwrap.dedent("""
        name: lossy-budget
        cluster: {brokers: 3, storage: page_cache, config: {min.insync.replicas: 2}}
        topics: [{name: t, partitions: 1, replication_factor: 3}]
        steps:
          - wait_for: {partition: t-0, leader: "!= null", timeout_ms: 10000}
          - fault: {id: 0, kind: crash_os, node: partition-last-isr:t-0, lossy_budget: 1}
          - fault: {id: 1, kind: crash_os, node: b2, lossy_budget: 1}
          - fault: {id: 2, kind: crash_os, node: b3, lossy_budget: 1}
          - undo: all
          - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
        """)
    summary, result = run_text(tmp_path, text)
    assert_ran_as_expected(summary, result)
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    crashes = [(r["fault"], r["target"]) for r in rows if r["kind"] == "fault" and r["fault"].startswith("crash")]
    assert crashes == [("crash_os", "b2"), ("crash_process", "b3")]


def test_a_lossy_crash_counts_against_the_budget_until_its_broker_is_back_in_the_isr(tmp_path):
    """The tolerance counts a lossy replica until it is back in the ISR, caught up: while b2 is
    down or behind, an OS crash of b3 would be a second lossy unclean shutdown and is a process
    crash; once b2 has rejoined every ISR it held, the budget is free again."""
    text = textwrap.dedent("""
        name: lossy-budget-rejoin
        cluster: {brokers: 3, storage: page_cache, config: {min.insync.replicas: 2}}
        topics: [{name: t, partitions: 2, replication_factor: 3}]
        steps:
          - wait_for: {partition: t-1, isr: [1, 2, 3], timeout_ms: 10000}
          - fault: {id: 0, kind: crash_os, node: b2, lossy_budget: 1}
          - wait_for: {partition: t-0, isr: [1, 3], timeout_ms: 30000}   # b2's session expired: fenced
          - fault: {id: 1, kind: crash_os, node: b3, lossy_budget: 1}   # b2 outstanding: a process crash
          - undo: all
          - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
          - wait_for: {partition: t-1, isr: [1, 2, 3], timeout_ms: 60000}
          - fault: {id: 2, kind: crash_os, node: b3, lossy_budget: 1}   # b2 made good: lossy again
          - undo: 2
          - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
        """)
    summary, result = run_text(tmp_path, text)
    assert_ran_as_expected(summary, result)
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    crashes = [(r["fault"], r["target"]) for r in rows if r["kind"] == "fault" and r["fault"].startswith("crash")]
    assert crashes == [("crash_os", "b2"), ("crash_process", "b3"), ("crash_os", "b3")]


def test_an_armed_fault_strikes_when_its_role_comes_about_while_the_next_steps_go_on(tmp_path):
    """Armed at a role nobody holds yet, the crash waits while the steps after it cut the
    followers off; it strikes the last replica standing as soon as the ISR has shrunk to it."""
    text = textwrap.dedent("""
        name: armed-fault
        cluster: {brokers: 3, storage: page_cache,
          config: {min.insync.replicas: 2, replica.lag.time.max.ms: 5000, broker.session.timeout.ms: 3000}}
        topics: [{name: t, partitions: 1, replication_factor: 3, assignment: {0: [1, 2, 3]}}]
        steps:
          - wait_for: {partition: t-0, leader: 1, timeout_ms: 10000}
          - fault: {id: 0, kind: crash_os, node: partition-last-isr:t-0, armed_ms: 30000}
          - fault: {id: 1, kind: isolate, node: partition-elr:t-0, armed_ms: 1000}   # no ELR within 1 s: skipped
          - isolate: b2
          - isolate: b3
          - wait_for: {partition: t-0, leader: null, timeout_ms: 30000}           # b1 was struck
          - undo: all
          - wait_for: {partition: t-0, isr: [1, 2, 3], timeout_ms: 60000}
        """)
    summary, result = run_text(tmp_path, text)
    assert_ran_as_expected(summary, result)
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    [crash] = [r for r in rows if r["kind"] == "fault" and r["fault"] == "crash_os"]
    assert crash["target"] == "b1"
    shrunk = min(r["time_ms"] for r in rows if r["kind"] == "partition_change" and r["isr"] == [1])
    assert crash["time_ms"] >= shrunk  # not before the ISR was b1 alone
    [skipped] = [r for r in rows if r["kind"] == "fault_skipped"]
    assert (skipped["fault"], skipped["target"]) == ("isolate", "partition-elr:t-0")


def test_undo_ends_its_own_fault_and_no_other(tmp_path):
    """Two faults on one node: undoing the partition leaves the isolation; the metrics' fault
    windows (fault_rows.fault_undone_by) end each at its own `heal` row."""
    text = textwrap.dedent("""
        name: exact-undo
        topics: [{name: t, partitions: 1, replication_factor: 3}]
        steps:
          - wait_for: {partition: t-0, leader: "!= null", timeout_ms: 10000}
          - fault: {id: 0, kind: isolate, node: b3}
          - fault: {id: 1, kind: partition, groups: [[b1, b3], [b2, c1, c2, c3]]}
          - fault: {id: 2, kind: link, node: b2, to: b1, drop: 1.0}
          - undo: 1
          - undo: 2
          - wait_for: {broker: 3, fenced: true, timeout_ms: 20000}   # b3 is still cut off
          - undo: 0
          - wait_for: {broker: 3, fenced: false, timeout_ms: 20000}
        """)
    summary, result = run_text(tmp_path, text)
    assert_ran_as_expected(summary, result)
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    heals = [r["target"] for r in rows if r["kind"] == "fault" and r["fault"] == "heal"]
    assert heals == ["partition:b1,b3|b2,c1,c2,c3", "link:b2->b1", "isolate:b3"]
    assert fault_undone_by("isolate", "b3", "heal", "isolate:b3") and not fault_undone_by("isolate", "b3", "heal", "link:b2->b1")
    assert not fault_undone_by("partition", "b1,b3|b2,c1,c2,c3", "heal", "isolate:b3")
