"""The first process of a new host: make its private directories, name it, then become its sshd.

`lifecycle.start_host` runs this as `python -m kraftlab.testbed.host_init SPEC_JSON` inside the
host's network namespace and fresh mount, UTS and PID namespaces (`unshare`), as the PID
namespace's process 1; it ends by exec'ing sshd, so the host lives exactly as long as its sshd, and
killing that one process (SIGKILL, from the machine) ends every process of the host.

In the mount namespace, private folders of the machine are bound over /tmp, the home directory
and the data directory, the testbed's hosts file over /etc/hosts (each host resolves every host's
name), and a tmpfs over /dev/shm: a file written there on one host is not seen on
another, as on separate machines. The rest of the file system is shared, as machines made from one
image share their software: that is how every host finds the same kraftlab and Ray. Where that
installation itself lies under a private folder (a clone in /tmp or in the home directory), it is
bound back at its path (`keep`), from a descriptor opened before the private folder hid it.

Only the standard library is imported: this runs before anything else on the host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _mount(*args: str, pass_fds: tuple[int, ...] = ()) -> None:
    subprocess.run(["mount", *args], check=True, pass_fds=pass_fds)


def main(spec: dict) -> None:
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 2)
    # Descriptors of the installation's folders, taken while their paths still show them.
    kept = [(os.open(path, os.O_PATH | os.O_DIRECTORY), path) for path in spec["keep"]]
    # Files of the host's own, such as /etc/hosts: first, while their sources (in the machine's
    # home) are not yet hidden by the host's home.
    for source, target in spec["files"]:
        _mount("--bind", source, target)
    for source, target in spec["binds"]:
        os.makedirs(target, exist_ok=True)
        _mount("--bind", source, target)
    _mount("-t", "tmpfs", "-o", f"mode=1777,size={spec['shm_bytes']}", "tmpfs", "/dev/shm")
    for fd, path in kept:
        os.makedirs(path, exist_ok=True)
        # Not canonicalized: the descriptor's path now names the empty folder just made.
        _mount("--no-canonicalize", "--rbind", f"/proc/self/fd/{fd}", path, pass_fds=(fd,))
        os.close(fd)
    subprocess.run(["hostname", spec["hostname"]], check=True)
    os.chdir(spec["home"])
    os.environ["HOME"] = spec["home"]
    os.execv(spec["sshd"][0], spec["sshd"])


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
