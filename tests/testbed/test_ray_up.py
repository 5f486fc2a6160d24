"""The `ray up` walk-through of docs/testbed.md on a testbed, for real, and kernel faults on it.

One testbed of three hosts for the module (the head and two workers, so that the three brokers run
on three hosts that share no /tmp, /dev/shm, home or process table, and the driver, on the head,
shares none with two of them), brought up with `ray up` of its cluster file; the tests run in
order, the last one `ray down`s it, and the fixture removes the testbed.

In order: a scenario through `ray exec`, `ray rsync-down` and `kraftlab analyze` (RayDP across
hosts); the kernel-partition probe; a Kafka client on an isolated leader's host; library scenarios and a campaign with `--faults kernel`; the
Ray tier's own modules run on the testbed; `ray down`.

`KRAFTLAB_TESTBED_LIBRARY=all` runs every library scenario with network faults on it with
`--faults kernel` (13 minutes here); by default CI runs three of them. `KRAFTLAB_TESTBED_RAY_TIER=all`
runs every Ray tier module that joins a cluster; by default CI runs two (docs/testbed.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from .conftest import on_host
from .on_cluster import HUNT_SEEDS

pytestmark = pytest.mark.testbed

NAME = "ci-rayup"
HOSTS = 3
SCENARIO = "last-replica-standing-elr"
ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")
NODES_PY = ("import json, ray; ray.init(address='auto', logging_level='ERROR'); "
            "print('NODES', json.dumps(sorted([n['NodeID'], n['NodeManagerAddress']] for n in ray.nodes() if n['Alive'])))")
# One scenario per kind of network fault (isolate, partition, a one-way link cut, heal), with the
# verdict each expects in the simulator: the ELR keeps the last replica standing; Pre-Vote keeps a
# partitioned voter from disrupting the quorum; unclean recovery after isolations.
KERNEL_SCENARIOS = ["last-replica-standing-elr", "prevote", "unclean-recovery-balanced"]
# The Ray tier's modules that join whatever cluster RAY_ADDRESS names; run on the head, their
# drivers are on h1 and their nodes on three hosts. The others start a Ray of their own (embedded,
# `ray.cluster_utils`, `ray start` on the machine) and test exactly that. `KRAFTLAB_TESTBED_RAY_TIER=all`
# runs them all (docs/testbed.md); CI runs the ones that look at a node's files and processes on
# its host.
RAY_TIER = ["tests/ray/test_library_on_ray.py", "tests/ray/test_campaign_on_ray.py", "tests/ray/test_close.py",
            "tests/ray/test_crash_kinds.py", "tests/ray/test_demo_on_ray.py", "tests/ray/test_interrupted_on_ray.py",
            "tests/ray/test_metrics_clock.py", "tests/ray/test_metrics_live.py", "tests/spark/test_engines.py"]
RAY_TIER_IN_CI = ["tests/ray/test_close.py", "tests/ray/test_crash_kinds.py"]


def log(message: str) -> None:
    print(f"[testbed ray up {time.strftime('%H:%M:%S')}] {message}", flush=True)


def ray(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([RAY, *args], text=True, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text: str) -> str:
    """`ray exec` runs the command on a terminal: what it prints comes with colours."""
    return ANSI.sub("", text)


def tail(done: subprocess.CompletedProcess, lines: int = 30) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-lines:])


def alive_nodes(cluster_file: str) -> list[list[str]]:
    done = ray("exec", cluster_file, f'python -c "{NODES_PY}"', timeout=120)
    match = re.search(r"^NODES (.*)$", done.stdout, re.MULTILINE)
    return json.loads(match.group(1)) if done.returncode == 0 and match else []


def on_head(cluster_file: str, script: str, *args: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess, list]:
    """Run tests/testbed/on_cluster.py on the head; its JSON lines."""
    done = ray("exec", cluster_file, f"python {ROOT / 'tests/testbed/on_cluster.py'} {script} {' '.join(args)}", timeout=timeout)
    return done, [json.loads(m) for m in re.findall(r"^(?:PROBE|SCENARIO|CAMPAIGN|KAFKA) (.*)$", done.stdout, re.MULTILINE)]


@pytest.fixture(scope="module")
def cluster(make_testbed_for_module):
    tb, described = make_testbed_for_module(NAME, HOSTS)
    cluster_file = described["cluster_file"]
    started = time.monotonic()
    up = ray("up", "-y", "--no-config-cache", cluster_file)
    log(f"ray up: exit {up.returncode} after {time.monotonic() - started:.1f} s")
    assert up.returncode == 0, tail(up)
    # The head's autoscaler starts Ray on the workers over SSH after `ray up` returns.
    nodes = alive_nodes(cluster_file)
    while len(nodes) < HOSTS and time.monotonic() - started < 240:
        time.sleep(3)
        nodes = alive_nodes(cluster_file)
    log(f"{len(nodes)} Ray nodes after {time.monotonic() - started:.1f} s: {nodes}")
    assert sorted(address for _, address in nodes) == sorted(h["address"] for h in described["hosts"]), nodes
    yield cluster_file, nodes
    ray("down", "-y", cluster_file, timeout=300)  # again, in case a test failed before the last one


def test_a_scenario_through_ray_exec_and_rsync_down(cluster, tmp_path):
    cluster_file, nodes = cluster
    run = ray("exec", cluster_file, f"kraftlab run {SCENARIO} --runtime ray --address auto --out runs/ci")
    assert run.returncode == 0, tail(run)
    back = tmp_path / "back"
    synced = ray("rsync-down", cluster_file, "runs/ci/", f"{back}/", timeout=120)
    assert synced.returncode == 0, tail(synced)
    summary = json.loads((back / "summary.json").read_text())
    assert summary["ok"] is True and summary["runtime"] == "ray" and not summary["failures"], summary
    assert (back / "events").is_dir() and (back / "metrics.om").is_file()
    # Three hosts, three brokers: one broker on each Ray node, i.e. on each host.
    brokers = {name: node for name, node in summary["stats"]["placement"].items() if re.fullmatch(r"b\d", name)}
    assert sorted(brokers.values()) == sorted(node_id for node_id, _ in nodes), (brokers, nodes)
    # The run directory is on the head only (the driver ran there), not on the other hosts.
    assert on_host(NAME, "h1", "test -f runs/ci/summary.json").returncode == 0
    assert on_host(NAME, "h2", "test -e runs/ci").returncode != 0
    # Spark reads the history where it is: RayDP's executor is placed on the head, where the run's
    # files are (placed on h2 or h3, it found none).
    analyzed = ray("exec", cluster_file, "kraftlab analyze runs/ci --address auto")
    assert analyzed.returncode == 0, tail(analyzed)
    assert "history: valid" in plain(analyzed.stdout) and "engine=raydp" in plain(analyzed.stdout)


def test_a_kernel_partition_cuts_the_data_plane_and_leaves_ray_up(cluster):
    cluster_file, _ = cluster
    done, [probe] = on_head(cluster_file, "probe", "runs/probe")
    assert done.returncode == 0, tail(done)
    log(f"probe: {json.dumps(probe)[:600]}")
    # Every node listens on an address of its own, from its host's pool (not the host's address).
    hosts = {f"198.18.{o}" for o in ("0.11", "0.12", "0.13")}
    assert all(address not in hosts for address, _ in probe["addresses"].values())
    assert len({address for address, _ in probe["addresses"].values()}) == len(probe["addresses"])
    # While isolated: the run's table is in every host's packet filter; past what was in flight,
    # b3's own sends break (its connections time out) and meanwhile no frame reaches b3; the
    # driver's Ray calls to b3 answered throughout (the counters were read through them).
    assert probe["tables_during"] == [True] * HOSTS
    broke = probe["isolated_until_a_send_broke"]
    assert broke["dropped"] > probe["isolated"]["dropped"], f"no send of b3's broke within {probe['bound_ms']} ms"
    assert broke["frames_received"] == probe["isolated"]["frames_received"]
    # Healed: frames reach b3 again. Closed: the table is gone from every host.
    assert probe["healed"]["frames_received"] > broke["frames_received"]
    # Cut from b1 alone, b3 still hears from the others (the controller, b2).
    assert probe["partitioned_from_b1"]["frames_received"] > probe["healed"]["frames_received"]
    assert probe["tables_after"] == [False] * HOSTS


def test_a_kafka_client_on_an_isolated_leaders_host_times_out_and_goes_on_after_the_heal(cluster):
    """confluent-kafka in a process on the host of `solo-0`'s leader (a Ray task on its Ray node:
    the host's namespaces), with `--faults kernel` and the leader isolated (on_cluster.py
    `kafka_client`). The partition has one replica, so nothing else can lead it meanwhile."""
    cluster_file, _ = cluster
    done, [answer] = on_head(cluster_file, "kafka-client", "runs/kafka-client")
    log(f"kafka client on the leader's host: {json.dumps(answer)[:1500]}")
    assert done.returncode == 0 and "error" not in answer, tail(done) + json.dumps(answer)[:3000]
    node = answer["leader_node"]
    # Each client ran on the leader's Ray node, i.e. in its host's namespaces.
    assert {answer[k]["ray_node"] for k in ("before", "during", "during_metadata_from_others", "after", "read")} == {node}
    # The broker listens on a node address of its own, not the host's (the kernel's rules name it).
    assert answer["listeners"][str(answer["leader"])][0] != answer["hosts"][node]
    before, during, after = answer["before"], answer["during"], answer["after"]
    assert before["left"] == 0 and [err for err, _, _ in before["outcomes"]] == [None] * 10, before
    # Isolated: the host's own packet filter drops the client's packets to the leader's address,
    # and no other broker can lead the partition: every produce times out.
    assert during["left"] == 0 and len(during["outcomes"]) == 5, during
    assert all(err in ("_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT") for err, _, _ in during["outcomes"]), during
    # The kernel cuts the node, not its host: the same client still gets Metadata from the others.
    assert answer["during_metadata_from_others"].get("topics") == ["solo"], answer["during_metadata_from_others"]
    # Healed, the broker leads again; the client produces and reads back what it was told.
    assert answer["leads_again"] is True
    assert after["left"] == 0 and [err for err, _, _ in after["outcomes"]] == [None] * 10, after
    told = {offset: value for outcome in (before, after) for _, offset, value in outcome["outcomes"]}
    assert sorted(told.values()) == sorted([f"before-{i}" for i in range(10)] + [f"after-{i}" for i in range(10)])
    read = dict(answer["read"]["read"])
    assert {offset: read.get(offset) for offset in told} == told
    assert answer["violations"] == []


def test_library_scenarios_with_kernel_faults_end_as_in_the_simulator(cluster):
    cluster_file, _ = cluster
    names = [] if os.environ.get("KRAFTLAB_TESTBED_LIBRARY") == "all" else KERNEL_SCENARIOS
    done, answers = on_head(cluster_file, "library", "runs/library", *names, timeout=3600)
    assert done.returncode == 0, tail(done)
    for answer in answers:
        log(f"--faults kernel: {json.dumps(answer)}")
    assert answers and all(a["ok"] for a in answers), [a for a in answers if not a["ok"]]
    assert not names or sorted(a["scenario"] for a in answers) == sorted(names)


def test_a_campaign_with_kernel_faults(cluster):
    """`kraftlab campaign --faults kernel` on the cluster: its run's faults are the hosts' packet
    filters and SIGKILLs (the history says so), and its row's replay keeps the backend."""
    cluster_file, _ = cluster
    done, [answer] = on_head(cluster_file, "campaign", "runs/kernel-campaign")
    assert done.returncode == 0, tail(done)
    log(f"campaign --faults kernel: {answer}")
    assert answer["exit"] == 0, answer["output"]
    [[status, replay]] = answer["rows"]
    assert status == "ok" and replay.endswith("--runtime ray --faults kernel"), answer
    assert answer["backends"] == ["kernel"], answer


