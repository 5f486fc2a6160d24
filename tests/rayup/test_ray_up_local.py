"""`ray up infra/ray/local.yaml` for real (issue 16 item 4), opt-in: KRAFTLAB_RAY_UP=1.

Two "machines" on this one: sshd on 127.0.0.2 (the head) and on 127.0.0.3 (the worker), the
worker's sshd in a PID namespace of its own (`unshare --pid --mount-proc`), so the `ray stop`
that local.yaml runs before `ray start` on a worker sees only that worker's processes, as on a
machine of its own; without it, it kills the head's Ray (same user, same machine). 127.0.0.1 is
not used: Ray replaces a node address of 127.0.0.1 by the machine's outward one. Both "hosts"
log in as a dedicated user, kraftlab-rayup, with an ed25519 key; its Ray keeps its files under
RAY_TMPDIR=/tmp/kraftlab-rayup (set in its ~/.bashrc, which Ray's SSH commands read) and `ray up`
here under /tmp/kraftlab-rayup-driver: `ray stop` ends every Ray process of its user on the
machine, so nothing here ever runs it as root, whose Ray sessions other tests may be using.

The cluster file is infra/ray/local.yaml as committed, loaded and given this machine's values
(addresses, user, key, one worker); `ray up` builds the cluster from the wheel in dist/ (built
here), `ray exec` runs a library scenario on it with `kraftlab run --address auto`, `ray
rsync-down` brings the run directory back, and `ray down` stops it. As root, the fixture sets up
what is missing (apt's openssh-server and rsync, the user, the key, both sshd); otherwise it
says what is missing. Both sshd are left running (`kill $(cat /run/sshd-kraftlab-rayup-*.pid)`
ends them).

  KRAFTLAB_RAY_UP=1 .venv/bin/python -m pytest -s -v -m rayup tests/rayup
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [
    pytest.mark.rayup,
    pytest.mark.skipif(os.environ.get("KRAFTLAB_RAY_UP") != "1",
                       reason="opt-in: KRAFTLAB_RAY_UP=1 (it adds a user and starts sshd on loopback addresses)"),
]

ROOT = Path(__file__).resolve().parents[2]
USER = "kraftlab-rayup"
HEAD, WORKER = "127.0.0.2", "127.0.0.3"
STATE = Path("/var/tmp/kraftlab-rayup")  # root's side: the key, the filled cluster file, ray up's temp dir
KEY = STATE / "id_ed25519"
USER_RAY_TMPDIR = "/tmp/kraftlab-rayup"
SCENARIO = "last-replica-standing-elr"
RUN = "runs/rayup-test"  # on the head, relative to the user's home (where `ray exec` starts)
BIN = Path(sys.executable).parent
SSH = ["ssh", "-i", str(KEY), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
       "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5"]


def log(message: str) -> None:
    print(f"[rayup {time.strftime('%H:%M:%S')}] {message}", flush=True)


def sh(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, text=True, capture_output=True, **kw)


# --- the two loopback hosts -----------------------------------------------------------------


def installed(pkg: str) -> bool:
    out = sh("dpkg-query", "-W", "-f=${Status}", pkg, check=False).stdout
    return "ok installed" in out


def listening(address: str) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((address, 22)) == 0


def logs_in(address: str) -> bool:
    return sh(*SSH, f"{USER}@{address}", "true", check=False).returncode == 0


def start_sshd(address: str, own_pid_namespace: bool) -> None:
    """sshd on `address` only, its pid as this PID namespace sees it (the worker's sshd is the
    child of unshare, which a SIGTERM does not end) in /run/sshd-kraftlab-rayup-<address>.pid."""
    cmd = ["/usr/sbin/sshd", "-D", "-o", f"ListenAddress={address}", "-o", "PidFile=none"]
    if own_pid_namespace:
        cmd = ["unshare", "--pid", "--mount-proc", "--kill-child", *cmd]
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(50):
        if listening(address):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"sshd did not start listening on {address}:22: {' '.join(cmd)}")
    pid = proc.pid
    if own_pid_namespace:
        pid = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
    Path(f"/run/sshd-kraftlab-rayup-{address}.pid").write_text(f"{pid}\n")


def user_home() -> Path:
    return Path(pwd.getpwnam(USER).pw_dir)


def ensure_hosts() -> None:
    """Set up (as root) or check (otherwise) everything `ray up` needs on the two hosts."""
    if os.geteuid() != 0:
        missing = [what for what, ok in [
            ("packages openssh-server and rsync", installed("openssh-server") and installed("rsync")),
            (f"user {USER} logging in with {KEY} on {HEAD} and {WORKER}",
             KEY.exists() and logs_in(HEAD) and logs_in(WORKER)),
        ] if not ok]
        if missing:
            pytest.fail("not root, and missing: " + "; ".join(missing) + " (run the test once as root to set them up)")
        return
    if not (installed("openssh-server") and installed("rsync")):
        log("apt-get install openssh-server rsync")
        sh("apt-get", "update", "-qq")
        sh("apt-get", "install", "-y", "-qq", "openssh-server", "rsync", env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    STATE.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not KEY.exists():
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", USER, "-f", str(KEY))
    try:
        pwd.getpwnam(USER)
    except KeyError:
        log(f"useradd {USER}")
        sh("useradd", "--create-home", "--shell", "/bin/bash", USER)
    home = user_home()
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(Path(f"{KEY}.pub").read_text())
    (ssh_dir / "authorized_keys").chmod(0o600)
    # Ray's SSH commands run `bash --login -c -i 'source ~/.bashrc; ...'`: its first line gives every
    # Ray process of this user its own temp dir (node.sh adds the venv's PATH at the end).
    bashrc = home / ".bashrc"
    text = bashrc.read_text() if bashrc.exists() else ""
    line = f"export RAY_TMPDIR={USER_RAY_TMPDIR}  # kraftlab's ray up test: this user's Ray apart from root's\n"
    if line not in text:
        bashrc.write_text(line + text)
    shutil.chown(ssh_dir, USER, USER)
    for path in (ssh_dir / "authorized_keys", bashrc):
        shutil.chown(path, USER, USER)
    # 127.0.0.2 and .3 are on lo by default (the whole 127/8 is); sshd's default ListenAddress
    # (0.0.0.0) would serve them too, but each host's sshd listens on its own address only.
    for address, own_ns in ((HEAD, False), (WORKER, True)):
        if not listening(address):
            log(f"starting sshd on {address}" + (" in a PID namespace of its own" if own_ns else ""))
            start_sshd(address, own_ns)
    for address in (HEAD, WORKER):
        assert logs_in(address), f"{USER}@{address} does not log in with {KEY}"
    # The worker's sshd must be in its own PID namespace (a sshd listening there already, but
    # started otherwise, would let the worker's `ray stop` end the head's Ray).
    ps = sh(*SSH, f"{USER}@{WORKER}", "ps -e -o pid= | wc -l").stdout
    assert int(ps) < 50, f"the sshd on {WORKER} is not in a PID namespace of its own (its sessions see {ps.strip()} processes)"


# --- the cluster file and the ray CLI ---------------------------------------------------------


def cluster_file() -> Path:
    """infra/ray/local.yaml as committed, with this machine's values in its EDIT fields."""
    config = yaml.safe_load((ROOT / "infra/ray/local.yaml").read_text())
    config["cluster_name"] = "kraftlab-rayup"  # its state file, apart from any other `kraftlab` cluster
    config["provider"]["head_ip"] = HEAD
    config["provider"]["worker_ips"] = [WORKER]
    config["auth"]["ssh_user"] = USER
    config["auth"]["ssh_private_key"] = str(KEY)
    config["min_workers"] = config["max_workers"] = 1
    path = STATE / "local.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


