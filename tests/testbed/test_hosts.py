"""`kraftlab testbed up|status|exec|down`: each host is a machine of its own as far as a process on
it can tell (its network, files, processes and name), and bad input changes nothing."""

from __future__ import annotations

import ipaddress
import json
import subprocess

from kraftlab.testbed import lifecycle, plan

import pytest

from .conftest import kraftlab, on_host

pytestmark = pytest.mark.testbed

NAME = "ci-hosts"


def netns_of(name: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], text=True, capture_output=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.startswith(f"kraftlab-{name}-")]


def link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def test_hosts_are_separate_machines_on_one_network(make_testbed):
    tb, described = make_testbed(NAME, 3)

    # testbed.json as docs/reference shows it: addresses from 198.18.0.0/15 only.
    assert described["name"] == NAME and [h["name"] for h in described["hosts"]] == ["h1", "h2", "h3"]
    assert described["cluster_file"] == str(tb.cluster_file) and tb.cluster_file.exists()
    for host in described["hosts"]:
        assert ipaddress.ip_address(host["address"]) in plan.BLOCK
        assert all(ipaddress.ip_address(a) in plan.BLOCK for a in host["node_addresses"])
        assert host["ssh_user"] == "root" and host["ssh_key"] == str(tb.key)
    assert kraftlab("testbed", "status", "--name", NAME).returncode == 0

    # Its own name, data directory and process table: a few processes, sshd the first.
    for host in ("h1", "h2", "h3"):
        seen = on_host(NAME, host, "hostname; cat /var/lib/kraftlab/host.json; ps -e -o pid=,comm= | head -1; ps -e | wc -l")
        assert seen.returncode == 0, seen.stderr
        name, host_json, first, count = seen.stdout.splitlines()
        assert name == host and json.loads(host_json)["host"] == host
        assert first.split() == ["1", "sshd"] and int(count) < 20

    # Every host resolves its own name and the others' (Java's `InetAddress.getLocalHost()`, which
    # RayDP's app master calls, fails on a host whose name does not resolve).
    resolved = on_host(NAME, "h2", "getent hosts $(hostname) h1 h3 localhost")
    assert resolved.returncode == 0 and [line.split() for line in resolved.stdout.splitlines()][:3] == [
        [described["hosts"][1]["address"], "h2"], [described["hosts"][0]["address"], "h1"], [described["hosts"][2]["address"], "h3"]], resolved.stdout

    # Its own /tmp and /dev/shm: a file written on h1 is not on h2, nor on this machine.
    assert on_host(NAME, "h1", "echo h1 > /tmp/ci-mark && echo h1 > /dev/shm/ci-mark").returncode == 0
    assert on_host(NAME, "h1", "cat /tmp/ci-mark /dev/shm/ci-mark").stdout.split() == ["h1", "h1"]
    assert on_host(NAME, "h2", "ls /tmp/ci-mark /dev/shm/ci-mark").returncode != 0
    assert not __import__("pathlib").Path("/tmp/ci-mark").exists()

    # A process killer on one host (what `ray stop` is) reaches no process of another.
    assert on_host(NAME, "h1", "setsid sleep 600 >/dev/null 2>&1 < /dev/null &").returncode == 0
    assert on_host(NAME, "h2", "pkill -9 -x sleep; true").returncode == 0
    assert on_host(NAME, "h1", "pgrep -x sleep").returncode == 0

    # One network: every host reaches every other host's sshd, and this machine; no route beyond.
    addresses = [h["address"] for h in described["hosts"]]
    probe = ("import socket, sys\n"
             "for a in sys.argv[1:]:\n"
             "    socket.create_connection((a, 22), timeout=5).close()\n")
    for host in ("h1", "h3"):
        reached = kraftlab("testbed", "exec", "--name", NAME, host, "--", "python3", "-c", probe, *addresses)
        assert reached.returncode == 0, reached.stderr
    routes = on_host(NAME, "h2", "ip route show default; ip route get 203.0.113.1 2>&1")
    assert "default" not in routes.stdout and "unreachable" in routes.stdout
    machine = tb.bridge_address
    assert on_host(NAME, "h2", f"ip route get {machine}").returncode == 0

    # `kraftlab testbed exec` runs there and passes the command's exit code through.
    assert kraftlab("testbed", "exec", "h3", "--name", NAME, "--", "sh", "-c", "exit 7").returncode == 7
    assert kraftlab("testbed", "exec", "--name", NAME, "h3", "--", "hostname").stdout == "h3\n"


def test_bad_input_changes_nothing(make_testbed):
    tb, _ = make_testbed(NAME, 1)
    namespaces = netns_of(NAME)

    taken = kraftlab("testbed", "up", "--name", NAME)
    assert taken.returncode == 2 and "already in use" in taken.stderr
    for args, words in [
        (["--hosts", "0", "--name", "ci-other"], "--hosts 0"),
        (["--hosts", "4000", "--name", "ci-other"], "--hosts 4000"),
        (["--hosts", str(lifecycle.memory_available_bytes() // lifecycle.HOST_MEMORY_BYTES + 1), "--name", "ci-other"], "memory"),
        (["--name", "Bad_Name"], "--name 'Bad_Name'"),
    ]:
        refused = kraftlab("testbed", "up", *args)
        assert refused.returncode == 2 and words in refused.stderr, (args, refused.stderr)
    assert not (lifecycle.state_root() / "ci-other").exists() and not netns_of("ci-other")
    assert netns_of(NAME) == namespaces and kraftlab("testbed", "status", "--name", NAME).returncode == 0

    unknown_host = kraftlab("testbed", "exec", "--name", NAME, "h9", "--", "true")
    assert unknown_host.returncode == 2 and "h9" in unknown_host.stderr
    assert kraftlab("testbed", "status", "--name", "ci-none").returncode == 1


def test_down_removes_everything_and_is_idempotent(make_testbed):
    tb, _ = make_testbed(NAME, 2)
    assert netns_of(NAME) and link_exists(tb.bridge)
    first = kraftlab("testbed", "down", "--name", NAME)
    assert first.returncode == 0, first.stderr
    assert not netns_of(NAME) and not link_exists(tb.bridge) and not tb.folder.exists()
    assert all(not link_exists(h.veth) for h in tb.all_hosts())
    again = kraftlab("testbed", "down", "--name", NAME)
    assert again.returncode == 0 and "nothing to remove" in again.stderr


def test_down_after_a_crashed_up_removes_what_it_left():
    """What an `up` killed half-way leaves: its plan, the bridge, one host running, the second
    host's namespace without its link. `down` removes all of it."""
    lifecycle.down(NAME, log=lambda _m: None)
    tb = plan.TestbedPlan(NAME, 2, max(set(range(plan.SUBNETS)) - lifecycle._used_indexes()), lifecycle.state_root())
    tb.folder.mkdir(parents=True)
    (tb.folder / "plan.json").write_text(json.dumps({"name": NAME, "hosts": 2, "index": tb.index}))
    try:
        subprocess.run(["ip", "link", "add", tb.bridge, "type", "bridge"], check=True)
        first, second = tb.all_hosts()
        lifecycle._make_host_network(tb, first)
        lifecycle._make_host_folders(tb, first, "")
        lifecycle._start_host(tb, first)
        subprocess.run(["ip", "netns", "add", second.netns], check=True)
        pid = lifecycle.host_pid(first)
        assert pid is not None
    finally:
        done = kraftlab("testbed", "down", "--name", NAME)
    assert done.returncode == 0, done.stderr
    assert not netns_of(NAME) and not link_exists(tb.bridge) and not tb.folder.exists()
    assert not lifecycle._alive(pid)
