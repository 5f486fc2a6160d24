"""Cross-reference checks: what a schema alone cannot see (node names exist, topics exist, broker
ids are in range, assignments fit the replication factor). Each problem is `(key path, message)`."""

from __future__ import annotations

from collections.abc import Iterator

from .condition_spec import Condition
from .load_spec import conflicts as load_conflicts
from .names import is_client, split_partition_ref
from .schema import Scenario
from .step_spec import (
    AlterConfigStep,
    CancelReassignmentStep,
    CreatePartitionsStep,
    CreateTopicStep,
    ConsumeStep,
    CrashStep,
    DeleteTopicStep,
    FailLogDirStep,
    ElectStep,
    ExpectStep,
    FaultStep,
    HealStep,
    IsolateStep,
    LinkStep,
    ListOffsetsStep,
    LoadStep,
    PartitionStep,
    ProduceStep,
    ReassignStep,
    RestartStep,
    ShutdownStep,
    TriggerStep,
    UndoStep,
    WaitForStep,
)

Problem = tuple[str, str]


def check_references(sc: Scenario) -> list[Problem]:
    loads = [(i, step.load) for i, step in enumerate(sc.steps) if isinstance(step, LoadStep)]
    return list(_topics(sc)) + list(_steps(sc)) + list(load_conflicts(sc.load, loads))


def _topics(sc: Scenario) -> Iterator[Problem]:
    seen: set[str] = set()
    for i, t in enumerate(sc.topics):
        at = f"topics[{i}]"
        if t.name in seen:
            yield f"{at}.name", f"topic {t.name!r} is defined twice"
        seen.add(t.name)
        yield from _topic(sc, t, at)


def _topic(sc: Scenario, t, at: str) -> Iterator[Problem]:
    """A topic's replication factor and assignment (of `topics` or a `create_topic` step)."""
    brokers = sc.cluster.brokers
    rf = t.replication_factor or 0
    if rf > brokers:
        yield f"{at}.replication_factor", f"expected at most cluster.brokers ({brokers}), got {rf}"
    if t.assignment is not None:
        expected = set(range(t.partitions))
        if set(t.assignment) != expected:
            yield f"{at}.assignment", f"expected exactly the partitions 0..{t.partitions - 1}, got {sorted(t.assignment)}"
        for p, replicas in sorted(t.assignment.items()):
            if len(replicas) != rf:
                yield f"{at}.assignment.{p}", f"expected {rf} replicas (replication_factor), got {len(replicas)}"
            if len(set(replicas)) != len(replicas):
                yield f"{at}.assignment.{p}", f"a broker appears twice in {replicas}"
            for b in replicas:
                if b > brokers:
                    yield f"{at}.assignment.{p}", f"broker {b} does not exist (brokers are 1..{brokers})"


def _partition(sc: Scenario, ref: str, at: str) -> Iterator[Problem]:
    topic, index = split_partition_ref(ref)
    t = sc.topic(topic)
    if t is None:
        yield at, f"unknown topic {topic!r} (topics: {', '.join(x.name for x in sc.topics) or 'none'})"
    elif index >= t.partitions:
        yield at, f"topic {topic!r} has partitions 0..{t.partitions - 1}, not {index}"


def _load_clients(sc: Scenario) -> tuple[int, int]:
    """How many load producers and load consumers the scenario's load steps start in all."""
    loads = [step.load for step in sc.steps if isinstance(step, LoadStep)]
    return sum(a.producers for a in loads), sum(a.consumers for a in loads)


def _client(sc: Scenario, ref: str, at: str, network: bool) -> Iterator[Problem]:
    if not network:
        yield at, f"{ref} is a client: only network faults (isolate, partition, link, heal) may name one"
        return
    if ref.startswith("load-"):
        kind, number = ref.rsplit("-", 1)
        started = _load_clients(sc)[0 if kind == "load-producer" else 1]
        if int(number) > started:
            yield at, (f"unknown client {ref!r}: the load steps start {started} {kind.removeprefix('load-')}s"
                       + (f" ({kind}-1..{kind}-{started})" if started else ""))


