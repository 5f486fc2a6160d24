"""The scenario runner end to end: the run directory, summary.json as docs/reference specifies it,
determinism, failures with their replay command, and the CLI's other commands."""

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from actors.broker_node import BrokerNode
from kraftlab.cli import main
from observability.history import read_rows
from workloads.scenario.loading import load_scenario
from workloads.scenario.schema import Scenario

SUMMARY_KEYS = {"scenario", "seed", "runtime", "ok", "failures", "violations", "stats", "final", "replay"}
STATS_KEYS = {"acked", "failed", "acked_lost", "consumed", "elections_clean", "elections_unclean", "elections_elr", "events", "sim_ms", "wall_s", "trace_hash"}


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def run(tmp_path, source, *args, name="run"):
    out = tmp_path / name
    result = cli("run", source, "--out", out, *args)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
    return result, out, summary


def write(tmp_path, body: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(body)
    return path


def test_a_library_scenario_writes_a_complete_run_directory(tmp_path):
    result, out, summary = run(tmp_path, "sim-faults-smoke")
    assert result.exit_code == 0, result.output
    assert SUMMARY_KEYS <= set(summary)
    assert STATS_KEYS <= set(summary["stats"])
    assert summary["ok"] is True and summary["failures"] == [] and summary["violations"] == []
    assert summary["scenario"] == "sim-faults-smoke" and summary["runtime"] == "sim"
    assert summary["replay"] == "kraftlab run sim-faults-smoke --seed 0 --runtime sim"
    assert set(summary["final"]) == {"partitions", "brokers", "quorum"}
    assert summary["final"]["brokers"]["1"]["alive"] is True
    assert len(summary["stats"]["trace_hash"]) == 32
    assert summary["stats"]["sim_ms"] > 3500.0  # the steps' 3.5 s, after the cluster came up
    assert summary["final"]["quorum"]["leader"] in (1, 2, 3)
    # scenario.yaml is the scenario as run, defaults filled in, and loads back to the same model.
    as_run = yaml.safe_load((out / "scenario.yaml").read_text())
    assert as_run["cluster"]["config"]["replica.lag.time.max.ms"] == 30000
    original, _ = load_scenario("sim-faults-smoke")
    assert Scenario.model_validate(as_run) == original
    # The history (Parquet, files per node) holds every row the summary counts, each node's rows
    # numbered per incarnation from 0 without a gap.
    events = read_rows(out / "events")
    assert len(events) == summary["stats"]["events"]
    by_process: dict[tuple[str, int], list[int]] = {}
    for e in events:
        by_process.setdefault((e["node"], e["incarnation"]), []).append(e["node_seq"])
    assert all(sorted(seqs) == list(range(len(seqs))) for seqs in by_process.values())
    assert ("b1", 1) in by_process  # b1 restarted once
    faults = [(e["fault"], e["target"]) for e in events if e["kind"] == "fault"]
    assert ("crash_os", "b1") in faults and ("crash_disk", "b2") in faults and ("shutdown", "b3") in faults
    assert any(e["node"] == "b3" and e["kind"] == "process_stop" for e in events)
    # Nothing half-written is left beside it.
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_the_same_seed_gives_the_same_trace_hash(tmp_path):
    _, _, a = run(tmp_path, "sim-faults-smoke", name="a")
    _, _, b = run(tmp_path, "sim-faults-smoke", name="b")
    assert a["stats"]["trace_hash"] == b["stats"]["trace_hash"]


def test_rerunning_the_scenario_as_run_reproduces_the_trace(tmp_path):
    _, out, first = run(tmp_path, "sim-faults-smoke", "--set", "cluster.storage=fsync", name="first")
    _, _, again = run(tmp_path, out / "scenario.yaml", name="again")
    assert again["stats"]["trace_hash"] == first["stats"]["trace_hash"]


def test_a_failed_expectation_exits_1_names_the_step_and_prints_the_replay(tmp_path):
    path = write(
        tmp_path,
        """\
        name: must-fail
        seed: 9
        steps:
          - wait: 10
          - crash: {node: b2, mode: process}
          - expect: {broker: 2, alive: true}
          - wait: 10
        """.replace("        ", ""),
    )
    result, _, summary = run(tmp_path, path)
    assert result.exit_code == 1
    assert summary["ok"] is False
    assert summary["failures"] == [{"step": 2, "kind": "expect", "detail": "broker 2: alive: expected true, got false"}]
    # Whitespace aside: the console wraps a long path wherever it likes (inside the file name too).
    assert "".join(f"replay: kraftlab run {path} --seed 9 --runtime sim".split()) in "".join(result.output.split())
    # The run stopped at the failing step: no time passed after it.
    events = [e for e in read_rows(tmp_path / "run" / "events") if e["node"] == "driver"]
    assert [e["kind"] for e in events[-2:]] == ["step_failed", "steps_done"]
    assert events[-1]["time_ms"] == pytest.approx(summary["stats"]["sim_ms"], abs=0.001)


def test_wait_for_times_out_with_what_it_saw(tmp_path):
    path = write(tmp_path, "name: t\nsteps:\n  - crash: {node: b1, mode: os}\n  - wait_for: {broker: 1, alive: true, timeout_ms: 500}\n")
    result, _, summary = run(tmp_path, path)
    assert result.exit_code == 1
    (failure,) = summary["failures"]
    assert failure["kind"] == "wait_for" and "timed out after 500 ms" in failure["detail"]
    assert "alive: expected true, got false" in failure["detail"]


def test_conditions_the_running_roles_cannot_answer_fail_as_unknown(tmp_path):
    path = write(tmp_path, "name: t\ntopics: [{name: t}]\nsteps:\n  - expect: {partition: t-0, hwm: 0}\n")
    result, _, summary = run(tmp_path, path)
    assert result.exit_code == 1
    assert "hwm: expected 0, got unknown" in summary["failures"][0]["detail"]


def test_a_produced_record_is_acknowledged_and_consumed(tmp_path):
    path = write(
        tmp_path,
        "name: t\ntopics: [{name: t}]\nsteps:\n"
        "  - produce: {topic: t, values: [a, b], expect: acked}\n"
        "  - consume: {topic: t, expect_values: [a, b]}\n"
        "  - expect: {partition: t-0, hwm: 2}\n",
    )
    result, _, summary = run(tmp_path, path)
    assert result.exit_code == 0, summary["failures"]
    assert summary["stats"]["acked"] == 2 and summary["stats"]["consumed"] == 2
    assert summary["final"]["partitions"]["t-0"]["hwm"] == 2


def test_an_expected_violation_that_does_not_happen_fails_the_run(tmp_path):
    path = write(tmp_path, "name: t\nexpect_violations: [LeaderCompleteness]\nsteps: [{wait: 5}]\n")
    result, _, summary = run(tmp_path, path)
    assert result.exit_code == 1
    assert summary["ok"] is False and summary["failures"] == []
    assert "expected violation did not happen: LeaderCompleteness" in result.output


def test_overrides_change_the_run_and_appear_in_the_replay(tmp_path):
    result, out, summary = run(
        tmp_path, "sim-faults-smoke", "--set", "cluster.storage=process_buffer", "--set", "cluster.config.min.insync.replicas=2", "--seed", "4"
    )
    assert result.exit_code == 0
    as_run = yaml.safe_load((out / "scenario.yaml").read_text())
    assert as_run["cluster"]["storage"] == "process_buffer"
    assert as_run["cluster"]["config"]["min.insync.replicas"] == 2
    assert as_run["seed"] == 4 and summary["seed"] == 4
    assert summary["replay"] == (
        "kraftlab run sim-faults-smoke --seed 4 --runtime sim "
        "--set cluster.storage=process_buffer --set cluster.config.min.insync.replicas=2"
    )


def test_a_role_that_breaks_is_reported_with_its_traceback(tmp_path, monkeypatch):
    def broken(self, env, now_ms):
        raise AssertionError("internal invariant broken")

    monkeypatch.setattr(BrokerNode, "handle", broken)
    result, out, summary = run(tmp_path, "sim-faults-smoke")
    assert result.exit_code == 1
    (failure,) = summary["failures"]
    assert failure["kind"] == "internal_error" and "internal invariant broken" in failure["detail"]
    assert failure["step"] == -1  # brokers handle messages while the cluster comes up, before step 0
    assert "Traceback" in (out / "error.txt").read_text()


def test_an_occupied_output_folder_is_refused_and_kept(tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = cli("run", "sim-faults-smoke", "--out", out)
    assert result.exit_code == 2 and "not empty" in result.output
    assert "seed=" not in result.output  # refused before the run's header: nothing ran
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_default_run_directory_is_under_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("run", "sim-faults-smoke", "--seed", "3")
    assert result.exit_code == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("sim-faults-smoke-3-")
    assert (run_dir / "summary.json").exists()


def test_runs_started_together_get_a_default_folder_each(tmp_path, monkeypatch):
    # Three runs of one scenario and seed in one second: each default folder is reserved by its
    # own mkdir (before, two took one name and the second crashed renaming onto the first).
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "kraftlab.cli", "run", "sim-faults-smoke"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    codes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [c for c, _ in codes] == [0, 0, 0], codes
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 3 and all((r / "summary.json").exists() for r in runs)


def test_scenarios_lists_the_library():
    result = cli("scenarios")
    assert result.exit_code == 0 and "sim-faults-smoke" in result.output


def test_demo_in_the_simulator_compares_elr_on_and_off(tmp_path):
    result = cli("demo", "--runtime", "sim", "--no-analyze", "--out", tmp_path / "demo")
    assert result.exit_code == 0, result.output
    on = json.loads((tmp_path / "demo" / "last-replica-standing-load" / "summary.json").read_text())
    off = json.loads((tmp_path / "demo" / "last-replica-standing-load-no-elr" / "summary.json").read_text())
    assert on["ok"] and off["ok"]
    assert on["stats"]["acked_lost"] == 0 < off["stats"]["acked_lost"]
    # ELR waits offline for broker 2; without it broker 1 is elected again as soon as it is back.
    assert on["stats"]["availability"]["t-0"]["offline_ms"] > off["stats"]["availability"]["t-0"]["offline_ms"]
    for row in ("ELR on", "ELR off"):
        assert row in result.output


def test_demo_serves_each_runs_metrics_on_its_own_port(tmp_path):
    result = cli("demo", "--runtime", "sim", "--no-analyze", "--metrics-port", "0", "--out", tmp_path / "demo")
    assert result.exit_code == 0, result.output
    urls = re.findall(r"metrics \((ELR on|ELR off)\): (http://127\.0\.0\.1:(\d+)/metrics)", result.output)
    assert {variant for variant, _, _ in urls} == {"ELR on", "ELR off"}
    assert len({port for _, _, port in urls}) == 2
    for name in ("last-replica-standing-load", "last-replica-standing-load-no-elr"):
        assert (tmp_path / "demo" / name / "metrics.om").read_text().endswith("# EOF\n")


def test_demo_refuses_a_non_empty_out_folder(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "keep.txt").write_text("mine")
    result = cli("demo", "--runtime", "sim", "--no-analyze", "--out", tmp_path / "demo")
    assert result.exit_code == 2 and "not empty" in result.output
    assert (tmp_path / "demo" / "keep.txt").read_text() == "mine"


def test_the_published_json_schema_is_current():
    published = Path(__file__).resolve().parents[2] / "workloads" / "scenario.schema.json"
    assert json.loads(published.read_text()) == Scenario.model_json_schema(by_alias=True), (
        "regenerate with `make schema`"
    )


@pytest.mark.parametrize("name", sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "workloads" / "library").glob("*.yaml")))
def test_every_library_scenario_validates(name):
    load_scenario(name)


