"""`kraftlab testbed`: emulated hosts on one Linux machine (docs/testbed.md).

Each host is a network namespace with an address on the testbed's bridge, a mount namespace with
its own /tmp, /dev/shm, home and data directory, a UTS namespace (its hostname) and a PID namespace
whose first process is the host's sshd. `plan` decides names and addresses (pure), `host_init`
runs inside a new host and sets it up, `lifecycle` makes and removes them, `cluster_file` writes
the `ray up` file for the hosts.
"""
