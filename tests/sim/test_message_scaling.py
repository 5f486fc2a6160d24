"""Messages scale with brokers, not partitions (issue 12, item 5): under the same load, a topic
of 8 times as many partitions costs the producer and the brokers about as many produce and fetch
messages, because a follower's fetch carries every partition it follows on a leader and a
producer's batches for one broker (and that broker's answers) travel in one message."""

from collections import Counter

from workloads.drivers import sim_cluster
from workloads.scenario.loading import validate
from workloads.scenario.step_spec import LoadArgs
from workloads.steps import protocol_command


def messages_per_kind(partitions: int) -> Counter:
    cluster = sim_cluster(validate({
        "name": f"scaling-{partitions}",
        "cluster": {"brokers": 3, "controllers": 1, "config": {"min.insync.replicas": 2}},
        "topics": [{"name": "t", "partitions": partitions, "replication_factor": 3}],
    }, "test_message_scaling.py"))
    sim = cluster.sim
    counts: Counter = Counter()
    transmit = sim.transmit

    def counting(env):
        counts[type(env.payload).__name__] += 1
        transmit(env)

    sim.transmit = counting
    cluster.clients.load(protocol_command("load", LoadArgs(producers=1, consumers=0, rate_per_s=2000, message_bytes=100, acks="all")), {"t": partitions})
    cluster.run_for(3_000)
    assert cluster.view().acked() > 4_000  # the load ran
    return counts


def produce_and_fetch(counts: Counter) -> int:
    return sum(n for kind, n in counts.items() if kind.startswith(("Produce", "Fetch")))


def test_eight_times_the_partitions_cost_about_the_same_number_of_messages():
    few, many = messages_per_kind(4), messages_per_kind(32)
    assert many["ProduceRequests"] > 0 and many["ProduceResponses"] > 0  # batches to one broker travel together
    assert produce_and_fetch(many) < 2 * produce_and_fetch(few), (few, many)  # 3.4x without