AUTOSCALER = {"v1": "0", "v2": "1"}  # RAY_UP_enable_autoscaler_v2; v2 is Ray 2.60's default


def ray(*args: str, autoscaler: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess, float]:
    # ray up's own state (the local provider's cluster state file) under a temp dir of its own,
    # not root's /tmp/ray.
    Path("/tmp/kraftlab-rayup-driver").mkdir(exist_ok=True)
    env = {**os.environ, "RAY_UP_enable_autoscaler_v2": AUTOSCALER[autoscaler], "RAY_TMPDIR": "/tmp/kraftlab-rayup-driver"}
    start = time.monotonic()
    done = subprocess.run([str(BIN / "ray"), *args], cwd=ROOT, env=env, text=True, capture_output=True, timeout=timeout)
    return done, time.monotonic() - start


def tail(done: subprocess.CompletedProcess, lines: int = 40) -> str:
    return "\n".join((done.stdout + done.stderr).splitlines()[-lines:])


def user_processes() -> list[str]:
    """The user's processes but its SSH sessions, and zombies (ended; a container's init may
    never reap them)."""
    out = sh("ps", "-u", USER, "-o", "stat=,pid=,comm=,args=", check=False).stdout
    return [line.split(None, 1)[1] for line in out.splitlines()
            if line.strip() and "sshd" not in line and not line.startswith("Z")]


