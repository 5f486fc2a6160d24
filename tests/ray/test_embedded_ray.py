"""The embedded Ray is kraftlab's own (docs/reference/cli.md): with no `--address` and no
RAY_ADDRESS a command starts a local Ray even when a cluster started with `ray start` is recorded on
this machine.

`ray start` records its address in `<RAY_TMPDIR>/ray/ray_current_cluster`, and plain `ray.init()`
joins whatever that file names. Rather than start a second Ray next to the embedded one (and risk
stopping someone else's: `ray stop` stops every Ray of the user), the test records an address where
no cluster answers, in a Ray temp dir of its own, and runs `connect` in a subprocess: joining the
recorded cluster would hang there; starting an embedded Ray returns at once.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
CONNECT_AND_REPORT = """
import json, os, ray
from ray._private import ray_constants
from actors.runtime.ray import adapter
info = adapter.connect(None)
during = os.environ.get("RAY_AUTH_MODE")
gcs_address = ray.get_runtime_context().gcs_address
worker_address = ray.get(ray.remote(num_cpus=0)(ray.util.get_node_ip_address).remote())
driver_address = ray.util.get_node_ip_address()
adapter.shutdown()
after = sorted(name for name in adapter.AUTH_VARIABLES if name in os.environ)
cluster_mode_after = [ray_constants.ENABLE_RAY_CLUSTER, os.environ.get(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR)]
print(json.dumps({**info, "gcs_address": gcs_address, "auth_during": during, "auth_after": after,
                  "worker_address": worker_address, "driver_address": driver_address, "cluster_mode_after": cluster_mode_after}))
"""


def processes_mentioning(marker: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


@pytest.fixture
def ray_tmpdir():
    """A Ray temp dir of the test's own, short (Ray's socket paths under it must stay below 108
    bytes); afterwards, whatever Ray process still uses it is killed by pid, and it is removed."""
    path = tempfile.mkdtemp(prefix="krl-")
    yield Path(path)
    for pid in processes_mentioning(path):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def test_no_address_starts_an_embedded_ray_even_when_a_cluster_is_recorded(ray_tmpdir):
    """On loopback. And the embedded Ray's authentication token is the process's own, not ~/.ray/auth_token:
    Ray would write that file for good, and every later driver of the machine joining a cluster
    with `auto` would then turn token authentication on, which a cluster started without it
    (`ray up`) answers by dropping every actor the driver creates."""
    with socket.socket() as unanswered:  # bound, never listening: nothing answers there
        unanswered.bind(("127.0.0.1", 0))
        recorded = f"127.0.0.1:{unanswered.getsockname()[1]}"
        (ray_tmpdir / "ray").mkdir()
        (ray_tmpdir / "ray" / "ray_current_cluster").write_text(recorded)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            env.pop(name, None)
        env.update(RAY_TMPDIR=str(ray_tmpdir), PYTHONPATH=str(ROOT), HOME=str(ray_tmpdir))
        try:
            proc = subprocess.run([sys.executable, "-c", CONNECT_AND_REPORT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"connect(None) tried to join the recorded cluster at {recorded}")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["embedded"] is True
    assert info["gcs_address"].rsplit(":", 1)[1] != recorded.rsplit(":", 1)[1]
    assert list((ray_tmpdir / "ray").glob("session_*")), "the embedded Ray ran in the test's temp dir"
    assert info["auth_during"] == "token" and info["auth_after"] == []
    assert not (ray_tmpdir / ".ray" / "auth_token").exists()
    # Ray's single-machine mode: the embedded Ray's processes, and so the node actors' wire and
    # the Kafka listeners, are on loopback; after it, this process joins clusters as usual.
    assert (info["gcs_address"].rsplit(":", 1)[0], info["driver_address"], info["worker_address"]) == ("127.0.0.1",) * 3
    assert info["cluster_mode_after"] == [True, None]
