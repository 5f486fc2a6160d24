"""Network faults as nftables rules: each rule names the nodes of its fault, by their own addresses."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from actors.runtime import kernel_rules
from actors.runtime.network import NetworkFaults

ENDPOINTS = {"b1": ("198.18.1.1", 40001), "b2": ("198.18.1.2", 40002), "b3": ("198.18.1.17", 40003),
             "c1": ("198.18.1.18", 40004)}


def test_no_fault_no_rule():
    assert kernel_rules.rules(NetworkFaults(), ENDPOINTS) == []


def test_isolate_drops_everything_from_and_to_the_node_only():
    faults = NetworkFaults()
    faults.isolate("b2")
    assert kernel_rules.rules(faults, ENDPOINTS) == ["ip saddr 198.18.1.2 drop", "ip daddr 198.18.1.2 drop"]


def test_partition_cuts_both_connections_of_every_pair_across_groups():
    faults = NetworkFaults()
    faults.partition([["b1"], ["b2", "c1"]])
    got = kernel_rules.rules(faults, ENDPOINTS)
    # b1 -> b2: b1's packets to b2's port and b2's answers from it; and the same for b2 -> b1, b1 <-> c1.
    assert "ip saddr 198.18.1.1 ip daddr 198.18.1.2 tcp dport 40002 drop" in got
    assert "ip saddr 198.18.1.2 ip daddr 198.18.1.1 tcp sport 40002 drop" in got
    assert "ip saddr 198.18.1.2 ip daddr 198.18.1.1 tcp dport 40001 drop" in got
    assert "ip saddr 198.18.1.18 ip daddr 198.18.1.1 tcp dport 40001 drop" in got
    assert len(got) == 8 and not any("198.18.1.17" in rule for rule in got)  # b3 is in no group


def test_one_way_link_cuts_one_connection_and_a_lossy_one_drops_at_random():
    faults = NetworkFaults()
    faults.link("b1", "b3", drop=1.0)
    faults.link("b3", "c1", drop=0.25)
    assert kernel_rules.rules(faults, ENDPOINTS) == [
        "ip saddr 198.18.1.1 ip daddr 198.18.1.17 tcp dport 40003 drop",
        "ip saddr 198.18.1.17 ip daddr 198.18.1.1 tcp sport 40003 drop",
        "ip saddr 198.18.1.17 ip daddr 198.18.1.18 tcp dport 40004 numgen random mod 10000 < 2500 drop",
    ]


def test_a_node_without_endpoint_is_left_out_and_heal_removes_its_rules():
    faults = NetworkFaults()
    faults.isolate("b1")
    faults.partition([["b2"], ["b3"]])
    assert kernel_rules.rules(faults, {n: e for n, e in ENDPOINTS.items() if n != "b1"}) == kernel_rules.rules(
        _only_partition(), ENDPOINTS)
    faults.heal("b1")
    assert kernel_rules.rules(faults, ENDPOINTS) == kernel_rules.rules(_only_partition(), ENDPOINTS)
    faults.heal()
    assert kernel_rules.rules(faults, ENDPOINTS) == []


def _only_partition() -> NetworkFaults:
    faults = NetworkFaults()
    faults.partition([["b2"], ["b3"]])
    return faults


def test_a_delay_is_refused():
    faults = NetworkFaults()
    faults.link("b1", "b2", delay_ms=50)
    with pytest.raises(kernel_rules.KernelFaultUnsupported, match="netem"):
        kernel_rules.rules(faults, ENDPOINTS)


@pytest.mark.skipif(shutil.which("nft") is None and not shutil.which("/usr/sbin/nft"), reason="needs nftables' nft")
def test_the_ruleset_loads_replaces_and_is_removed_in_a_scratch_namespace():
    if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
        pytest.skip("needs root (a network namespace of its own)")
    namespace = f"kraftlab-unit-{uuid.uuid4().hex[:8]}"
    table = kernel_rules.table_name("unit")
    faults = NetworkFaults()
    faults.partition([["b1"], ["b2"]])
    faults.link("b3", "c1", drop=0.5)
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    try:
        def nft(script: str) -> subprocess.CompletedProcess:
            return subprocess.run(["ip", "netns", "exec", namespace, "nft", "-f", "-"], input=script, text=True,
                                  capture_output=True)

        for _ in range(2):  # loading twice replaces, not adds
            loaded = nft(kernel_rules.ruleset(table, faults, ENDPOINTS))
            assert loaded.returncode == 0, loaded.stderr
        listed = subprocess.run(["ip", "netns", "exec", namespace, "nft", "list", "table", "inet", table],
                                capture_output=True, text=True).stdout
        assert listed.count(" drop") == len(kernel_rules.rules(faults, ENDPOINTS)) == 5
        assert nft(kernel_rules.removal(table)).returncode == 0
        assert nft(kernel_rules.removal(table)).returncode == 0  # idempotent
        assert table not in subprocess.run(["ip", "netns", "exec", namespace, "nft", "list", "tables"],
                                           capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", namespace])