def test_hunt_on_the_cluster_gives_each_run_the_verdict_it_gets_on_one_machine(cluster, tmp_path):
    """The `hunt` campaign's simulator runs as Ray tasks over the hosts: a run depends on its seed
    alone, so each has the verdict and the trace it has in this process."""
    cluster_file, _ = cluster
    done, [answer] = on_head(cluster_file, "hunt", "runs/hunt")
    assert done.returncode == 0 and answer["exit"] in (0, 1), tail(done) + answer["output"]
    here = subprocess.run([sys.executable, "-m", "kraftlab.cli", "campaign", "hunt", *HUNT_SEEDS, "--out", str(tmp_path / "here"),
                           "--parallel", "0", "--minimize-budget", "0"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert here.returncode in (0, 1), here.stdout[-2000:] + here.stderr[-2000:]
    rows = pq.read_table(tmp_path / "here" / "results.parquet").to_pylist()
    assert len(rows) == 3
    assert answer["verdicts"] == {r["run"]: [r["status"], r["signature"], r["stats.trace_hash"]] for r in rows}


def test_the_ray_tier_on_the_testbed(cluster):
    cluster_file, _ = cluster
    modules = RAY_TIER if os.environ.get("KRAFTLAB_TESTBED_RAY_TIER") == "all" else RAY_TIER_IN_CI
    library = os.environ.get("KRAFTLAB_LIBRARY_RAY", "")  # `all`: every library scenario, not one per family
    done = ray("exec", cluster_file, f"cd {ROOT} && RAY_ADDRESS=auto KRAFTLAB_LIBRARY_RAY={library} python -m pytest -q -p no:cacheprovider --color=no "
               f"--basetemp=/tmp/ray-tier {' '.join(modules)}", timeout=5400)
    log(f"the Ray tier on the testbed: {tail(done, 12)}")
    assert done.returncode == 0, tail(done, 60)
    summary = plain(done.stdout)
    assert re.search(r"\b\d+ passed\b", summary) and not re.search(r"\b\d+ (failed|error)", summary)


def test_ray_down_stops_the_head_only(cluster):
    cluster_file, _ = cluster
    down = ray("down", "-y", cluster_file, timeout=300)
    assert down.returncode == 0, tail(down)
    assert on_host(NAME, "h1", "pgrep -x raylet").returncode != 0
    # Ray's `local` provider has no way to stop Ray on its workers (docs/testbed.md).
    assert on_host(NAME, "h2", "pgrep -x raylet").returncode == 0
