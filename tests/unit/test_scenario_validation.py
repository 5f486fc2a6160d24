"""Malformed scenario files: each gives exit code 2, a message naming the file and the key path,
and nothing runs or is written (docs/reference/run-directory.md, "Exit codes")."""

import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from kraftlab.cli import main

BASE = """\
name: base
cluster: {brokers: 3, controllers: 3}
topics: [{name: t, partitions: 2, replication_factor: 3}]
"""

# (id, file body, key path the message must name, words the message must contain)
CASES = [
    ("unknown-step", BASE + "steps: [{crsh: {node: b1, mode: os}}]", "steps[0]", "naming a step"),
    ("two-keys-in-a-step", BASE + "steps: [{isolate: b1, wait: 5}]", "steps[0]", "one-key mapping"),
    ("wrong-type", "name: x\ncluster: {brokers: three}", "cluster.brokers", "integer"),
    ("bool-for-int", "name: x\ncluster: {brokers: true}", "cluster.brokers", "integer"),
    ("missing-name", "cluster: {brokers: 3}", "name", "required key is missing"),
    ("bad-storage-mode", "name: x\ncluster: {storage: ssd}", "cluster.storage", "'fsync', 'page_cache' or 'process_buffer'"),
    ("unknown-node", BASE + "steps: [{isolate: b9}]", "steps[0].isolate", "unknown node 'b9'"),
    ("unknown-voter", BASE + "steps: [{crash: {node: c4, mode: os}}]", "steps[0].crash.node", "unknown node 'c4'"),
    ("negative-count", BASE + "steps: [{produce: {topic: t, count: -5}}]", "steps[0].produce.count", "greater than 0"),
    ("negative-brokers", "name: x\ncluster: {brokers: -1}", "cluster.brokers", "greater than 0"),
    ("unknown-top-level-key", "name: x\nnmae: y", "nmae", "unknown key"),
    ("unknown-config-key", "name: x\ncluster: {config: {min.isr: 2}}", "cluster.config.min.isr", "unknown key (expected one of: min.insync.replicas,"),
    ("unknown-leader", BASE + "steps: [{expect: {partition: t-0, leader: 9}}]", "steps[0].expect.leader", "broker 9 does not exist"),
    ("unknown-step-key", BASE + "steps: [{crash: {node: b1, mod: os}}]", "steps[0].crash.mod", "unknown key (expected one of: node, mode)"),
    ("socket-timeout-below-fetch-wait", "name: x\ncluster: {config: {replica.socket.timeout.ms: 100}}", "cluster.config",
     "replica.socket.timeout.ms (100) must be at least replica.fetch.wait.max.ms (500)"),
    ("topic-flush-interval", "name: x\ntopics: [{name: t, config: {flush.messages: 10}}]", "topics[0].config.flush.messages", "log.flush.interval.messages"),
    ("bad-crash-mode", BASE + "steps: [{crash: {node: b1, mode: power}}]", "steps[0].crash.mode", "'process', 'os' or 'disk'"),
    ("negative-wait", BASE + "steps: [{wait: -1}]", "steps[0].wait", "greater than or equal to 0"),
    ("attribute-without-subject", BASE + "steps: [{expect: {isr: [1]}}]", "steps[0].expect", "needs a `partition` subject"),
    ("two-subjects", BASE + "steps: [{expect: {partition: t-0, broker: 1, fenced: true}}]", "steps[0].expect", "at most one subject"),
    ("bad-comparison", BASE + "steps: [{expect: {acked: '>> 3'}}]", "steps[0].expect.acked", "comparison"),
    ("rf-above-brokers", "name: x\ntopics: [{name: t, replication_factor: 4}]", "topics[0].replication_factor", "at most cluster.brokers (3)"),
    ("unknown-topic", BASE + "steps: [{produce: {topic: u, count: 1}}]", "steps[0].produce", "unknown topic 'u'"),
    ("partition-out-of-range", BASE + "steps: [{expect: {partition: t-2, leader: 1}}]", "steps[0].expect.partition", "partitions 0..1"),
    ("bad-partition-ref", BASE + "steps: [{expect: {partition: t, leader: 1}}]", "steps[0].expect.partition", "pattern"),
    ("unknown-invariant", "name: x\nexpect_violations: [LeaderCompletness]", "expect_violations", "unknown invariant"),
    ("drop-above-one", BASE + "steps: [{link: {from: b1, to: b2, drop: 1.5}}]", "steps[0].link.drop", "less than or equal to 1"),
    ("assignment-length", "name: x\ntopics: [{name: t, replication_factor: 3, assignment: {0: [1, 2]}}]", "topics[0].assignment.0", "expected 3 replicas"),
    ("node-in-two-groups", BASE + "steps: [{partition: [[b1, b2], [b2, b3]]}]", "steps[0].partition", "more than one group"),
    ("elr-switch-conflict", "name: x\ncluster: {protocol: {elr: true}, config: {eligible.leader.replicas.enable: false}}", "cluster", "same switch"),
    ("bad-acks", BASE + "steps: [{produce: {topic: t, count: 1, acks: 2}}]", "steps[0].produce.acks", "'all', 1, 0 or -1"),
    ("count-and-values", BASE + "steps: [{produce: {topic: t, count: 1, values: [a]}}]", "steps[0].produce", "exactly one of `count` or `values`"),
    ("bad-recovery-strategy", "name: x\ncluster: {config: {unclean.recovery.strategy: yolo}}", "cluster.config.unclean.recovery.strategy", "balanced"),
    ("bad-selector-topic", BASE + "steps: [{crash: {node: 'partition-leader:u-0', mode: os}}]", "steps[0].crash.node", "unknown topic 'u'"),
    ("bad-name", "name: 'has spaces'", "name", "pattern"),
    ("unknown-voter-in-states", BASE + "steps: [{expect: {quorum: true, states: {5: leader}}}]", "steps[0].expect.states", "voter 5 does not exist"),
    ("bad-quorum-state", BASE + "steps: [{expect: {quorum: true, states: {1: boss}}}]", "steps[0].expect.states.1", "'leader'"),
    ("idempotent-load-acks-1", BASE + "steps: [{load: {acks: 1, idempotent: true}}]", "steps[0].load.idempotent", "`idempotent: true` needs `acks: all`"),
    ("idempotent-load-acks-0", BASE + "steps: [{load: {acks: 0, idempotent: true}}]", "steps[0].load.idempotent", "Must set acks to all in order to use the idempotent producer"),
    ("idempotent-produce-acks-1", BASE + "steps: [{produce: {topic: t, count: 1, acks: 1, idempotent: true}}]", "steps[0].produce.idempotent", "`idempotent: true` needs `acks: all`"),
    ("replica-never-assigned", "name: x\ncluster: {brokers: 3}\ntopics: [{name: t, replication_factor: 2, assignment: {0: [1, 2]}}]\n"
     "steps: [{expect: {replica: {partition: t-0, broker: 3}, leo: 0}}]", "steps[0].expect.replica.broker", "broker 3 is never a replica of t-0"),
    ("follower-selector-rf-1", "name: x\ntopics: [{name: t, replication_factor: 1}]\nsteps: [{shutdown: 'partition-follower:t-0'}]",
     "steps[0].shutdown", "replication_factor 1 (no follower)"),
    ("controller-follower-one-voter", "name: x\ncluster: {controllers: 1}\nsteps: [{isolate: controller-follower}]",
     "steps[0].isolate", "cluster.controllers is 1"),
    ("alter-config-unknown-key", BASE + "steps: [{alter_config: {topic: t, config: {min.isr: 1}}}]", "steps[0].alter_config.config", "min.isr: unknown config key"),
    ("crash-a-client", BASE + "steps: [{crash: {node: producer, mode: process}}]", "steps[0].crash.node",
     "producer is a client: only network faults (isolate, partition, link, heal) may name one"),
    ("load-client-never-started", BASE + "steps: [{load: {producers: 2}}, {link: {from: b1, to: load-producer-3, drop: 1}}]",
     "steps[1].link.to", "unknown client 'load-producer-3': the load steps start 2 producers (load-producer-1..load-producer-2)"),
    ("load-consumer-without-load", BASE + "steps: [{isolate: load-consumer-1}]", "steps[0].isolate",
     "unknown client 'load-consumer-1': the load steps start 0 consumers"),
    ("log-dir-out-of-range", "name: x\ncluster: {log_dirs: 2}\nsteps: [{fail_log_dir: {broker: 1, dir: 2}}]", "steps[0].fail_log_dir.dir",
     "expected a log directory 0..1 (cluster.log_dirs is 2), got 2"),
    ("log-dir-of-one-dir-broker", BASE + "steps: [{fail_log_dir: {broker: 1, dir: 1}}]", "steps[0].fail_log_dir.dir",
     "expected a log directory 0..0 (cluster.log_dirs is 1), got 1"),
    ("log-dir-unknown-broker", BASE + "steps: [{fail_log_dir: {broker: 4, dir: 0}}]", "steps[0].fail_log_dir.broker", "broker 4 does not exist"),
    ("log-dir-negative", BASE + "steps: [{fail_log_dir: {broker: 1, dir: -1}}]", "steps[0].fail_log_dir.dir", "greater than or equal to 0"),
    ("log-dir-missing", BASE + "steps: [{fail_log_dir: {broker: 1}}]", "steps[0].fail_log_dir.dir", "required key is missing"),
    ("log-dirs-zero", "name: x\ncluster: {log_dirs: 0}", "cluster.log_dirs", "greater than 0"),
    ("offline-log-dir-out-of-range", "name: x\ncluster: {log_dirs: 2}\nsteps: [{expect: {broker: 1, offline_log_dirs: [3]}}]",
     "steps[0].expect.offline_log_dirs", "expected a log directory 0..1 (cluster.log_dirs is 2), got 3"),
    ("replica-dir-out-of-range", BASE + "steps: [{expect: {replica: {partition: t-0, broker: 1}, dir: 1}}]", "steps[0].expect.dir",
     "expected a log directory 0..0 (cluster.log_dirs is 1), got 1"),
    ("dir-without-replica", BASE + "steps: [{expect: {partition: t-0, dir: 0}}]", "steps[0].expect", "needs a `replica` subject"),
]


