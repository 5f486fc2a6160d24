"""Network faults as the kernel's packet filter makes them: an nftables ruleset from the faults in
force (`NetworkFaults`) and where each node's wire is (its own address and listening port).

Pure: this builds text; the Ray runtime's kernel-fault agents load it with `nft -f` on every host
(actors/runtime/ray/kernel_faults.py). Why rules can name one node: with `--faults kernel` every
node's wire (wire.py) listens on, and connects from, an address of its own, which nothing but the
wire uses, while Ray's own connections use the host's address. So a rule on a node's address cuts
that node's Kafka traffic and nothing else: Ray keeps seeing the node, as a Kafka-level partition
should leave it.

The same ruleset goes to every host, in one table per run (`kraftlab_<run>`), in the `output`
hook: a packet is dropped on the host that sends it. A link `a -> b` is the connection `a` opens to
`b`'s listening port (wire.py: one connection per directed link), so cutting it drops `a`'s
packets to that port and `b`'s answers from it (its acknowledgements), and leaves `b -> a`, a
connection of its own, alone. A lossy link drops `a`'s packets on it at random: TCP retransmits
them, so a kernel-lossy link delays messages where the emulated one loses them, as a real lossy
network does. A delay needs the kernel's netem queueing discipline (`tc qdisc ... netem`), which
this builder does not use: `KernelFaultUnsupported`.
"""

from __future__ import annotations

from collections.abc import Mapping

from actors.runtime.network import NetworkFaults

Endpoint = tuple[str, int]  # (the node's own address, its wire's listening port)
DROP_SCALE = 10_000  # random drops in steps of 0.01%


class KernelFaultUnsupported(ValueError):
    """A fault the kernel backend cannot make (here: a delay, without netem)."""


def table_name(run_token: str) -> str:
    return f"kraftlab_{run_token}"


def _cut(src: Endpoint, dst: Endpoint) -> list[str]:
    (src_ip, _), (dst_ip, dst_port) = src, dst
    return [f"ip saddr {src_ip} ip daddr {dst_ip} tcp dport {dst_port} drop",
            f"ip saddr {dst_ip} ip daddr {src_ip} tcp sport {dst_port} drop"]


def rules(faults: NetworkFaults, endpoints: Mapping[str, Endpoint]) -> list[str]:
    """The rules for the faults in force, for the nodes that have an endpoint now (a node that is
    down has none; the driver rebuilds the rules when it comes back with a new one)."""
    isolated, cut, links = faults.state()
    out: list[str] = []
    for node in sorted(isolated):
        if node in endpoints:
            address = endpoints[node][0]
            out += [f"ip saddr {address} drop", f"ip daddr {address} drop"]
    for src, dst in sorted(cut):
        if src in endpoints and dst in endpoints:
            out += _cut(endpoints[src], endpoints[dst])
    for (src, dst), fault in sorted(links.items()):
        if fault.delay_ms > 0:
            raise KernelFaultUnsupported(f"link {src} -> {dst}: a delay ({fault.delay_ms:g} ms) needs the kernel's netem")
        if src not in endpoints or dst not in endpoints or fault.drop <= 0:
            continue
        if fault.drop >= 1:
            out += _cut(endpoints[src], endpoints[dst])
        else:
            (src_ip, _), (dst_ip, dst_port) = endpoints[src], endpoints[dst]
            out.append(f"ip saddr {src_ip} ip daddr {dst_ip} tcp dport {dst_port} "
                       f"numgen random mod {DROP_SCALE} < {round(fault.drop * DROP_SCALE)} drop")
    return out


def ruleset(table: str, faults: NetworkFaults, endpoints: Mapping[str, Endpoint]) -> str:
    """An `nft -f` script that replaces the run's table with the rules for the faults in force, in
    one transaction (declaring the table first, so that deleting it cannot fail)."""
    body = "".join(f"    {rule}\n" for rule in rules(faults, endpoints))
    return (f"table inet {table}\ndelete table inet {table}\n"
            f"table inet {table} {{\n  chain output {{\n    type filter hook output priority 0; policy accept;\n"
            f"{body}  }}\n}}\n")


def removal(table: str) -> str:
    """An `nft -f` script that removes the run's table, whether or not it exists."""
    return f"table inet {table}\ndelete table inet {table}\n"
