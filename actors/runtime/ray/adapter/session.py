"""The driver's Ray session: joining a cluster or starting an embedded one (its token, its logs,
its signal handlers), and leaving it."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray

from actors.runtime import interrupts

# The logs folder of the Ray session this process started (None when it joined a cluster, whose
# logs stay on its machines): an embedded run copies what Ray wrote there into its run directory.
_embedded_logs: Path | None = None


# --- driver side ------------------------------------------------------------------------------


def ray_init_arguments(address: str | None, environ: Mapping[str, str],
                       worker_niceness: int | None = None) -> dict[str, Any]:
    """`ray.init`'s arguments: join `address` (or RAY_ADDRESS); with neither, start an embedded
    local Ray. Its address is "local", not None: a plain `ray.init()` joins the cluster that
    `ray start` last recorded on this machine (docs/reference: only `--address` or RAY_ADDRESS join).
    `worker_niceness`: the embedded Ray's workers' niceness (Ray's default is 15, so that its
    workers yield to the driver); a cluster joined keeps its own setting."""
    address = address or environ.get("RAY_ADDRESS") or None
    if address is None:
        arguments = {"address": "local", "include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
        if worker_niceness is not None:
            arguments["_system_config"] = {"worker_niceness": worker_niceness}
        return arguments
    return {"address": address, "logging_level": "ERROR", "log_to_driver": False}


ADDRESS_EXPECTED = ("expected the address of a running Ray cluster (host:port, as `ray start --head` prints it; "
                    "ray://host:port for Ray Client; auto for the cluster started on this machine), "
                    "or no address for an embedded local Ray")


def address_problem(address: str | None, environ: Mapping[str, str], timeout_s: float = 3.0) -> str | None:
    """Why the Ray cluster named by `address` (or RAY_ADDRESS) cannot be joined, found before
    anything runs; None when something answers there, or when none is named (an embedded Ray).

    Checked here because `ray.init` does not fail on an address where nothing listens: it retries
    for minutes, printing only Ray's own C++ warnings, and ignores SIGTERM meanwhile. Only that
    something accepts connections is checked; joining can still fail, and says why."""
    given, source = (address, "--address") if address else (environ.get("RAY_ADDRESS") or None, "RAY_ADDRESS")
    if given is None or given == "local":
        return None
    target = given.removeprefix("ray://")
    if target == "auto":
        from ray._private import services

        try:
            target = services.canonicalize_bootstrap_address("auto")
        except Exception as exc:  # noqa: BLE001 - Ray's lookup failing is the answer
            return f"{source} {given}: no Ray cluster found on this machine ({exc}); {ADDRESS_EXPECTED}"
        if target is None:
            return f"{source} {given}: no Ray cluster found on this machine; {ADDRESS_EXPECTED}"
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return f"{source} {given}: not host:port; {ADDRESS_EXPECTED}"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return f"{source} {given}: no Ray cluster answers at {host}:{port} ({why}); {ADDRESS_EXPECTED}"


def connect(address: str | None, worker_niceness: int | None = None) -> dict[str, Any]:
    """Join the cluster at `address` (or RAY_ADDRESS); with neither, start an embedded local Ray
    (its workers at `worker_niceness`, see `ray_init_arguments`)."""
    if ray.is_initialized():
        return {"address": "already connected", "embedded": False}
    global _embedded_logs
    arguments = ray_init_arguments(address, os.environ, worker_niceness)
    if arguments["address"] == "local":
        _token_of_this_process()
        enter_single_machine_mode()
    if interrupts.installed():
        # While it starts, Ray puts in SIGTERM handlers of its own (the node's, then the driver's:
        # `sys.exit(15)` once a 30 s wait for a raylet the same signal killed is over): keep the
        # command's, so that SIGTERM stops the start at once. Ray looks the function up at each call.
        set_sigterm_handler = ray._private.utils.set_sigterm_handler
        ray._private.utils.set_sigterm_handler = lambda _handler: None
        try:
            ray.init(**arguments)
        finally:
            ray._private.utils.set_sigterm_handler = set_sigterm_handler
    else:
        ray.init(**arguments)
    interrupts.reclaim()  # and ray.init leaves Ray's C++ SIGTERM handler, which aborts the process
    _keep_ray_off_the_console()
    embedded = arguments["address"] == "local"
    if embedded:
        _embedded_logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    return {"address": arguments["address"], "embedded": embedded}


AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
_auth_environment_before: dict[str, str | None] | None = None


def _token_of_this_process() -> None:
    """Token authentication for an embedded Ray, with a token of this process's own (in its
    environment, which Ray's processes inherit), unless the user chose the mode or a token.

    Ray's default would write a token to ~/.ray/auth_token, for good; and from then on every
    driver of this machine that joins a cluster with `auto` turns token authentication on, so a
    cluster started without one (`ray up`, `ray start`) drops every actor it creates ("cancelled
    before it started running"): one `kraftlab demo` on a head node broke every later run there."""
    global _auth_environment_before
    if any(os.environ.get(name) for name in AUTH_VARIABLES):
        return
    _auth_environment_before = {name: os.environ.get(name) for name in AUTH_VARIABLES}
    # The mode stays unset: `ray.init` then turns token authentication on itself (and refreshes
    # its cached configuration), and finds this token instead of writing one.
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def _restore_auth_environment() -> None:
    """After an embedded Ray: this process joins a cluster next as if it had never started one."""
    global _auth_environment_before
    if _auth_environment_before is None:
        return
    for name, value in _auth_environment_before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _auth_environment_before = None
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


# Ray's own switch as this process found it, while the embedded Ray is in single-machine mode.
_cluster_mode_before: bool | None = None


def enter_single_machine_mode() -> None:
    """An embedded Ray in Ray's single-machine mode (its default on macOS and Windows): every
    process of it takes 127.0.0.1 as its node's address, so Ray's own connections, the node
    actors' wire and the brokers' Kafka listeners stay on loopback. On Linux, Ray takes the host's
    interface address even for a cluster of one machine. Ray reads the switch where it decides
    (`services.get_node_ip_address`): its constant in this process, which has imported Ray, and
    the variable in the processes it starts, which inherit this environment. Put back by
    `shutdown`, so that this process joins a cluster next as usual. A test's
    `ray.cluster_utils.Cluster`, all of whose nodes are this machine's, enters it too before it
    starts."""
    global _cluster_mode_before
    from ray._private import ray_constants

    if ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR in os.environ:
        return  # the user chose
    _cluster_mode_before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"


def _leave_single_machine_mode() -> None:
    global _cluster_mode_before
    if _cluster_mode_before is None:
        return
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = _cluster_mode_before
    os.environ.pop(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, None)
    _cluster_mode_before = None


def _keep_ray_off_the_console() -> None:
    """A Ray driver prints on stdout whatever the raylets push to it, whatever `log_to_driver`
    says: with a dozen actors per run on few CPUs, warnings such as "N PYTHON worker processes
    have been started" by the dozen. Turn that printing off, as Ray's own debugger does
    (ray/util/rpdb.py). The same lines stay in Ray's session logs (raylet.out), which an embedded
    run copies into its run directory; Ray's errors in this process still reach stderr
    (`logging_level="ERROR"`), and a dead actor shows in the run's own results."""
    ray._private.worker._worker_logs_enabled = False


def runs_embedded_ray() -> bool:
    """This process started the Ray it is connected to (no address): Ray's processes are then its
    children, in its process group, and a Ctrl-C or SIGTERM sent to the group reaches them too."""
    return _embedded_logs is not None


def copy_embedded_logs(destination: Path, since: float) -> bool:
    """Copy into `destination` the log files the embedded Ray wrote since `since` (a `time.time()`):
    Ray's session logs, those of its system processes and of every worker, this run's among them.
    False when this process started no Ray."""
    if _embedded_logs is None:
        return False
    for folder, _, files in os.walk(_embedded_logs):
        for name in files:
            source = Path(folder) / name
            target = destination / source.relative_to(_embedded_logs)
            try:
                if not source.is_file() or source.stat().st_mtime < since:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
            except OSError:  # rotated or removed meanwhile: Ray goes on writing its logs
                continue
    return True



def shutdown() -> None:
    global _embedded_logs
    if ray.is_initialized():
        ray.shutdown()
    _embedded_logs = None
    _restore_auth_environment()
    _leave_single_machine_mode()
