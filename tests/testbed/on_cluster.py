"""Run on a testbed's Ray head through `ray exec` (tests/testbed), each printing JSON lines:

    python tests/testbed/on_cluster.py library OUT_DIR [NAME ...]   # library scenarios, --faults kernel
    python tests/testbed/on_cluster.py probe OUT_DIR                # a kernel partition, counter by counter
    python tests/testbed/on_cluster.py campaign OUT_DIR             # `kraftlab campaign --faults kernel`
    python tests/testbed/on_cluster.py hunt OUT_DIR                 # `kraftlab campaign hunt`, a few seeds, on the cluster
    python tests/testbed/on_cluster.py kafka-client OUT_DIR         # a Kafka client on an isolated leader's host, --faults kernel
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NETWORK_STEPS = {"isolate", "partition", "link", "heal"}
PARALLEL = 3


def kernel_scenarios() -> list[str]:
    """The library scenarios with network faults that the kernel can make (no link delay)."""
    from kraftlab.runner import kernel_faults_refusal
    from workloads.scenario.loading import library_scenarios, load_scenario

    names = []
    for name in sorted(library_scenarios()):
        scenario, _ = load_scenario(name, runtime="ray")
        if {step.kind() for step in scenario.steps} & NETWORK_STEPS and kernel_faults_refusal(scenario) is None:
            names.append(name)
    return names


def library(out: Path, names: list[str]) -> None:
    from actors.runtime.ray import adapter
    from kraftlab.runner import run_scenario
    from workloads.scenario.loading import load_scenario

    adapter.connect("auto")

    def one(name: str) -> dict:
        scenario, _ = load_scenario(name, runtime="ray")
        try:
            result = run_scenario(scenario, source=name, out_dir=out / name, faults="kernel")
        except Exception as exc:  # noqa: BLE001 - reported, not raised: the others go on
            return {"scenario": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        s = result.summary
        return {"scenario": name, "ok": s["ok"], "failures": s["failures"],
                "violations": sorted(v["invariant"] for v in s["violations"]), "expected": s["expect_violations"],
                "wall_s": s["stats"]["wall_s"]}

    with ThreadPoolExecutor(PARALLEL) as pool:
        for answer in pool.map(one, names or kernel_scenarios()):
            print("SCENARIO " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "library":
        library(Path(sys.argv[2]), sys.argv[3:])


def probe(out: Path) -> None:
    """A kernel partition cuts the data plane and nothing else: with b3 isolated by the hosts'
    packet filters, no frame reaches b3 and b3's sends break (its wire's connections time out),
    while the driver's Ray calls to b3 and tasks on every host still answer; the run's table is
    in every host's packet filter meanwhile, and gone after the cluster closes. A partition of b1
    from b3 leaves b3's other links up.

    Each change is waited for, not slept on: a send of b3's breaks only once b3 has something to
    send (a heartbeat at least every broker.heartbeat.interval.ms), the connection it went on has
    timed out (the wire's TCP_USER_TIMEOUT), and the next send's connect has timed out too; the
    bound is that chain with a margin, and a change that does not come within it is reported as
    not having come."""
    import subprocess
    import time

    import ray

    from actors.runtime.ray import adapter
    from workloads.drivers import ray_cluster
    from workloads.scenario.loading import validate

    adapter.connect("auto")

    @ray.remote(num_cpus=0)
    def tables() -> str:
        return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout

    def on_every_host() -> list[str]:
        return ray.get([tables.options(label_selector={adapter.NODE_LABEL: n["node_id"]}).remote()
                        for n in adapter.alive_nodes()], timeout=60)

    scenario = validate({"name": "kernel-probe", "runtime": "ray", "cluster": {"brokers": 3, "controllers": 1},
                         "topics": [{"name": "t", "replication_factor": 3}]}, "on_cluster.py")
    heartbeat_ms = scenario.cluster.config.broker_heartbeat_interval_ms
    bound_ms = 2 * (heartbeat_ms + adapter.KERNEL_WIRE_TIMEOUT_MS) + 10_000

    def once(counter: str, above: int) -> dict:
        """b3's counters once `counter` has passed `above`, or at the bound."""
        deadline = time.monotonic() + bound_ms / 1000
        while (now := cluster.counters("b3"))[counter] <= above and time.monotonic() < deadline:
            cluster.run_for(250)
        return now

    cluster = ray_cluster(scenario, fault_backend="kernel", data_root=out / "data")
    answer: dict = {"addresses": {name: list(node.address) for name, node in cluster.sim.nodes.items()}, "bound_ms": bound_ms}
    try:
        cluster.run_for(2_000)
        answer["before"] = cluster.counters("b3")
        cluster.isolate("b3")
        answer["tables_during"] = [cluster.kernel_table in listed for listed in on_every_host()]
        cluster.run_for(1_000)  # what was in flight when the rules came
        answer["isolated"] = cluster.counters("b3")
        answer["isolated_until_a_send_broke"] = once("dropped", answer["isolated"]["dropped"])
        cluster.heal(None)
        answer["healed"] = once("frames_received", answer["isolated_until_a_send_broke"]["frames_received"])
        # A partition of b1 from b3 alone leaves b3's links to the others up.
        cluster.partition([["b1"], ["b3"]])
        cluster.run_for(1_000)
        answer["partitioned_from_b1"] = once("frames_received", cluster.counters("b3")["frames_received"])
        cluster.heal(None)
    finally:
        cluster.close()
    answer["tables_after"] = [cluster.kernel_table in listed for listed in on_every_host()]
    print("PROBE " + json.dumps(answer), flush=True)


if __name__ == "__main__" and sys.argv[1] == "probe":
    probe(Path(sys.argv[2]))


# One `runtime: ray` run with the fault kinds the kernel makes (no delays).
KERNEL_CAMPAIGN = """\
name: kernel
scenario: random-faults
seeds: 1
set: {runtime: ray}
faults: {kinds: [isolate, partition, crash_process], mean_interval_ms: 1500, duration_ms: 3000, converge_ms: 30000}
load: {producers: 1, consumers: 1, rate_per_s: 20, acks: all}
"""


def campaign(out: Path) -> None:
    """`kraftlab campaign --faults kernel` as a user types it; its rows, and the backends its run's
    history gives its faults."""
    import subprocess

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from observability.history import read_history

    spec = out.parent / f"{out.name}.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(KERNEL_CAMPAIGN)
    done = subprocess.run([str(Path(sys.executable).parent / "kraftlab"), "campaign", str(spec), "--out", str(out),
                           "--address", "auto", "--faults", "kernel", "--keep-runs", "all"], capture_output=True, text=True)
    rows = pq.read_table(out / "results.parquet").to_pylist() if (out / "results.parquet").is_file() else []
    faults = [read_history(out / "runs" / row["run"] / "events").filter(pc.equal(pc.field("kind"), "fault")) for row in rows]
    print("CAMPAIGN " + json.dumps({"exit": done.returncode, "output": (done.stdout + done.stderr)[-2000:],
                                    "rows": [[row["status"], row["replay"]] for row in rows],
                                    "backends": sorted({b for f in faults for b in f.column("backend").to_pylist()})}), flush=True)


if __name__ == "__main__" and sys.argv[1] == "campaign":
    campaign(Path(sys.argv[2]))


def hunt(out: Path) -> None:
    """`kraftlab campaign hunt` on the cluster, its simulator runs spread as Ray tasks over the
    hosts: each run's verdict and trace hash, for the test to hold against the same seeds run on
    one machine."""
    import subprocess

    import pyarrow.parquet as pq

    done = subprocess.run([str(Path(sys.executable).parent / "kraftlab"), "campaign", "hunt", *HUNT_SEEDS, "--out", str(out),
                           "--address", "auto", "--minimize-budget", "0"], capture_output=True, text=True)
    rows = pq.read_table(out / "results.parquet").to_pylist() if (out / "results.parquet").is_file() else []
    print("CAMPAIGN " + json.dumps({"exit": done.returncode, "output": (done.stdout + done.stderr)[-2000:],
                                    "verdicts": {r["run"]: [r["status"], r["signature"], r["stats.trace_hash"]] for r in rows}}),
          flush=True)


# A few held-out seeds of the `hunt` campaign (its runs take a few seconds each).
HUNT_SEEDS = ("--seeds", "3", "--first-seed", "100000")

if __name__ == "__main__" and sys.argv[1] == "hunt":
    hunt(Path(sys.argv[2]))


def kafka_client(out: Path) -> None:
    """A Kafka client on the host of a partition's leader, with kernel faults. The topic `solo` has
    one replica, so its leader cannot move: while its broker is isolated, the partition is served
    by that broker or by no one. The client is confluent-kafka in a Ray task placed on the leader's
    Ray node, i.e. a process in that host's namespaces, connecting from the host's address to the
    broker's listener on the node's own address: before the isolation its records are
    acknowledged; during it (the host's packet filter drops every packet to and from the node's
    address, also those that never leave the host) its produce requests time out, while Metadata
    from another broker still answers it (the kernel cuts the node, not the whole host); after the
    heal, once the broker leads again, it produces and reads back what it was told was written."""
    import socket
    import time

    import ray

    from actors.runtime.ray import adapter
    from workloads.drivers import ray_cluster
    from workloads.scenario.loading import validate

    adapter.connect("auto")

    @ray.remote(num_cpus=0)
    def client(action: str, servers: str, prefix: str = "", count: int = 0, timeout_ms: int = 0) -> dict:
        """produce COUNT records PREFIX0.., each with this message.timeout.ms; metadata; read."""
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

        where = {"ray_node": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname()}
        if action == "produce":
            outcomes: list = []
            producer = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                                 "message.timeout.ms": timeout_ms})
            for i in range(count):
                producer.produce("solo", f"{prefix}{i}".encode(), partition=0,
                                 on_delivery=lambda err, msg: outcomes.append([None if err is None else err.name(), msg.offset(),
                                                                              msg.value().decode()]))
            left = producer.flush(timeout_ms / 1000 + 30)
            return {**where, "outcomes": outcomes, "left": left}
        if action == "metadata":
            try:
                topics = Producer({"bootstrap.servers": servers}).list_topics(timeout=20).topics
                return {**where, "topics": sorted(topics)}
            except KafkaException as exc:
                return {**where, "error": str(exc)}
        # Read the partition from 0 to its end (its high watermark now).
        consumer = Consumer({"bootstrap.servers": servers, "group.id": "kernel-client", "enable.auto.commit": False})
        _, end = consumer.get_watermark_offsets(TopicPartition("solo", 0), timeout=30)
        consumer.assign([TopicPartition("solo", 0, 0)])
        read: list = []
        deadline = time.monotonic() + 120
        while (not read or read[-1][0] < end - 1) and time.monotonic() < deadline:
            read += [[m.offset(), m.value().decode()] for m in consumer.consume(100, 0.5) if m.error() is None]
        consumer.close()
        return {**where, "end": end, "read": read}

    scenario = validate({"name": "kernel-kafka-client", "runtime": "ray",
                         "cluster": {"brokers": 3, "controllers": 1, "listeners": ["kafka"]},
                         "topics": [{"name": "solo", "replication_factor": 1}]}, "on_cluster.py")
    cluster = ray_cluster(scenario, fault_backend="kernel", data_root=out / "data")

    def on(node_id: str, *args, **kwargs) -> dict:
        """Run the client on that Ray node, the cluster's history collected meanwhile."""
        ref = client.options(label_selector={adapter.NODE_LABEL: node_id}).remote(*args, **kwargs)
        deadline = time.monotonic() + 300
        while not ray.wait([ref], timeout=0)[0] and time.monotonic() < deadline:
            cluster.run_for(250)
        return ray.get(ref, timeout=30)

    answer: dict = {}
    try:
        assert cluster.run_until(lambda: cluster.view().partitions().get("solo-0") is not None
                                 and cluster.view().partitions()["solo-0"].leader is not None, 60_000)
        leader = cluster.view().partitions()["solo-0"].leader
        node = cluster.sim.nodes[f"b{leader}"].ray_node
        listeners = dict(cluster.kafka_listeners)
        answer.update(leader=leader, leader_node=node, listeners={b: list(a) for b, a in listeners.items()},
                      hosts={n["node_id"]: n["address"] for n in adapter.alive_nodes()})
        servers = cluster.bootstrap_servers
        other = ",".join(f"{h}:{p}" for b, (h, p) in sorted(listeners.items()) if b != leader)
        answer["before"] = on(node, "produce", servers, "before-", 10, 60_000)
        cluster.isolate(f"b{leader}")
        answer["during"] = on(node, "produce", servers, "during-", 5, 15_000)
        answer["during_metadata_from_others"] = on(node, "metadata", other)
        answer["leader_during"] = cluster.view().partitions()["solo-0"].leader
        cluster.heal(None)
        answer["leads_again"] = cluster.run_until(lambda: cluster.view().partitions()["solo-0"].leader == leader
                                                  and not cluster.view().brokers()[leader].fenced, 120_000)
        answer["after"] = on(node, "produce", servers, "after-", 10, 60_000)
        answer["read"] = on(node, "read", servers)
        cluster.refresh()
        answer["violations"] = sorted({v["invariant"] for v in cluster.violations()})
    except Exception as exc:  # noqa: BLE001 - reported with what was seen so far
        answer["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        cluster.close()
    print("KAFKA " + json.dumps(answer), flush=True)


if __name__ == "__main__" and sys.argv[1] == "kafka-client":
    kafka_client(Path(sys.argv[2]))
