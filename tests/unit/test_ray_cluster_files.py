"""The `ray up` cluster files (infra/ray/*.yaml), checked offline: Ray's own checks, what they
name exists in the repository, and what they install is what pyproject.toml pins. Nothing here
reaches a cloud or a machine (tests/ray has the clusters that run)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from ray._private.ray_constants import PROMETHEUS_SERVICE_DISCOVERY_FILE
from ray.autoscaler._private.util import prepare_config, validate_config

from workloads.scenario.cluster_spec import ClusterSpec

ROOT = Path(__file__).resolve().parents[2]
RAY_DIR = ROOT / "infra/ray"
NODE_SH = RAY_DIR / "node.sh"
FILES = sorted(RAY_DIR.glob("*.yaml"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# Where the cluster files put things on a node (file_mounts' remote side; node.sh's $INFRA).
REMOTE_INFRA = "~/kraftlab/infra"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def commands(config: dict) -> list[str]:
    return [cmd for key in ("setup_commands", "head_setup_commands", "worker_setup_commands",
                            "head_start_ray_commands", "worker_start_ray_commands")
            for cmd in config.get(key, [])]


def wheel_name() -> str:
    """The file `pip wheel --no-deps -w dist .` writes for this pyproject.toml."""
    return f"{PYPROJECT['name'].replace('-', '_')}-{PYPROJECT['version']}-py3-none-any.whl"


def test_the_three_providers_are_there():
    assert {p.stem for p in FILES} >= {"aws", "gcp", "local"}
    assert {load(p)["provider"]["type"] for p in FILES} >= {"aws", "gcp", "local"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_passes_rays_own_checks_offline(path):
    # prepare_config fills in the provider's defaults.yaml (the `local` provider's node type and
    # worker counts from head_ip/worker_ips), as `ray up` does before it reaches any cloud; the
    # JSON schema alone would reject a `local` file for missing fields that preparing adds.
    validate_config(prepare_config(load(path)))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_enough_nodes_kept_for_one_host_each(path):
    """Placement spreads hosts over the nodes alive at a run's start: the default cluster's hosts
    (brokers and voters) get a node each, and no node is added or removed by the autoscaler."""
    config = prepare_config(load(path))
    hosts = ClusterSpec().brokers + ClusterSpec().controllers
    types = config["available_node_types"]
    # The `local` provider has one node type for every machine, head included (worker counts on it).
    workers = [t for name, t in types.items() if name != config["head_node_type"]] or list(types.values())
    assert all(t["min_workers"] == t["max_workers"] for t in workers)
    assert 1 + sum(t["min_workers"] for t in workers) >= hosts
    if config["provider"]["type"] == "local":
        assert 1 + len(config["provider"]["worker_ips"]) >= hosts


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_names_what_exists(path):
    config = load(path)
    mounts = config["file_mounts"]
    # The wheel under the name pip gives it from pyproject.toml (it is built, not committed), and
    # infra/ as it is in the repository.
    assert mounts[f"~/kraftlab/{wheel_name()}"] == f"dist/{wheel_name()}"
    assert mounts[REMOTE_INFRA] == "infra"
    cmds = commands(config)
    assert f"bash {REMOTE_INFRA}/ray/node.sh install ~/kraftlab/{wheel_name()}" in cmds
    head_starts = config["head_start_ray_commands"]
    assert any("ray start --head" in c for c in head_starts)
    assert head_starts[-1] == f"bash {REMOTE_INFRA}/ray/node.sh start-monitoring"  # after Ray: its SD file
    assert any(c.startswith(f"bash {REMOTE_INFRA}/ray/node.sh monitoring") for c in config["head_setup_commands"])


def test_the_fake_multinode_file_is_complete():
    """infra/ray/fake/multinode.yaml (tests/ray/test_fake_multinode.py starts it) passes Ray's
    schema as it is: the head's autoscaler reads it without filling in defaults (Ray 2.60's wheel
    lacks the fake provider's defaults file), and keeps 3 nodes, its GCS address on a port of its own."""
    config = load(RAY_DIR / "fake" / "multinode.yaml")
    validate_config(config)
    assert config["provider"]["type"] == "fake_multinode"
    assert config["provider"]["gcs_address"].rsplit(":", 1)[1] != "6379"
    workers = [t for name, t in config["available_node_types"].items() if name != config["head_node_type"]]
    assert all(t["min_workers"] == t["max_workers"] for t in workers) and 1 + sum(t["min_workers"] for t in workers) == 3