def _node(sc: Scenario, ref: str, at: str, *, network: bool = False) -> Iterator[Problem]:
    """`network`: the step is a network fault, which may name a client."""
    if is_client(ref):
        yield from _client(sc, ref, at, network)
        return
    if ref.startswith("partition-"):
        partition = ref.split(":", 1)[1]
        problems = list(_partition(sc, partition, at))
        yield from problems
        t = sc.topic(split_partition_ref(partition)[0])
        if (not problems and ref.startswith("partition-follower:") and t is not None and t.replication_factor == 1
                and not any(len(target) > 1 for target in _reassign_targets(sc, partition))):
            yield at, f"{ref} can never name a node: {partition} has replication_factor 1 (no follower)"
        return
    if ref == "controller-follower" and sc.cluster.controllers == 1:
        yield at, "controller-follower can never name a node: cluster.controllers is 1 (no follower)"
        return
    if ref in ("controller-leader", "controller-follower", "fenced-broker", "all"):
        return
    kind, number = ref[0], int(ref[1:])
    limit = sc.cluster.brokers if kind == "b" else sc.cluster.controllers
    if not 1 <= number <= limit:
        yield at, f"unknown node {ref!r} (nodes: b1..b{sc.cluster.brokers}, c1..c{sc.cluster.controllers})"


def _broker(sc: Scenario, broker: int, at: str) -> Iterator[Problem]:
    if broker > sc.cluster.brokers:
        yield at, f"broker {broker} does not exist (brokers are 1..{sc.cluster.brokers})"


def _log_dir(sc: Scenario, log_dir: int, at: str) -> Iterator[Problem]:
    if log_dir >= sc.cluster.log_dirs:
        yield at, f"expected a log directory 0..{sc.cluster.log_dirs - 1} (cluster.log_dirs is {sc.cluster.log_dirs}), got {log_dir}"


def _ever_a_replica(sc: Scenario, ref: str, broker: int, at: str) -> Iterator[Problem]:
    """A replica condition on a broker that the partition's explicit assignment does not hold and
    no reassign step adds could never hold. (With Kafka's default placement the replicas depend
    on which brokers are up when the topic is created: not checked.)"""
    topic, index = split_partition_ref(ref)
    t = sc.topic(topic)
    if t is None or t.assignment is None or index not in t.assignment or broker > sc.cluster.brokers:
        return
    if broker not in t.assignment[index] and not any(broker in target for target in _reassign_targets(sc, ref)):
        yield at, f"broker {broker} is never a replica of {ref} (its assignment is {t.assignment[index]} and no reassign step adds it)"


def _reassign_targets(sc: Scenario, partition: str) -> list[list[int]]:
    """The replica lists the scenario's `reassign` steps give `partition` (a topic-partition ref)."""
    return [step.reassign.replicas for step in sc.steps if isinstance(step, ReassignStep) and step.reassign.partition == partition]


def _topic_partition(sc: Scenario, topic: str, partition: int, at: str) -> Iterator[Problem]:
    yield from _partition(sc, f"{topic}-{partition}", at)


def _condition(sc: Scenario, c: Condition, at: str) -> Iterator[Problem]:
    if c.partition is not None and "exists" not in c.model_fields_set:  # `exists` may ask about any partition
        yield from _partition(sc, c.partition, f"{at}.partition")
    if c.replica is not None:
        yield from _partition(sc, c.replica.partition, f"{at}.replica.partition")
        yield from _broker(sc, c.replica.broker, f"{at}.replica.broker")
        yield from _ever_a_replica(sc, c.replica.partition, c.replica.broker, f"{at}.replica.broker")
    if c.broker is not None:
        yield from _broker(sc, c.broker, f"{at}.broker")
    for log_dir in c.offline_log_dirs or []:
        yield from _log_dir(sc, log_dir, f"{at}.offline_log_dirs")
    if isinstance(c.dir, int):
        yield from _log_dir(sc, c.dir, f"{at}.dir")
    for key in ("replicas", "isr", "elr", "last_known_elr"):
        for b in getattr(c, key) or []:
            yield from _broker(sc, b, f"{at}.{key}")
    for voter in c.states or {}:
        if voter > sc.cluster.controllers:
            yield f"{at}.states", f"voter {voter} does not exist (voters are 1..{sc.cluster.controllers})"
    if c.quorum is not None and isinstance(c.leader, int) and c.leader > sc.cluster.controllers:
        yield f"{at}.leader", f"voter {c.leader} does not exist (voters are 1..{sc.cluster.controllers})"
    if c.partition is not None and isinstance(c.leader, int) and not isinstance(c.leader, bool):
        yield from _broker(sc, c.leader, f"{at}.leader")


