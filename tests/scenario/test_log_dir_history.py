"""What a `fail_log_dir` step leaves in the history and the metrics (docs/reference/events.md: the
`fault` kind `fail_log_dir`; library scenario `log-dir-failure`): the fault rows with their directory, the
broker's own rows, the halt of a broker losing directory 0 as a process crash, the committed
registration's offline directories, and the fault window ending at the broker's restart."""

import pytest

from kraftlab.runner import run_scenario
from observability.history import read_history
from tests.history_checks import assert_complete_history
from workloads.scenario.loading import load_scenario


@pytest.fixture(scope="module")
def log_dir_run(tmp_path_factory):
    scenario, _ = load_scenario("log-dir-failure")
    result = run_scenario(scenario, source="log-dir-failure", out_dir=tmp_path_factory.mktemp("log-dirs") / "run")
    return result.run_dir, result.summary, read_history(result.run_dir / "events").to_pylist()


def test_each_failure_is_a_fault_row_naming_the_broker_and_its_directory(log_dir_run):
    run_dir, summary, rows = log_dir_run
    assert summary["ok"], summary["failures"]
    faults = [(r["fault"], r["target"], r["dir"], r["backend"]) for r in sorted(rows, key=lambda r: r["node_seq"]) if r["kind"] == "fault"]
    assert ("fail_log_dir", "b2", 1, "sim") in faults and ("fail_log_dir", "b3", 0, "sim") in faults
    # Directory 0 holds the metadata log: the broker halts, a process crash right after.
    halt = faults.index(("fail_log_dir", "b3", 0, "sim"))
    assert faults[halt + 1] == ("crash_process", "b3", None, "sim")
    assert_complete_history(run_dir, summary)


def test_the_broker_takes_the_directorys_replicas_offline_and_the_controller_records_it(log_dir_run):
    _, summary, rows = log_dir_run
    failed = [(r["node"], r["dir"], r["halted"]) for r in rows if r["kind"] == "log_dir_failed"]
    assert failed == [("b2", 1, False), ("b3", 0, True)]
    offline = {(r["node"], r["topic"], r["partition"], r["dir"]) for r in rows if r["kind"] == "replica_offline"}
    assert offline == {("b2", "t", 1, 1)}  # t-0's replica, in directory 0, stays
    committed = {tuple(r["offline_log_dirs"]) for r in rows if r["kind"] == "broker_change" and r["broker"] == 2}
    assert committed == {(), (1,)}
    moved = [r for r in rows if r["kind"] == "partition_change" and r["reason"] == "log_dir_offline"]
    assert {(r["partition"], r["leader"], tuple(r["isr"]), tuple(r["directories"])) for r in moved} == {(1, 3, (3, 1), (1, 1, 1))}
    assert summary["final"]["brokers"]["2"]["offline_log_dirs"] == []  # registered again, directory back


def test_the_fault_is_active_in_the_metrics_until_the_broker_restarts(log_dir_run):
    run_dir, _, _ = log_dir_run
    samples = [line.split()[1] for line in (run_dir / "metrics.om").read_text().splitlines()
               if line.startswith('kraftlab_fault_active{fault="fail_log_dir",target="b2"}')]
    assert samples[0] == "1" and samples[-1] == "0" and "0" not in samples[: samples.index("0")]