def test_node_script_names_what_exists():
    text = NODE_SH.read_text()
    assert f'INFRA="{REMOTE_INFRA.replace("~", "$HOME")}"' in text
    for used in re.findall(r'"\$INFRA"?/([\w./*-]+)', text):
        matches = list(ROOT.glob(f"infra/{used.rstrip('/.')}"))
        assert matches, f"node.sh uses infra/{used}, which the repository does not have"
    assert "$INFRA/prometheus/prometheus.yml" in text
    assert "$INFRA/grafana/provisioning/." in text
    subprocess.run(["bash", "-n", str(NODE_SH)], check=True)


def test_prometheus_reads_the_file_ray_writes_on_the_head():
    """`ray start` on the head keeps its service-discovery file in its temp dir, /tmp/ray unless
    told otherwise (the cluster files do not), and node.sh starts Prometheus with this config."""
    config = yaml.safe_load((ROOT / "infra/prometheus/prometheus.yml").read_text())
    ray_job = next(job for job in config["scrape_configs"] if job["job_name"] == "ray")
    assert ray_job["file_sd_configs"][0]["files"] == [f"/tmp/ray/{PROMETHEUS_SERVICE_DISCOVERY_FILE}"]
    for path in FILES:
        assert not any("--temp-dir" in c for c in commands(load(path)))


def pins() -> dict[str, str]:
    out = {}
    for requirement in PYPROJECT["dependencies"]:
        name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", requirement).groups()
        out[name.lower().replace("_", "-")] = version
    return out


def test_installs_pyprojects_pins():
    """Nodes install the wheel with its dependencies, which its metadata pins as pyproject.toml
    does; any version the cluster files or node.sh name themselves must be pyproject.toml's."""
    text = NODE_SH.read_text()
    assert re.search(r'pip" install --quiet "\$wheel"$', text, re.MULTILINE), "the wheel's first install must resolve its pinned dependencies"
    pinned = pins()
    assert "ray" in pinned and "raydp" in pinned and "pyspark" in pinned  # every dependency is pinned exactly
    for path in [*FILES, NODE_SH]:
        for name, version in re.findall(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([\w.!+-]+)", path.read_text()):
            key = name.lower().replace("_", "-")
            if key in pinned:
                assert version == pinned[key], f"{path.name}: {name}=={version}, pyproject.toml pins {pinned[key]}"
    # The Python the node checks for is the one pyproject.toml requires.
    minimum = re.fullmatch(r">=(\d+)\.(\d+)", PYPROJECT["requires-python"]).groups()
    assert f"sys.version_info < ({minimum[0]}, {minimum[1]})" in text


def test_local_nodes_register_under_their_listed_address():
    """The local provider's autoscaler knows a node by the address the file lists; each `ray start`
    registers under the address its SSH session came in on (sshd's SSH_CONNECTION, field 3), that
    one (tests/testbed runs the testbed's cluster file, built the same way, for real)."""
    config = load(RAY_DIR / "local.yaml")
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        [start] = [c for c in config[key] if "ray start" in c]
        flag = re.search(r"--node-ip-address=(\$\(.*?\))", start).group(1)
        listed = "192.0.2.11"
        shown = subprocess.run(["bash", "-c", f"echo {flag}"], capture_output=True, text=True, check=True,
                               env={"SSH_CONNECTION": f"198.51.100.7 50022 {listed} 22", "PATH": "/usr/bin:/bin"})
        assert shown.stdout.strip() == listed, (key, start, shown.stdout)
