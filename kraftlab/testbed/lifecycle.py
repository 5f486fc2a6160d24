"""Make, check, enter and remove a testbed's hosts, with iproute2 and util-linux (`ip`, `unshare`,
`nsenter`) and OpenSSH's sshd.

Every refusal (`TestbedError`) is raised before anything on the machine changes. `up` records its
plan (`plan.json`) before it makes anything, and `down` removes whatever a plan names and whatever
carries the testbed's name (network namespaces `kraftlab-NAME-hN`), so `down` after a crashed or
interrupted `up` leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import cluster_file, plan
from .plan import HostPlan, TestbedPlan

# What one host may take: a Ray node (raylet, its agents, the GCS and dashboard on the head) and
# the kraftlab processes placed there. `up` refuses more hosts than the memory available allows.
HOST_MEMORY_BYTES = 1536 * 2**20
SHM_BYTES = 1024 * 2**20  # each host's /dev/shm (Ray's object store lives there)
SSHD_TIMEOUT_S = 20.0
TOOLS = {"ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux", "mount": "mount",
         "sshd": "openssh-server", "ssh": "openssh-client", "ssh-keygen": "openssh-client"}
PRIVATE_ROOTS = ("/tmp", "/dev/shm", plan.HOST_DATA_DIR)


class TestbedError(Exception):
    """Bad input or a machine that cannot hold the testbed: exit 2, nothing changed."""

    __test__ = False


def state_root() -> Path:
    return Path(os.environ.get("KRAFTLAB_TESTBEDS", Path.home() / ".kraftlab" / "testbeds"))


def root_home() -> str:
    return pwd.getpwuid(0).pw_dir


def _run(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(list(args), text=True, capture_output=True, input=input)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
    return done


# --- what the machine must offer ------------------------------------------------------------------


def machine_problem() -> str | None:
    """Why this machine cannot make hosts, or None."""
    if not sys.platform.startswith("linux"):
        return f"the testbed needs Linux (network, mount and PID namespaces); this is {sys.platform}"
    if os.geteuid() != 0:
        return "the testbed needs root (it makes network namespaces, a bridge and mounts): run it with sudo"
    missing = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None
                      and not Path("/usr/sbin", tool).exists()})
    if missing:
        return f"missing tools: install the Debian packages {', '.join(missing)} (apt-get install {' '.join(missing)})"
    return None


def memory_available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def hosts_problem(hosts: int) -> str | None:
    most = plan.max_hosts_for_subnet()
    if not 1 <= hosts <= most:
        return f"--hosts {hosts}: expected 1..{most}"
    room = memory_available_bytes() // HOST_MEMORY_BYTES
    if hosts > room:
        return (f"--hosts {hosts}: this machine has memory for {room} hosts "
                f"({memory_available_bytes() / 2**30:.1f} GiB available, {HOST_MEMORY_BYTES / 2**30:.1f} GiB a host)")
    return None


def _existing_netns() -> list[str]:
    done = _run("ip", "netns", "list", check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def _used_indexes() -> set[int]:
    used = set()
    for plan_file in state_root().glob("*/plan.json"):
        try:
            used.add(int(json.loads(plan_file.read_text())["index"]))
        except (OSError, ValueError, KeyError):
            continue
    links = _run("ip", "-o", "link", "show", "type", "bridge", check=False).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith("kraftlab") and name[len("kraftlab"):].isdigit():
            used.add(int(name[len("kraftlab"):]))
    return used


def load_plan(name: str) -> TestbedPlan | None:
    path = state_root() / name / "plan.json"
    try:
        saved = json.loads(path.read_text())
        tb = TestbedPlan(name, int(saved["hosts"]), int(saved["index"]), state_root())
        tb.network  # noqa: B018 - an index outside the block is no plan of this kraftlab's
    except (OSError, ValueError, KeyError, TypeError):
        return None  # `down` still finds the hosts by their namespaces' names
    return tb


# --- up -------------------------------------------------------------------------------------------


def check_up(name: str, hosts: int) -> None:
    """Every refusal of `up`, before anything changes."""
    for problem in (plan.name_problem(name), machine_problem(), hosts_problem(hosts)):
        if problem:
            raise TestbedError(problem)
    prefix = f"kraftlab-{name}-h"
    if (state_root() / name).exists() or any(ns.startswith(prefix) for ns in _existing_netns()):
        raise TestbedError(f"testbed {name!r} is already in use (its hosts or {state_root() / name} exist): "
                           f"`kraftlab testbed down --name {name}` first, or another --name")


def up(name: str, hosts: int, log=print) -> dict:
    """Make the testbed; returns testbed.json's content. On any failure, removes what it made."""
    check_up(name, hosts)
    free = sorted(set(range(plan.SUBNETS)) - _used_indexes())
    if not free:
        raise TestbedError(f"all {plan.SUBNETS} testbed subnets of {plan.BLOCK} are in use on this machine")
    tb = TestbedPlan(name, hosts, free[0], state_root())
    tb.folder.mkdir(parents=True, mode=0o700)
    (tb.folder / "plan.json").write_text(json.dumps({"name": name, "hosts": hosts, "index": tb.index}) + "\n")
    try:
        _make(tb, log)
    except BaseException:
        down(name, log=lambda _m: None)
        raise
    return json.loads(tb.testbed_json.read_text())