def _steps(sc: Scenario) -> Iterator[Problem]:
    faults: set[int] = set()  # the `fault` steps' ids so far
    for i, step in enumerate(sc.steps):
        at = f"steps[{i}].{step.kind()}"
        match step:
            case FaultStep(fault=a):
                if a.id in faults:
                    yield f"{at}.id", f"fault {a.id} is defined twice"
                faults.add(a.id)
                network = a.crash_mode() is None
                for key, ref in (("node", a.node), ("to", a.to)):
                    if ref is not None:
                        yield from _node(sc, ref, f"{at}.{key}", network=network)
                for g, group in enumerate(a.groups or []):
                    for j, n in enumerate(group):
                        yield from _node(sc, n, f"{at}.groups[{g}][{j}]", network=True)
            case UndoStep(undo=n) if n != "all" and n not in faults:
                yield at, f"no fault step before this one has id {n}"
            case TriggerStep(trigger=a) if a.partition is not None:
                yield from _partition(sc, a.partition, f"{at}.partition")
            case ProduceStep(produce=a) | ConsumeStep(consume=a):
                yield from _topic_partition(sc, a.topic, a.partition, at)
            case LoadStep(load=a):
                for t in a.topics or []:
                    if sc.topic(t) is None:
                        yield f"{at}.topics", f"unknown topic {t!r}"
                if a.topics is None and not sc.topics:
                    yield at, "a load needs at least one topic"
            case CrashStep(crash=a):
                yield from _node(sc, a.node, f"{at}.node")
            case FailLogDirStep(fail_log_dir=a):
                yield from _broker(sc, a.broker, f"{at}.broker")
                yield from _log_dir(sc, a.dir, f"{at}.dir")
            case RestartStep(restart=n):
                yield from _node(sc, n, at)
            case ShutdownStep():
                yield from _node(sc, step.target().node, at)
            case IsolateStep(isolate=n) | HealStep(heal=n):
                yield from _node(sc, n, at, network=True)
            case PartitionStep(partition=groups):
                for g, group in enumerate(groups):
                    for j, n in enumerate(group):
                        yield from _node(sc, n, f"{at}[{g}][{j}]", network=True)
            case LinkStep(link=a):
                yield from _node(sc, a.from_node, f"{at}.from", network=True)
                yield from _node(sc, a.to_node, f"{at}.to", network=True)
            case WaitForStep(wait_for=c) | ExpectStep(expect=c):
                yield from _condition(sc, c, at)
            case ListOffsetsStep(list_offsets=a):
                yield from _partition(sc, a.partition, f"{at}.partition")
            # An admin step that expects an error may name what does not exist, or an invalid
            # assignment: that is what it tests (docs/reference, admin steps).
            case ElectStep(elect=a) | CancelReassignmentStep(cancel_reassignment=a) if a.expect_error is None:
                yield from _partition(sc, a.partition, f"{at}.partition")
            case ReassignStep(reassign=a) if a.expect_error is None:
                yield from _partition(sc, a.partition, f"{at}.partition")
                for b in a.replicas:
                    yield from _broker(sc, b, f"{at}.replicas")
                if len(set(a.replicas)) != len(a.replicas):
                    yield f"{at}.replicas", f"a broker appears twice in {a.replicas}"
            case CreateTopicStep(create_topic=a) if a.expect_error is None:
                yield from _topic(sc, a, at)
            case DeleteTopicStep() if step.target().expect_error is None and sc.topic(step.target().name) is None:
                yield at, f"unknown topic {step.target().name!r}"
            case CreatePartitionsStep(create_partitions=a) if a.expect_error is None:
                t = sc.topic(a.topic)
                if t is None:
                    yield f"{at}.topic", f"unknown topic {a.topic!r}"
                for p, replicas in sorted((a.assignment or {}).items()):
                    for b in replicas:
                        yield from _broker(sc, b, f"{at}.assignment.{p}")
            case AlterConfigStep(alter_config=a) if a.expect_error is None:
                if a.topic is not None and sc.topic(a.topic) is None:
                    yield f"{at}.topic", f"unknown topic {a.topic!r}"
