"""`load.client: librdkafka` from the files alone: the Kafka listeners it turns on, the settings each
load step's clients get, and what is refused before anything runs (exit 2, naming the file and
the key): the simulator, an unknown client, settings that contradict the load steps' own or that
kraftlab gives itself."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from kraftlab.cli import main
from kraftlab.runner import listeners_refusal
from workloads.scenario.load_spec import kafka_settings
from workloads.scenario.loading import ScenarioError, validate


def scenario(load: dict, step: dict | None = None, runtime: str = "ray") -> dict:
    return {"name": "k", "runtime": runtime, "topics": [{"name": "t"}], "load": load,
            "steps": [{"load": {"rate_per_s": 10, **(step or {})}}]}


def problems(raw: dict) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as caught:
        validate(raw, "k.yaml")
    return [(p.path, p.message) for p in caught.value.problems]


def test_librdkafka_load_turns_the_kafka_listeners_on_and_runs_on_ray_only():
    sc = validate(scenario({"client": "librdkafka"}), "k.yaml")
    assert sc.cluster.listeners == ["kafka"] and listeners_refusal(sc) is None
    assert validate(scenario({}), "k.yaml").cluster.listeners == []  # kraftlab's own load: unchanged
    refusal = listeners_refusal(validate(scenario({"client": "librdkafka"}, runtime="sim"), "k.yaml"))
    assert refusal.startswith("load.client: librdkafka needs runtime ray") and "--runtime ray" in refusal


def test_each_load_step_s_settings_come_from_its_own_keys_then_load_config():
    sc = validate(scenario({"client": "librdkafka", "config": {"linger.ms": 5, "retries": 3}},
                           {"acks": 1, "config": {"delivery.timeout.ms": 20000}}), "k.yaml")
    assert kafka_settings(sc.load, sc.steps[0].load) == {"acks": "1", "enable.idempotence": False, "delivery.timeout.ms": 20000,
                                                         "linger.ms": 5, "retries": 3}
    sc = validate(scenario({"client": "librdkafka", "config": {"acks": -1}}), "k.yaml")
    assert kafka_settings(sc.load, sc.steps[0].load) == {"acks": "all", "enable.idempotence": True}
    sc = validate(scenario({"client": "librdkafka", "config": {"acks": "all", "enable.idempotence": False}}), "k.yaml")
    assert kafka_settings(sc.load, sc.steps[0].load)["enable.idempotence"] is False


def test_contradicting_or_foreign_settings_are_refused_naming_the_key():
    assert problems(scenario({"client": "librdkafka", "config": {"acks": 1}}, {"acks": "all"})) == [
        ("load.config.acks", "1 contradicts steps[0].load.acks ('all'); give it in one place")]
    [(path, message)] = problems(scenario({"client": "librdkafka", "config": {"enable.idempotence": True}}, {"idempotent": False}))
    assert path == "load.config.enable.idempotence" and "steps[0].load.idempotent" in message
    [(path, message)] = problems(scenario({"client": "librdkafka", "config": {"linger.ms": 5}}, {"config": {"linger.ms": 0}}))
    assert path == "load.config.linger.ms" and "steps[0].load.config.linger.ms (0)" in message
    [(path, message)] = problems(scenario({"client": "librdkafka"}, {"config": {"buffer.memory": 1000}}))
    assert path == "steps[0].load.config.buffer.memory" and "queue.buffering.max.kbytes" in message
    [(path, message)] = problems(scenario({"client": "librdkafka", "config": {"bootstrap.servers": "x:1"}}))
    assert path == "load.config.bootstrap.servers" and "set by kraftlab" in message
    [(path, message)] = problems(scenario({"config": {"linger.ms": 5}}))
    assert path == "load.config" and "load.client: librdkafka" in message
    [(path, message)] = problems(scenario({"client": "librdkafka", "config": {"linger.ms": [5]}}))
    assert path.startswith("load.config.linger.ms")


def test_the_cli_refuses_before_anything_runs(tmp_path):
    path = tmp_path / "k.yaml"
    path.write_text(yaml.safe_dump(scenario({"client": "librdkafka"}, runtime="sim")))
    done = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "r")])
    assert done.exit_code == 2 and f"{path}: load.client: librdkafka needs runtime ray" in done.output
    assert not (tmp_path / "r").exists()
    path.write_text(yaml.safe_dump(scenario({"client": "kafka-python"})))
    done = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "r")])
    assert done.exit_code == 2 and "load.client" in done.output and "'kraftlab' or 'librdkafka'" in done.output
    path.write_text(yaml.safe_dump(scenario({"client": "librdkafka", "config": {"acks": 0}}, {"acks": 1})))
    done = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "r")])
    assert done.exit_code == 2 and str(path) in done.output and "load.config.acks" in done.output
    assert not (tmp_path / "r").exists()


def test_the_demo_refuses_real_clients_in_the_simulator(tmp_path):
    done = CliRunner().invoke(main, ["demo", "--client", "librdkafka", "--runtime", "sim", "--out", str(tmp_path / "d")])
    assert done.exit_code == 2 and "--client librdkafka" in done.output and "--runtime ray" in done.output
    assert not (tmp_path / "d").exists()
