"""The testbed's plan and cluster file: pure functions of its name, size and subnet index."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from kraftlab.testbed import cluster_file, lifecycle, plan


def test_every_address_is_in_the_test_block_and_none_is_shared():
    for index in (0, 1, plan.SUBNETS - 1):
        tb = plan.TestbedPlan("t", plan.max_hosts_for_subnet(), index, Path("/state"))
        seen = {tb.bridge_address}
        for host in tb.all_hosts():
            for address in (host.address, *host.node_addresses):
                assert ipaddress.ip_address(address) in tb.network and tb.network.subnet_of(plan.BLOCK)
                assert address not in seen, address
                seen.add(address)
        assert len(seen) == 1 + tb.hosts * (1 + plan.NODE_POOL_SIZE)


def test_the_first_testbed_is_the_contracts_example():
    tb = plan.TestbedPlan("default", 4, 0, Path("/root/.kraftlab/testbeds"))
    assert tb.host(1).address == "198.18.0.11" and tb.host(4).address == "198.18.0.14"
    assert tb.key == Path("/root/.kraftlab/testbeds/default/id_ed25519")
    assert tb.host(1).netns == "kraftlab-default-h1"
    # Interface names fit the kernel's 15 characters whatever the testbed's name.
    last = plan.TestbedPlan("a" * 24, plan.max_hosts_for_subnet(), plan.SUBNETS - 1, Path("/s"))
    assert len(last.bridge) <= 15 and all(len(h.veth) <= 15 for h in last.all_hosts())
    with pytest.raises(ValueError):
        plan.subnet(plan.SUBNETS)
    with pytest.raises(ValueError):
        tb.host(5)


def test_every_host_resolves_every_hosts_name():
    tb = plan.TestbedPlan("default", 3, 0, Path("/root/.kraftlab/testbeds"))
    lines = [line.split() for line in tb.hosts_file_text().splitlines()]
    assert ["127.0.0.1", "localhost"] in lines
    assert [["198.18.0.11", "h1"], ["198.18.0.12", "h2"], ["198.18.0.13", "h3"]] == [line for line in lines if line[1].startswith("h")]


@pytest.mark.parametrize("name, ok", [("default", True), ("ci-1", True), ("Default", False), ("1st", False),
                                      ("a" * 25, False), ("a b", False), ("", False)])
def test_names(name, ok):
    assert (plan.name_problem(name) is None) is ok


def test_host_count_is_bounded_by_the_subnet_and_the_memory(monkeypatch):
    monkeypatch.setattr(lifecycle, "memory_available_bytes", lambda: 5 * lifecycle.HOST_MEMORY_BYTES + 1)
    assert lifecycle.hosts_problem(5) is None
    assert "memory for 5 hosts" in lifecycle.hosts_problem(6)
    assert "expected 1.." in lifecycle.hosts_problem(0)
    monkeypatch.setattr(lifecycle, "memory_available_bytes", lambda: 10**15)
    assert "expected 1.." in lifecycle.hosts_problem(plan.max_hosts_for_subnet() + 1)


def test_the_installation_is_kept_only_where_a_private_folder_would_hide_it(monkeypatch):
    monkeypatch.setattr(lifecycle, "root_home", lambda: "/root")
    kept = lifecycle._keep(["/tmp/clone/.venv", "/root/.pyenv/versions/3.11.7", "/work/main", "/rootless", "/var/lib/kraftlab/x"])
    assert kept == ["/tmp/clone/.venv", "/root/.pyenv/versions/3.11.7", "/var/lib/kraftlab/x"]


def test_cluster_file_one_ray_node_per_host():
    tb = plan.TestbedPlan("t", 3, 0, Path("/state"))
    config = yaml.safe_load(cluster_file.render(tb, ["/work/main"]))
    assert config["provider"] == {"type": "local", "head_ip": "198.18.0.11", "worker_ips": ["198.18.0.12", "198.18.0.13"]}
    assert config["min_workers"] == config["max_workers"] == 2
    assert config["auth"] == {"ssh_user": "root", "ssh_private_key": "/state/t/id_ed25519"}
    head = " ".join(config["head_start_ray_commands"])
    assert "RAY_enable_autoscaler_v2=0 ray start --head" in head and "--node-ip-address=198.18.0.11" in head
    assert config["head_start_ray_commands"][0] == config["worker_start_ray_commands"][0] == "ray stop"
    assert f"--num-cpus={cluster_file.cpus_per_host(3)}" in config["worker_start_ray_commands"][1]


def test_a_plan_this_kraftlab_could_not_have_made_is_no_plan(tmp_path, monkeypatch):
    """`down` then finds the hosts by their namespaces' names alone, instead of failing."""
    monkeypatch.setenv("KRAFTLAB_TESTBEDS", str(tmp_path))
    (tmp_path / "t").mkdir()
    for saved in ('{"hosts": 2, "index": 100}', '{"hosts": 2}', "not json"):
        (tmp_path / "t" / "plan.json").write_text(saved)
        assert lifecycle.load_plan("t") is None
    (tmp_path / "t" / "plan.json").write_text('{"hosts": 2, "index": 3}')
    assert lifecycle.load_plan("t").network == plan.subnet(3)
