"""`cluster.listeners: [kafka]` from the files alone: accepted for runtime ray, refused for the
simulator (exit 2, naming the key, nothing runs), and an unknown listener named as such."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from kraftlab.cli import main
from kraftlab.runner import listeners_refusal
from workloads.scenario.loading import validate


def scenario(runtime: str, listeners: list[str]):
    return validate({"name": "k", "runtime": runtime, "cluster": {"listeners": listeners}, "topics": [{"name": "t"}]}, "k.yaml")


def test_kafka_listeners_need_the_ray_runtime():
    assert listeners_refusal(scenario("ray", ["kafka"])) is None
    assert listeners_refusal(scenario("sim", [])) is None
    assert listeners_refusal(scenario("sim", ["kafka"])).startswith("cluster.listeners: [kafka] needs runtime ray")


def test_the_cli_refuses_a_simulated_run_with_listeners_before_anything_runs(tmp_path):
    path = tmp_path / "k.yaml"
    path.write_text(yaml.safe_dump({"name": "k", "cluster": {"listeners": ["kafka"]}, "topics": [{"name": "t"}]}))
    done = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "r")])
    assert done.exit_code == 2 and f"{path}: cluster.listeners" in done.output and "--runtime ray" in done.output
    assert not (tmp_path / "r").exists()
    path.write_text(yaml.safe_dump({"name": "k", "cluster": {"listeners": ["plaintext"]}, "topics": [{"name": "t"}]}))
    done = CliRunner().invoke(main, ["run", str(path), "--runtime", "ray"])
    assert done.exit_code == 2 and "cluster.listeners[0] (line 3): Input should be 'kafka' (got 'plaintext')" in done.output