def test_the_end_of_the_steps_judges_everything_once_more(tmp_path, monkeypatch):
    """The online checks judge what each event touched; at the end of the steps one full check
    judges the whole view, and what it finds is in the summary like any violation."""
    from observability.checks import OnlineChecks

    full = OnlineChecks.check_all
    calls = []

    def spy(self):
        calls.append(1)
        return {**full(self), "LogMatching": "seen by the end-of-steps check"}

    monkeypatch.setattr(OnlineChecks, "check_all", spy)
    result, out, summary = run(tmp_path, "sim-faults-smoke")
    assert calls == [1]  # once, not after every event
    assert result.exit_code == 1 and not summary["ok"]
    assert [(v["invariant"], v["detail"]) for v in summary["violations"]] == [("LogMatching", "seen by the end-of-steps check")]


def test_a_finished_run_leaves_nothing_of_its_world_in_the_process(tmp_path, monkeypatch):
    """A run's world (simulator, roles, logs, checks) is one big reference cycle, which the
    collector's raised thresholds (gc_tuning.py) almost never collect: a process running run after
    run, as a campaign's workers do, grew by every run's world until `run_scenario` freed it."""
    import weakref

    import kraftlab.runner as runner

    worlds = []
    build = runner.build_cluster

    def build_and_watch(*args, **kwargs):
        cluster = build(*args, **kwargs)
        worlds.append(weakref.ref(cluster))
        return cluster

    monkeypatch.setattr(runner, "build_cluster", build_and_watch)
    for name in ("last-replica-standing-load", "sim-faults-smoke"):
        scenario, _ = load_scenario(name)
        runner.run_scenario(scenario, source=name, out_dir=tmp_path / name)
    assert len(worlds) == 2 and [ref() for ref in worlds] == [None, None]