def run_cli(tmp_path, body, *args):
    path = tmp_path / "scenario.yaml"
    path.write_text(body)
    out_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(path), "--out", str(out_dir), *args])
    return result, path, out_dir


@pytest.mark.parametrize("body,key_path,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_scenario_exits_2_naming_file_and_key(tmp_path, body, key_path, words):
    result, path, out_dir = run_cli(tmp_path, body)
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())  # rich may wrap long lines
    assert str(path) in message
    assert f"{key_path} " in message or f"{key_path}:" in message, message
    assert words in message, message
    assert not out_dir.exists()


def test_yaml_syntax_error_names_the_line(tmp_path):
    result, path, out_dir = run_cli(tmp_path, "name: x\ncluster: {brokers: 3\nsteps: []\n")
    assert result.exit_code == 2
    assert "YAML syntax error" in result.output and "line" in result.output
    assert not out_dir.exists()


def test_duplicate_keys_are_an_error_not_silently_the_last(tmp_path):
    result, _, _ = run_cli(tmp_path, "name: x\ncluster: {brokers: 3}\ncluster: {brokers: 5}\n")
    assert result.exit_code == 2
    assert "duplicate key 'cluster'" in result.output


@pytest.mark.parametrize("body", ["", "- just\n- a list\n", "42\n"])
def test_a_file_that_is_not_a_mapping_is_rejected(tmp_path, body):
    result, _, out_dir = run_cli(tmp_path, body)
    assert result.exit_code == 2
    assert "mapping" in result.output
    assert not out_dir.exists()