NODES_PY = ("import json, ray; ray.init(address='auto', logging_level='ERROR'); "
            "print('NODES', json.dumps(sorted([n['NodeID'], n['NodeManagerAddress']] for n in ray.nodes() if n['Alive'])))")


def alive_nodes(config: Path, autoscaler: str) -> list[list[str]]:
    done, _ = ray("exec", str(config), on_python(NODES_PY), autoscaler=autoscaler, timeout=120)
    match = re.search(r"^NODES (.*)$", done.stdout, re.MULTILINE)
    return json.loads(match.group(1)) if done.returncode == 0 and match else []


PROMETHEUS_PY = """
import json, urllib.parse, urllib.request
base = "http://127.0.0.1:9090"
ready = urllib.request.urlopen(base + "/-/ready").status
tsdb = json.load(urllib.request.urlopen(base + "/api/v1/status/flags"))["data"]["storage.tsdb.path"]
query = 'max(max_over_time(kraftlab_records_total{job="kraftlab", outcome="ok"}[WINDOWs]))'
result = json.load(urllib.request.urlopen(base + "/api/v1/query?query=" + urllib.parse.quote(query)))["data"]["result"]
print("PROMETHEUS", json.dumps([ready, tsdb, [r["value"][1] for r in result]]))
"""


def on_python(source: str) -> str:
    """A shell command running `source` with the head's python (no quoting to get through)."""
    return f"python -c \"import base64; exec(base64.b64decode('{base64.b64encode(source.encode()).decode()}'))\""


