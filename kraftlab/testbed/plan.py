"""Names, addresses and paths of a testbed: a pure function of its name, its host count and the
index of its subnet (the lowest free one when it came up).

Addresses come only from 198.18.0.0/15, the block RFC 2544 sets aside for testing network
equipment: nothing real answers there, so a rule or a route made here can never reach another
network. The block is cut into 32 subnets of /20, one per testbed (index 0..31); in a testbed's
subnet `S`:

- S+1 is the machine's own address on the testbed's bridge (the hosts reach this machine there);
- S+10+N is host hN's address (h1 of the first testbed is 198.18.0.11);
- S+256 and up are the hosts' pools of node addresses, `NODE_POOL_SIZE` per host: each kraftlab node
  with `--faults kernel` listens and connects from an address of its own, so that a kernel rule can
  name one node, whatever else runs on its host (actors/runtime/ray/kernel_faults.py).

Interface names are at most 15 characters (the kernel's IFNAMSIZ), so they carry the subnet's index,
not the testbed's name; network namespace names carry the name (`kraftlab-NAME-hN`), so that `down`
finds a testbed's hosts even when `up` crashed before writing anything else.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from actors.runtime.ray import host_addresses

BLOCK = ipaddress.IPv4Network("198.18.0.0/15")
SUBNET_PREFIX = 20
SUBNETS = 2 ** (SUBNET_PREFIX - BLOCK.prefixlen)  # 32 testbeds at most on one machine
FIRST_HOST_OFFSET = 10
NODE_POOL_OFFSET = 256
# Node addresses per host: the nodes of every run on the host at once (a campaign runs several
# clusters side by side; each puts its clients and a share of its brokers and voters on a host).
NODE_POOL_SIZE = 128
MAX_HOSTS = (NODE_POOL_OFFSET - FIRST_HOST_OFFSET - 1)  # host addresses stay below the pools
NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,23}")
DEFAULT_NAME = "default"
DEFAULT_HOSTS = 4
# Where each host sees its own data directory (a bind mount of the host's folder on the machine),
# and the file there that tells processes on the host which host they are on and which addresses
# its kraftlab nodes may take (actors/runtime/ray/host_addresses.py).
HOST_DATA_DIR = str(host_addresses.HOST_DATA_DIR)
HOST_FILE = host_addresses.HOST_FILE.name


def name_problem(name: str) -> str | None:
    if NAME_PATTERN.fullmatch(name):
        return None
    return f"--name {name!r}: expected a lowercase letter, then up to 23 lowercase letters, digits or '-'"


def subnet(index: int) -> ipaddress.IPv4Network:
    if not 0 <= index < SUBNETS:
        raise ValueError(f"testbed subnet index {index} outside 0..{SUBNETS - 1}")
    return list(BLOCK.subnets(new_prefix=SUBNET_PREFIX))[index]


@dataclass(frozen=True)
class HostPlan:
    name: str  # h1..hN
    number: int  # N
    address: str
    netns: str  # the network namespace's name (`ip netns`)
    veth: str  # the machine's end of the host's link to the bridge
    node_addresses: tuple[str, ...]  # the pool kraftlab nodes on this host take addresses from
    folder: Path  # on the machine: tmp/, shm is a tmpfs, home/, data/ live under it

    @property
    def tmp(self) -> Path:
        return self.folder / "tmp"

    @property
    def home(self) -> Path:
        return self.folder / "home"

    @property
    def data(self) -> Path:
        return self.folder / "data"


@dataclass(frozen=True)
class TestbedPlan:
    __test__ = False  # not a pytest test class

    name: str
    hosts: int
    index: int
    state_root: Path  # ~/.kraftlab/testbeds

    @property
    def folder(self) -> Path:
        return self.state_root / self.name

    @property
    def network(self) -> ipaddress.IPv4Network:
        return subnet(self.index)

    @property
    def bridge(self) -> str:
        return f"kraftlab{self.index}"

    @property
    def bridge_address(self) -> str:
        return str(self.network[1])

    @property
    def prefix(self) -> int:
        return SUBNET_PREFIX

    @property
    def key(self) -> Path:
        return self.folder / "id_ed25519"

    @property
    def testbed_json(self) -> Path:
        return self.folder / "testbed.json"

    @property
    def cluster_file(self) -> Path:
        return self.folder / "cluster.yaml"

    @property
    def hosts_file(self) -> Path:
        """Every host's /etc/hosts: a name that does not resolve breaks Java (RayDP's app master
        calls `InetAddress.getLocalHost()`), as it would on a real machine."""
        return self.folder / "etc-hosts"

    def hosts_file_text(self) -> str:
        names = "".join(f"{h.address}\t{h.name}\n" for h in self.all_hosts())
        return f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{names}"

    def host(self, number: int) -> HostPlan:
        if not 1 <= number <= self.hosts:
            raise ValueError(f"no host h{number} in testbed {self.name} (h1..h{self.hosts})")
        net = self.network
        pool_start = NODE_POOL_OFFSET + (number - 1) * NODE_POOL_SIZE
        return HostPlan(
            name=f"h{number}",
            number=number,
            address=str(net[FIRST_HOST_OFFSET + number]),
            netns=netns_name(self.name, number),
            veth=f"kl{self.index}h{number}",
            node_addresses=tuple(str(net[pool_start + i]) for i in range(NODE_POOL_SIZE)),
            folder=self.folder / "hosts" / f"h{number}",
        )

    def all_hosts(self) -> list[HostPlan]:
        return [self.host(n) for n in range(1, self.hosts + 1)]


def netns_name(testbed: str, number: int) -> str:
    return f"kraftlab-{testbed}-h{number}"


def max_hosts_for_subnet() -> int:
    """Hosts one subnet can address, each with its pool of node addresses."""
    return min(MAX_HOSTS, (2 ** (32 - SUBNET_PREFIX) - NODE_POOL_OFFSET) // NODE_POOL_SIZE)
