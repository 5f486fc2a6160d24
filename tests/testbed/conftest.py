"""The testbed tier: emulated hosts made by `kraftlab testbed` (network, mount, UTS and PID
namespaces, sshd each), and `ray up` on them.

It needs Linux, root and the tools `.ci/run` installs (openssh-server, rsync, nftables). Where
those are missing it is skipped with the reason, except under CI (CI=true), where it fails: CI runs
as root and must run it. Every testbed a test makes is removed at the test's end, even when it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftlab.testbed import lifecycle
from kraftlab.testbed.plan import TestbedPlan

BIN = Path(sys.executable).parent


def kraftlab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "kraftlab"), *args], text=True, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def on_host(name: str, host: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`kraftlab testbed exec NAME HOST -- sh -c COMMAND`, without the command's start-up (the CLI's
    own path is tested in test_hosts.py)."""
    return subprocess.run(lifecycle.host_command(name, host, ["sh", "-c", command]), text=True, capture_output=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session", autouse=True)
def testbed_machine():
    problem = lifecycle.machine_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the testbed tier must run in CI: {problem}")
        pytest.skip(problem)


def _testbeds():
    """Bring up testbeds by name and host count; every one is removed at the end."""
    made: list[str] = []

    def make(name: str, hosts: int) -> tuple[TestbedPlan, dict]:
        kraftlab("testbed", "down", "--name", name)  # one an interrupted earlier run left
        made.append(name)
        done = kraftlab("testbed", "up", "--name", name, "--hosts", str(hosts))
        assert done.returncode == 0, done.stdout + done.stderr
        return lifecycle.load_plan(name), json.loads((lifecycle.state_root() / name / "testbed.json").read_text())

    yield make
    for name in made:
        kraftlab("testbed", "down", "--name", name)


make_testbed = pytest.fixture(_testbeds)
make_testbed_for_module = pytest.fixture(scope="module")(_testbeds)
