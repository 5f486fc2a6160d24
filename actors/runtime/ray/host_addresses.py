"""The node addresses a host lends to kraftlab's nodes, for `--faults kernel`.

A host that can make kernel faults lists, in `HOST_FILE`, addresses of its own that nothing else
uses (`kraftlab testbed up` writes it on every host; on machines you own, write it yourself, see
docs/testbed.md). Each node process with `--faults kernel` claims one for its life: its wire
listens on it and connects from it, so a packet-filter rule can name that node alone
(actors/runtime/kernel_rules.py). A claim is an exclusive `flock` on a file named after the
address, held by the process: it ends with the process however it ends (a crash included), and two
runs on one host (a campaign's) never share an address.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

HOST_DATA_DIR = Path("/var/lib/kraftlab")
HOST_FILE = HOST_DATA_DIR / "host.json"


class NoNodeAddress(RuntimeError):
    """This host lends no free node address."""


def host_info(host_file: Path = HOST_FILE) -> dict:
    try:
        info = json.loads(host_file.read_text())
    except FileNotFoundError:
        raise NoNodeAddress(f"{host_file} is missing: this host lends no node addresses for --faults kernel "
                            "(kraftlab testbed hosts have them; see docs/testbed.md)") from None
    except (OSError, ValueError) as exc:
        raise NoNodeAddress(f"{host_file}: cannot read it ({exc})") from None
    if not isinstance(info.get("node_addresses"), list) or not info["node_addresses"]:
        raise NoNodeAddress(f"{host_file}: expected `node_addresses`, a list of this host's addresses for kraftlab's nodes")
    return info


def _lock_path(host_file: Path, address: str) -> Path:
    folder = host_file.parent / "node-addresses"
    folder.mkdir(exist_ok=True)
    return folder / address


def _try_lock(host_file: Path, address: str) -> int | None:
    """A descriptor holding `address`'s lock, or None when another process holds it."""
    fd = os.open(_lock_path(host_file, address), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def claim(host_file: Path = HOST_FILE) -> tuple[str, int]:
    """A free node address of this host and the descriptor that holds it (closing it, or the
    process's end, frees it)."""
    info = host_info(host_file)
    for address in info["node_addresses"]:
        fd = _try_lock(host_file, address)
        if fd is not None:
            return address, fd
    raise NoNodeAddress(f"host {info.get('host', '?')}: all {len(info['node_addresses'])} node addresses are taken "
                        "(by the nodes of the runs on it): fewer nodes on this host, or more hosts")


def free_count(host_file: Path = HOST_FILE) -> int:
    """How many of this host's node addresses no process holds now."""
    free = 0
    for address in host_info(host_file)["node_addresses"]:
        fd = _try_lock(host_file, address)
        if fd is not None:
            os.close(fd)
            free += 1
    return free