def test_the_error_names_the_line_of_the_bad_key(tmp_path):
    body = textwrap.dedent(
        """\
        name: x
        cluster:
          brokers: 3
          storage: ssd
        """
    )
    result, _, _ = run_cli(tmp_path, body)
    assert "cluster.storage (line 4)" in " ".join(result.output.split())


def test_every_problem_is_reported_not_just_the_first(tmp_path):
    result, _, _ = run_cli(tmp_path, "name: x\ncluster: {brokers: 0, storage: ssd}\nbogus: 1\n")
    assert result.exit_code == 2
    for key in ("cluster.brokers", "cluster.storage", "bogus"):
        assert key in result.output


@pytest.mark.parametrize(
    "override,words",
    [
        ("cluster.brokers", "expected KEY=VALUE"),
        ("cluster.brokers=many", "cluster.brokers"),
        ("cluster.config.min.insync.replicas=0", "cluster.config.min.insync.replicas"),
        ("cluster.protocol.prevot=false", "cluster.protocol.prevot"),
        ("topics.5.partitions=2", "not an index"),
    ],
)
def test_bad_overrides_exit_2(tmp_path, override, words):
    result, _, out_dir = run_cli(tmp_path, BASE, "--set", override)
    assert result.exit_code == 2
    assert words in " ".join(result.output.split())
    assert not out_dir.exists()


