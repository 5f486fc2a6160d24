"""The `ray up` file of a testbed: Ray's `local` provider, the head on h1, one Ray node per host.

The hosts share the machine's software (host_init.py), so nothing is installed on them: each host's
`~/.bashrc` (its own home, written by `up`) puts this kraftlab's virtual environment first on the
PATH, which is where Ray's SSH commands, the Ray workers and `ray exec` find `ray` and `kraftlab`.

Each host gets an equal share of the machine's cores as Ray CPUs (at least one): a campaign spreads
its runs over the hosts as over machines, without promising more parallel work than the machine
has. `--node-ip-address` is the host's address: Ray's autoscaler knows a node by the address it
reached it at, and a host has no default route from which Ray could guess one.
"""

from __future__ import annotations

import os
import yaml

from .plan import TestbedPlan

OBJECT_STORE_BYTES = 256 * 2**20  # per host: kraftlab's calls carry small objects


def cpus_per_host(hosts: int) -> int:
    return max(1, (os.cpu_count() or 1) // hosts)


def render(tb: TestbedPlan, install: list[str]) -> str:
    hosts = tb.all_hosts()
    head, workers = hosts[0], hosts[1:]
    common = (f"--num-cpus={cpus_per_host(tb.hosts)} --object-store-memory={OBJECT_STORE_BYTES} "
              "--disable-usage-stats")
    config = {
        "cluster_name": f"kraftlab-{tb.name}",
        "provider": {"type": "local", "head_ip": head.address, "worker_ips": [w.address for w in workers]},
        "auth": {"ssh_user": "root", "ssh_private_key": str(tb.key)},
        # Every host is kept: a host the autoscaler released mid-run would be a crash nobody asked for.
        "min_workers": len(workers),
        "max_workers": len(workers),
        "upscaling_speed": float(max(1, len(workers))),
        "idle_timeout_minutes": 10_000,
        "file_mounts": {},
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [
            "ray stop",
            f"RAY_enable_autoscaler_v2=0 ray start --head --port=6379 --node-ip-address={head.address} {common} "
            "--autoscaling-config=~/ray_bootstrap_config.yaml",
        ],
        "worker_start_ray_commands": [
            "ray stop",
            "ray start --address=$RAY_HEAD_IP:6379 --node-ip-address=$(echo $SSH_CONNECTION | cut -d' ' -f3) " + common,
        ],
    }
    header = (f"# kraftlab testbed {tb.name!r}: {tb.hosts} emulated hosts on this machine (kraftlab testbed up).\n"
              f"# ray up -y {tb.cluster_file}; ray exec {tb.cluster_file} 'kraftlab run SCENARIO --runtime ray "
              "--address auto --faults kernel'; ray down -y this file.\n"
              f"# The hosts run the kraftlab installed at {', '.join(install)}.\n")
    return header + yaml.safe_dump(config, sort_keys=False)