def _make(tb: TestbedPlan, log) -> None:
    started = time.monotonic()
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"kraftlab-testbed-{tb.name}", "-f", str(tb.key))
    _run("ip", "link", "add", tb.bridge, "type", "bridge")
    _run("ip", "addr", "add", f"{tb.bridge_address}/{tb.prefix}", "dev", tb.bridge)
    _run("ip", "link", "set", tb.bridge, "up")
    Path(plan.HOST_DATA_DIR).mkdir(parents=True, exist_ok=True)  # the mount point every host binds its data over
    public_key = Path(f"{tb.key}.pub").read_text()
    tb.hosts_file.write_text(tb.hosts_file_text())
    for host in tb.all_hosts():
        _make_host_network(tb, host)
        _make_host_folders(tb, host, public_key)
        _start_host(tb, host)
    for host in tb.all_hosts():
        _wait_for_sshd(tb, host)
    tb.cluster_file.write_text(cluster_file.render(tb, install=installation()))
    description = {
        "name": tb.name,
        "hosts": [{"name": h.name, "address": h.address, "ssh_user": "root", "ssh_key": str(tb.key),
                   "node_addresses": list(h.node_addresses)} for h in tb.all_hosts()],
        "cluster_file": str(tb.cluster_file),
        "network": str(tb.network),
        "machine_address": tb.bridge_address,
    }
    tb.testbed_json.write_text(json.dumps(description, indent=1) + "\n")
    log(f"testbed {tb.name}: {tb.hosts} hosts up in {time.monotonic() - started:.1f} s")


def _make_host_network(tb: TestbedPlan, host: HostPlan) -> None:
    _run("ip", "netns", "add", host.netns)
    _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
    _run("ip", "link", "set", host.veth, "master", tb.bridge)
    _run("ip", "link", "set", host.veth, "up")
    # The host's address and its pool of node addresses, all on the bridge's subnet; no default
    # route: the hosts reach each other and this machine, nothing beyond it.
    commands = [f"addr add {host.address}/{tb.prefix} dev eth0"]
    commands += [f"addr add {a}/{tb.prefix} dev eth0" for a in host.node_addresses]
    commands += ["link set lo up", "link set eth0 up"]
    _run("ip", "-n", host.netns, "-batch", "-", input="\n".join(commands) + "\n")


def _make_host_folders(tb: TestbedPlan, host: HostPlan, public_key: str) -> None:
    host.tmp.mkdir(parents=True)
    host.tmp.chmod(0o1777)
    ssh = host.home / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    (ssh / "authorized_keys").write_text(public_key)
    (ssh / "authorized_keys").chmod(0o600)
    host.home.chmod(0o700)
    # The host's "image": this kraftlab first on the PATH of every login (Ray's SSH commands and
    # the processes they start read ~/.bashrc).
    skel = Path("/etc/skel/.bashrc")
    (host.home / ".bashrc").write_text((skel.read_text() if skel.exists() else "")
                                       + f'\nexport PATH="{Path(sys.prefix).resolve() / "bin"}:$PATH"  # kraftlab testbed {tb.name}\n')
    host.data.mkdir(parents=True)
    (host.data / plan.HOST_FILE).write_text(json.dumps({
        "testbed": tb.name, "host": host.name, "address": host.address,
        "node_addresses": list(host.node_addresses), "prefix": tb.prefix,
    }) + "\n")


def installation() -> list[str]:
    """The folders this kraftlab runs from (its virtual environment, the Python it was made from,
    and its source tree when installed editable): every host must see them where they are."""
    import kraftlab

    return sorted({str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, Path(kraftlab.__file__).parents[1])})


def _keep(paths: list[str]) -> list[str]:
    """Those of `paths` that a host's private folders would hide."""
    private = (*PRIVATE_ROOTS, root_home())
    return [p for p in paths if any(p == r or p.startswith(r.rstrip("/") + "/") for r in private)]