@pytest.fixture(scope="module")
def wheel() -> Path:
    shutil.rmtree(ROOT / "dist", ignore_errors=True)
    sh(str(BIN / "python"), "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(ROOT / "dist"), str(ROOT))
    [built] = (ROOT / "dist").glob("*.whl")
    return built


@pytest.mark.parametrize("autoscaler", ["v1", "v2"])
def test_ray_up_local_over_ssh(wheel, tmp_path, autoscaler):
    """Issue 16 brought up two nodes with the autoscaler v1 only (RAY_UP_enable_autoscaler_v2=0);
    both are run here."""
    ensure_hosts()
    config = cluster_file()

    def on_head(command: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess, float]:
        return ray("exec", str(config), command, autoscaler=autoscaler, timeout=timeout)

    leftover = user_processes()
    assert not leftover, f"{USER} already runs processes (an earlier cluster? `ray down -y {config}`): {leftover}"
    timings: dict[str, float] = {}
    try:
        up, timings["ray up"] = ray("up", "-y", "--no-config-cache", str(config), autoscaler=autoscaler)
        log(f"autoscaler {autoscaler}: ray up: exit {up.returncode} in {timings['ray up']:.1f} s")
        assert up.returncode == 0, tail(up)

        # The head's autoscaler starts the worker after `ray up` returns: both nodes, each under
        # the address the cluster file gives it (what the autoscaler knows it by).
        start = time.monotonic()
        nodes = alive_nodes(config, autoscaler)
        while len(nodes) < 2 and time.monotonic() - start < 180:
            time.sleep(5)
            nodes = alive_nodes(config, autoscaler)
        timings["worker joined"] = time.monotonic() - start
        log(f"alive Ray nodes {time.monotonic() - start:.1f} s after ray up: {nodes}")
        assert sorted(address for _, address in nodes) == [HEAD, WORKER], nodes

        run_began = time.monotonic()
        run, timings["ray exec kraftlab run"] = on_head(
            f"rm -rf {RUN} && kraftlab run {SCENARIO} --runtime ray --address auto --metrics-port 9400 --out {RUN}")
        log(f"ray exec kraftlab run {SCENARIO}: exit {run.returncode} in {timings['ray exec kraftlab run']:.1f} s")
        print(tail(run, 15), flush=True)
        assert run.returncode == 0, tail(run)

        # The README's flow: the run directory back on this machine, paths relative to the head's home.
        back = tmp_path / "cluster-runs"
        down_sync, timings["ray rsync-down"] = ray("rsync-down", str(config), f"{RUN}/", f"{back}/", autoscaler=autoscaler)
        assert down_sync.returncode == 0, tail(down_sync)
        summary = json.loads((back / "summary.json").read_text())
        log(f"summary.json (rsync-down): ok={summary['ok']} runtime={summary['runtime']} "
            f"placement={summary['stats'].get('placement')}")
        assert summary["scenario"] == SCENARIO and summary["runtime"] == "ray"
        assert summary["ok"] is True and not summary["failures"], summary
        assert (back / "events").is_dir() and (back / "metrics.om").is_file()
        # Where each process ran at the end ("?": none running then): brokers on both Ray nodes.
        placement = {name: node for name, node in summary["stats"]["placement"].items() if node != "?"}
        node_ids = {node_id for node_id, _ in nodes}
        assert set(placement.values()) <= node_ids, (placement, nodes)
        brokers = {name: node for name, node in placement.items() if re.fullmatch(r"b\d+", name)}
        assert set(brokers.values()) == node_ids, f"brokers not on both nodes: {placement}"

        # The head's Prometheus (node.sh start-monitoring): ready, this user's (no other one on
        # :9090), and it scraped the run's live series (`--metrics-port 9400`) while it ran.
        # (Only since the run began: the TSDB in the user's home keeps earlier runs' samples.)
        window = int(time.monotonic() - run_began) + 1
        prom, _ = on_head(on_python(PROMETHEUS_PY.replace("WINDOW", str(window))), timeout=60)
        answer = re.search(r"^PROMETHEUS (.*)$", prom.stdout, re.MULTILINE)
        assert prom.returncode == 0 and answer, tail(prom)
        ready, tsdb, acked = json.loads(answer.group(1))
        log(f"prometheus on the head: ready {ready}, tsdb {tsdb}, most kraftlab_records_total{{outcome=ok}} scraped {acked}")
        assert ready == 200 and tsdb == str(user_home() / "prometheus-data")
        assert acked == [str(summary["stats"]["acked"])], (acked, summary["stats"])

        # The same two Ray nodes a minute or more later: the autoscaler did not restart Ray on the
        # worker (it does when no heartbeat comes under the worker's listed address).
        assert alive_nodes(config, autoscaler) == nodes
    finally:
        down, timings["ray down"] = ray("down", "-y", str(config), autoscaler=autoscaler)
        log(f"ray down: exit {down.returncode} in {timings['ray down']:.1f} s")
        log(f"timings (autoscaler {autoscaler}): " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items()))
    assert down.returncode == 0, tail(down)
    # `ray down` runs `ray stop` on the head only: here it sees the worker's processes too (the
    # head's PID namespace holds the worker's). Prometheus is no Ray process: it stays up on the
    # head until the next `ray up` replaces it; the test stops it.
    deadline = time.monotonic() + 30
    while (left := user_processes()) and time.monotonic() < deadline:
        if all(" prometheus " in f" {p} " for p in left):
            break
        time.sleep(1)
    prometheus = [p for p in left if " prometheus " in f" {p} "]
    assert len(prometheus) == 1 and len(left) == 1, f"{USER}'s processes after ray down: {left}"
    pid = (user_home() / "prometheus.pid").read_text().strip()
    assert prometheus[0].split()[0] == pid
    os.kill(int(pid), 15)
    deadline = time.monotonic() + 30
    while user_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not user_processes(), user_processes()
