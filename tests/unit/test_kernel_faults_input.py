"""`--faults kernel`: what is refused from the files alone (exit 2, nothing runs), the replay
command, and the node addresses a host lends (claimed for a process's life)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from actors.runtime.ray import host_addresses
from kraftlab.campaign.command import kernel_faults_refusal as campaign_refusal
from kraftlab.campaign.execute import replay_command as campaign_replay
from kraftlab.cli import main
from kraftlab.runner import kernel_faults_refusal, replay_command
from workloads.campaign.spec import load_campaign
from workloads.scenario.loading import load_scenario, validate



def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def scenario(steps, runtime="ray"):
    return validate({"name": "k", "runtime": runtime, "topics": [{"name": "t"}], "steps": steps}, "k.yaml")


def test_kernel_faults_need_the_ray_runtime_and_no_delay():
    assert kernel_faults_refusal(scenario([{"isolate": "b1"}, {"link": {"from": "b1", "to": "b2", "drop": 0.5}}])) is None
    assert "runtime ray" in kernel_faults_refusal(scenario([], runtime="sim"))
    refusal = kernel_faults_refusal(scenario([{"isolate": "b1"}, {"link": {"from": "b1", "to": "b2", "delay_ms": 20}}]))
    assert refusal.startswith("steps[1].link.delay_ms: 20 ms") and "netem" in refusal


def test_the_library_scenarios_with_delays_are_refused_and_the_rest_accepted():
    maximal, _ = load_scenario("maximal-isr", runtime="ray")
    assert "delay_ms" in kernel_faults_refusal(maximal)
    elr, _ = load_scenario("last-replica-standing-elr", runtime="ray")
    assert kernel_faults_refusal(elr) is None


def test_the_replay_command_keeps_the_fault_backend():
    elr, _ = load_scenario("last-replica-standing-elr", runtime="ray")
    assert replay_command("x.yaml", elr).endswith("--runtime ray")
    assert replay_command("x.yaml", elr, faults="kernel").endswith("--runtime ray --faults kernel")


def test_campaigns_with_sim_cells_or_delays_are_refused(tmp_path):
    def campaign(base_runtime: str, faults: dict) -> object:
        path = tmp_path / f"c-{base_runtime}-{len(faults)}.yaml"
        path.write_text(json.dumps({"name": "c", "scenario": "random-faults", "seeds": 1,
                                    "matrix": {"runtime": [base_runtime]}, "faults": faults}))
        return load_campaign(str(path))

    drop_only = {"kinds": ["isolate", "link"], "link_delay_ms": [0, 0]}
    assert campaign_refusal(campaign("ray", drop_only)) is None
    assert "run in the simulator" in campaign_refusal(campaign("sim", drop_only))
    assert campaign_refusal(campaign("ray", {"kinds": ["link"]})).startswith("faults.link_delay_ms")
    assert campaign_refusal(campaign("ray", {"kinds": ["slow"]})).startswith("faults.kinds")
    plan = type("Plan", (), {"raw": {"runtime": "ray"}, "run": "c0-s1"})()
    assert campaign_replay(tmp_path, plan, "kernel").endswith("--runtime ray --faults kernel")


def test_the_cli_refuses_before_anything_runs(tmp_path):
    done = cli("run", "maximal-isr", "--runtime", "ray", "--faults", "kernel", "--out", str(tmp_path / "r"))
    assert done.exit_code == 2 and "steps[2].link.delay_ms" in done.output and "netem" in done.output
    assert not (tmp_path / "r").exists()
    done = cli("run", "last-replica-standing-elr", "--faults", "kernel")
    assert done.exit_code == 2 and "only for runtime ray" in done.output


def test_a_node_address_is_held_while_its_descriptor_is_open(tmp_path):
    host_file = tmp_path / "host.json"
    with pytest.raises(host_addresses.NoNodeAddress, match="missing"):
        host_addresses.claim(host_file)
    host_file.write_text(json.dumps({"host": "h1", "node_addresses": ["198.18.1.0", "198.18.1.1"]}))
    first, fd1 = host_addresses.claim(host_file)
    second, fd2 = host_addresses.claim(host_file)
    assert (first, second) == ("198.18.1.0", "198.18.1.1") and host_addresses.free_count(host_file) == 0
    with pytest.raises(host_addresses.NoNodeAddress, match="host h1: all 2 node addresses are taken"):
        host_addresses.claim(host_file)
    os.close(fd1)  # the process that held it ended
    assert host_addresses.free_count(host_file) == 1 and host_addresses.claim(host_file)[0] == "198.18.1.0"
    os.close(fd2)