def _start_host(tb: TestbedPlan, host: HostPlan) -> None:
    home = root_home()
    spec = {
        "hostname": host.name,
        "home": home,
        "log": str(host.folder / "sshd.log"),
        "keep": _keep(installation()),
        # The home last: the other sources lie under it.
        "binds": [[str(host.tmp), "/tmp"], [str(host.data), plan.HOST_DATA_DIR], [str(host.home), home]],
        "files": [[str(tb.hosts_file), "/etc/hosts"]],
        "shm_bytes": SHM_BYTES,
        "sshd": [shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e",
                 "-o", f"ListenAddress={host.address}", "-o", "PidFile=none",
                 "-o", "PermitRootLogin=prohibit-password", "-o", "PasswordAuthentication=no",
                 "-o", "UsePAM=no", "-o", "UseDNS=no"],
    }
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder (the machine's /run is shared)
    proc = subprocess.Popen(
        ["ip", "netns", "exec", host.netns, "unshare", "--mount", "--uts", "--pid", "--fork", "--mount-proc",
         "--propagation", "private", sys.executable, "-m", "kraftlab.testbed.host_init", json.dumps(spec)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # The host's process 1 is unshare's child; the machine knows it by another number.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        try:
            first = children.read_text().split()
        except OSError:
            first = []
        if first:
            (host.folder / "pid").write_text(f"{first[0]}\n")
            return
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    raise RuntimeError(f"host {host.name} did not start (see {host.folder / 'sshd.log'})")


def _ssh(tb: TestbedPlan, host: HostPlan, *command: str, timeout_s: float = 10.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", "-i", str(tb.key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", f"ConnectTimeout={int(timeout_s)}",
         f"root@{host.address}", *command],
        text=True, capture_output=True, timeout=timeout_s + 5, stdin=subprocess.DEVNULL)


def _listening(address: str, port: int = 22) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((address, port)) == 0


def _wait_for_sshd(tb: TestbedPlan, host: HostPlan) -> None:
    deadline = time.monotonic() + SSHD_TIMEOUT_S
    while time.monotonic() < deadline:
        if _listening(host.address) and _ssh(tb, host, "true").returncode == 0:
            return
        time.sleep(0.1)
    log = (host.folder / "sshd.log")
    tail = log.read_text()[-2000:] if log.exists() else ""
    raise RuntimeError(f"sshd of {host.name} does not answer on {host.address}:22 within {SSHD_TIMEOUT_S:g} s: {tail}")


# --- status, exec -----------------------------------------------------------------------------------


@dataclass
class HostStatus:
    name: str
    address: str
    running: bool
    sshd: bool


def host_pid(host: HostPlan) -> int | None:
    try:
        pid = int((host.folder / "pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


def status(name: str) -> list[HostStatus]:
    tb = _require(name)
    out = []
    for host in tb.all_hosts():
        running = host_pid(host) is not None
        out.append(HostStatus(host.name, host.address, running, running and _ssh(tb, host, "true").returncode == 0))
    return out


def _require(name: str) -> TestbedPlan:
    problem = plan.name_problem(name) or machine_problem()
    if problem:
        raise TestbedError(problem)
    tb = load_plan(name)
    if tb is None or not tb.testbed_json.exists():
        raise TestbedError(f"no testbed {name!r} is up (`kraftlab testbed up --name {name}`)")
    return tb


def host_command(name: str, host_name: str, command: list[str]) -> list[str]:
    """The command line that runs `command` on the host, in all its namespaces, from its home."""
    tb = _require(name)
    hosts = {h.name: h for h in tb.all_hosts()}
    if host_name not in hosts:
        raise TestbedError(f"no host {host_name!r} in testbed {name} (expected one of {', '.join(hosts)})")
    if not command:
        raise TestbedError("expected a command after --, e.g. `kraftlab testbed exec h1 -- ray status`")
    pid = host_pid(hosts[host_name])
    if pid is None:
        raise TestbedError(f"host {host_name} of testbed {name} is not running (`kraftlab testbed status --name {name}`)")
    return ["nsenter", "--target", str(pid), "--mount", "--uts", "--net", "--pid", f"--wdns={root_home()}", "--", *command]


def exec_command(name: str, host_name: str, command: list[str]) -> int:
    """Run `command` on the host; its exit code."""
    return subprocess.run(host_command(name, host_name, command)).returncode


# --- down -------------------------------------------------------------------------------------------


def down(name: str, log=print) -> bool:
    """Remove every process, namespace, interface and folder of the testbed; False when there was
    nothing to remove. Idempotent."""
    problem = plan.name_problem(name) or machine_problem()
    if problem:
        raise TestbedError(problem)
    tb = load_plan(name)
    prefix = f"kraftlab-{name}-h"
    namespaces = sorted(ns for ns in _existing_netns() if ns.startswith(prefix))
    folder = state_root() / name
    if tb is None and not namespaces and not folder.exists():
        return False
    pids: set[int] = set()
    if tb is not None:
        pids |= {pid for host in tb.all_hosts() if (pid := host_pid(host)) is not None}
    for ns in namespaces:
        pids |= {int(p) for p in _run("ip", "netns", "pids", ns, check=False).stdout.split()}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _wait_gone(pids)
    for ns in namespaces:
        _run("ip", "netns", "del", ns, check=False)
    if tb is not None:
        for host in tb.all_hosts():  # gone with its namespace; a half-made one may not be
            _run("ip", "link", "del", host.veth, check=False)
        _run("ip", "link", "del", tb.bridge, check=False)
    shutil.rmtree(folder, ignore_errors=True)
    log(f"testbed {name}: removed")
    return True


def _wait_gone(pids: set[int], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    left = set(pids)
    while left and time.monotonic() < deadline:
        left = {pid for pid in left if _alive(pid)}
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