@pytest.mark.parametrize(
    "override,where",
    [
        ("cluster.protocl.prevote=false", "cluster.protocl: unknown key (expected one of: brokers, controllers, racks, storage, log_dirs, config, protocol, listeners, network, disk) (from --set cluster.protocl.prevote=false)"),
        ("cluster.brokers=0", "cluster.brokers: Input should be greater than 0 (got 0) (from --set cluster.brokers=0)"),
    ],
)
def test_a_problem_made_by_an_override_names_it_not_a_line_of_the_file(tmp_path, override, where):
    result, _, _ = run_cli(tmp_path, BASE, "--set", override)
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and where in message and "(line" not in message


def test_a_missing_file_or_unknown_library_name_exits_2(tmp_path):
    result = CliRunner().invoke(main, ["run", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "no such file" in result.output
    result = CliRunner().invoke(main, ["run", "no-such-library-scenario"])
    assert result.exit_code == 2 and "library" in result.output


def test_a_directory_is_refused_as_a_directory_not_as_missing(tmp_path):
    result = CliRunner().invoke(main, ["run", str(tmp_path)])
    message = " ".join(result.output.split())
    assert result.exit_code == 2
    assert str(tmp_path) in message and "is a directory" in message and "no such file" not in message
    assert "a scenario YAML file or a library scenario name" in message


@pytest.mark.parametrize("command", [["run", "sim-faults-smoke"], ["campaign", "switches"], ["demo"]])
@pytest.mark.parametrize("under", [False, True])
def test_an_out_that_is_a_file_is_refused_before_anything_runs(tmp_path, command, under):
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    target = a_file / "sub" if under else a_file
    result = CliRunner().invoke(main, [*command, "--out", str(target)])
    message = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"--out {target}" in message and "a file, not a folder" in message
    assert a_file.read_text() == "mine\n" and list(tmp_path.iterdir()) == [a_file]


def test_the_installed_command_exits_2_on_invalid_input(tmp_path):
    """The real process exit code, not just click's in-process one."""
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ncluster: {storage: ssd}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kraftlab.cli", "run", str(path), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "cluster.storage" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_reference_problem_names_its_line_too(tmp_path):
    """Problems found after the schema (an unknown node, a partition the topic lacks) point at the
    step's line, as schema problems do."""
    result, _, _ = run_cli(tmp_path, BASE + "steps:\n  - produce: {topic: t, count: 1}\n  - crash: {node: b9, mode: os}\n")
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and "steps[1].crash.node (line 6): unknown node 'b9'" in message


@pytest.mark.parametrize("body", [
    # a reassign step makes broker 3 a replica, and the follower of an RF 1 partition
    "name: x\ntopics: [{name: t, replication_factor: 1, assignment: {0: [1]}}]\n"
    "steps: [{reassign: {partition: t-0, replicas: [1, 3]}}, {wait_for: {replica: {partition: t-0, broker: 3}, in_sync: true, timeout_ms: 9000}},"
    " {isolate: 'partition-follower:t-0'}]",
])
def test_what_a_reassign_step_makes_possible_is_not_refused(tmp_path, body):
    result, _, out_dir = run_cli(tmp_path, body)
    assert result.exit_code == 0, result.output
    assert (out_dir / "summary.json").exists()
