"""Every `ray.*` call of kraftlab, in one package (docs/explanation/architecture.md): the driver's
session (`session`), the calls on a joined cluster (`calls`), the node actor and the host agent
(`actors`), the kernel fault agents (`kernel_faults`) and the transport benchmark's echo actor
(`echo`). Callers use the package's names (`adapter.connect`, `adapter.create_agent`): where a
name lives inside it is the package's business.

Actors ask for no CPU (`num_cpus=0`): a cluster is a dozen mostly idle processes, and a 2-core
machine must hold them all. Hosts are failure domains: each emulated host is pinned to one Ray node
with a node-label selector (`ray.io/node-id`), and every actor of the host (its agent and its
nodes) runs there; `placement.assign_hosts` decides which host goes to which node.
"""

from .actors import HostAgent, NodeActor, create_agent, create_client
from .calls import (
    alive_nodes,
    cluster_cpus,
    finished,
    get,
    kill,
    node_is_alive,
    task_submitter,
    this_node,
    this_node_resource,
    wait_quietly,
)
from .constants import ACTOR_OPTIONS, HOST_UP_MARKER, KERNEL_WIRE_TIMEOUT_MS, NODE_LABEL, PROCESS_END_TIMEOUT_S
from .echo import EchoActor, echo_round_trips_per_s
from .kernel_faults import KernelFaultAgent, create_kernel_fault_agents, kernel_fault_problems
from .processes import process_is_running, wait_for_processes_to_end
from .session import (
    ADDRESS_EXPECTED,
    AUTH_VARIABLES,
    address_problem,
    connect,
    copy_embedded_logs,
    enter_single_machine_mode,
    ray_init_arguments,
    runs_embedded_ray,
    shutdown,
)

__all__ = [
    "ACTOR_OPTIONS", "ADDRESS_EXPECTED", "AUTH_VARIABLES", "HOST_UP_MARKER", "KERNEL_WIRE_TIMEOUT_MS", "NODE_LABEL",
    "PROCESS_END_TIMEOUT_S", "EchoActor", "HostAgent", "KernelFaultAgent", "NodeActor", "address_problem", "alive_nodes",
    "cluster_cpus", "connect", "copy_embedded_logs", "create_agent", "create_client", "create_kernel_fault_agents",
    "echo_round_trips_per_s", "enter_single_machine_mode", "finished", "get", "kernel_fault_problems", "kill", "node_is_alive", "process_is_running",
    "ray_init_arguments", "runs_embedded_ray", "shutdown", "task_submitter", "this_node", "this_node_resource",
    "wait_for_processes_to_end", "wait_quietly",
]
