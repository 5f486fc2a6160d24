"""The steps of a scenario file (docs/reference/steps-and-conditions.md, "Steps"): each a one-key mapping, the key naming
the step. `Step` is the discriminated union of them all."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import (
    Discriminator,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .cluster_spec import KafkaConfig, TopicConfig, TopicSpec
from .condition_spec import Condition, NumberCond, WaitForCondition
from .names import NODE_REF_PATTERN, TOPIC_PATTERN, BrokerId, NodeRef, PartitionRef, Strict

# --- steps -----------------------------------------------------------------------------------

Acks = Literal["all", 1, 0, -1]


def kafka_idempotence(acks: Acks, idempotent: bool | None) -> bool:
    """Whether a producer is idempotent: `idempotent` if given, else Kafka's default since 3.0
    (enable.idempotence on with acks=all, off with 0 or 1)."""
    return acks in ("all", -1) if idempotent is None else idempotent


class ProduceArgs(Strict):
    topic: str = Field(description="the topic to write to")
    partition: NonNegativeInt = Field(0, description="the partition's index within the topic")
    count: PositiveInt | None = Field(None, description="how many records to write, with generated values; give `count` or `values`")
    values: list[str] | None = Field(None, description="the records' values, in order; give `count` or `values`")
    acks: Acks = Field(
        "all", description="the step's producer's acks: all (the same as -1), 1 or 0; Kafka's default all"
    )
    # enable.idempotence as for `load`. Off, a retry after an answer that never came back (a leader
    # that appended, then lost its leadership) writes the records twice.
    idempotent: bool | None = Field(
        None,
        description="enable.idempotence of the step's producer; absent: on with acks all, off with acks 0 or 1 "
        "(Kafka's default since 3.0); true needs acks all",
    )
    expect: Literal["acked", "failed", "any"] = Field(
        "any", description="acked: the step fails if a record fails; failed: if a record is acknowledged; any: either outcome"
    )
    timeout_ms: PositiveInt = Field(
        30_000, description="each record's delivery timeout: a record not acknowledged this long after the step starts fails"
    )

    @field_validator("idempotent")
    @classmethod
    def _idempotence_needs_acks_all(cls, v: bool | None, info: ValidationInfo) -> bool | None:
        return LoadArgs._idempotence_needs_acks_all(v, info)

    def idempotence(self) -> bool:
        return kafka_idempotence(self.acks, self.idempotent)

    @model_validator(mode="after")
    def _count_or_values(self) -> ProduceArgs:
        if (self.count is None) == (self.values is None):
            raise ValueError("give exactly one of `count` or `values`")
        if self.values is not None and not self.values:
            raise ValueError("`values` must not be empty")
        return self


class ConsumeArgs(Strict):
    topic: str = Field(description="the topic to read")
    partition: NonNegativeInt = Field(0, description="the partition's index within the topic")
    from_offset: NonNegativeInt = Field(0, alias="from", description="the offset to start reading at")
    expect_count: NonNegativeInt | None = Field(
        None, description="how many committed records the step must read from `from`, exactly"
    )
    expect_values: list[str] | None = Field(
        None, description="the values the step must read from `from`, exactly and in order"
    )
    timeout_ms: PositiveInt = Field(
        10_000, description="how long the step may read: until it has caught up with the leader's HWM and read the records "
        "expected, or this long"
    )


class LoadProducerConfig(Strict):
    """The load producers' settings under Kafka's producer config names. The buffer bounds what a
    producer holds (records waiting or in flight, in bytes): when it is full, the load generator's
    `send()` blocks, for at most `max.block.ms` (then that record fails, never written), and the
    records that come due meanwhile are not offered: they are counted as throttled."""

    buffer_memory: PositiveInt = Field(  # Kafka's default, 32 MiB
        33_554_432, alias="buffer.memory",
        description="the bytes of records waiting or in flight a producer may hold; a record counts its value plus 70 bytes",
    )
    max_block_ms: NonNegativeInt = Field(  # Kafka's default
        60_000, alias="max.block.ms",
        description="how long send() blocks on a full buffer; then that record fails (MAX_BLOCK_TIMEOUT), never written",
    )
    # Kafka's default is 120,000; kraftlab's 30,000 lets a run's records settle sooner. It counts
    # from when a record enters the buffer.
    delivery_timeout_ms: PositiveInt = Field(
        30_000, alias="delivery.timeout.ms",
        description="a record not acknowledged this long after it entered the buffer fails (Kafka's default is 120000)",
    )
    # Batching. linger.ms: how long a partition's records may wait for more to fill a batch (Kafka's
    # default is 5 since 4.0, 0 before; kraftlab's 0 because the load's 10 ms rounds already send
    # a round's records together). batch.size: a batch's bytes at most (Kafka's
    # default 16,384); absent, kraftlab's default of at most 1,000 records a batch.
    linger_ms: NonNegativeInt = Field(
        0, alias="linger.ms", description="how long a partition's records may wait to fill a batch before it is sent"
    )
    batch_size: PositiveInt | None = Field(
        None, alias="batch.size",
        description="a batch's bytes at most, each record counted as for buffer.memory; absent: at most 1,000 records a batch",
    )


class LoadArgs(Strict):
    producers: PositiveInt = Field(1, description="how many open-loop producers, sharing rate_per_s")
    consumers: NonNegativeInt = Field(0, description="how many consumers, each following every partition of the load from offset 0")
    rate_per_s: Annotated[float, Field(gt=0)] = Field(100.0, description="records per second offered, all producers together")
    message_bytes: PositiveInt = Field(100, description="each record's value size, in bytes")
    acks: Acks = Field("all", description="the load producers' acks: all (the same as -1), 1 or 0; Kafka's default all")
    topics: list[str] | None = Field(
        None, description="the topics whose partitions the load writes and reads; absent: every topic of the scenario's `topics`"
    )
    duration_ms: PositiveInt | None = Field(None, description="how long the producers produce; absent: until the end of the run")
    # enable.idempotence: absent = Kafka's default since 3.0, on with acks=all and off with acks 0
    # or 1 (`idempotence()` resolves it); true with acks 0 or 1 is refused, as Kafka refuses it.
    idempotent: bool | None = Field(
        None,
        description="enable.idempotence of the load producers; absent: on with acks all, off with acks 0 or 1 "
        "(Kafka's default since 3.0); true needs acks all",
    )

    @field_validator("idempotent")
    @classmethod
    def _idempotence_needs_acks_all(cls, v: bool | None, info: ValidationInfo) -> bool | None:
        acks = info.data.get("acks", "all")  # absent from `data` when acks itself was invalid
        if v and acks not in ("all", -1):
            raise ValueError(
                f"`idempotent: true` needs `acks: all` (got acks {acks}; Kafka: Must set acks to all in order to use the idempotent producer)"
            )
        return v

    config: LoadProducerConfig = Field(
        default_factory=LoadProducerConfig,
        description="the load producers' settings under Kafka's names: buffer.memory, max.block.ms, delivery.timeout.ms, "
        "linger.ms and batch.size",
    )

    def idempotence(self) -> bool:
        return kafka_idempotence(self.acks, self.idempotent)


class ListOffsetsArgs(Strict):
    """ListOffsets(latest) to the partition's current leader (a step of kraftlab's own): `expect` is
    `not_available` (the leader does not trust its HWM yet, §6.4.2), a number or a comparison."""

    partition: PartitionRef
    expect: Literal["not_available", "any"] | NumberCond = Field(
        "any", description="the answer required: not_available (the leader's HWM is below its LESO), any, or the offset "
        "(the leader's HWM) as a whole number or a comparison such as \">= 5\""
    )
    timeout_ms: PositiveInt = Field(5_000, description="how long to wait for the leader's answer; the step fails after it")


class CrashArgs(Strict):
    node: NodeRef
    mode: Literal["process", "os", "disk"] = Field(
        description="process: the process dies, the page cache survives; os: the host dies with its unflushed page "
        "cache; disk: the disk is replaced, every file lost"
    )


class FailLogDirArgs(Strict):
    """A broker's log directory goes offline (KIP-858) until the broker restarts; directory 0 holds
    the metadata log, so losing it halts the broker."""

    broker: BrokerId
    dir: NonNegativeInt = Field(description="the directory's number, 0..cluster.log_dirs - 1")


class LinkArgs(Strict):
    from_node: NodeRef = Field(alias="from")
    to_node: NodeRef = Field(alias="to")
    drop: Annotated[float, Field(ge=0, le=1)] = Field(0.0, description="the share of the link's messages lost, drawn per message (1 cuts the link)")
    delay_ms: NonNegativeFloat = Field(0.0, description="added to the latency of every message on the link")


# The kinds a generated fault (the `fault` step) may be: the campaign's fault kinds, a slow link
# being a `link` with no drops.
FaultStepKind = Literal["crash_os", "crash_process", "crash_disk", "isolate", "partition", "link"]
FAULT_STEP_KINDS: tuple[str, ...] = FaultStepKind.__args__  # type: ignore[attr-defined]
# The crashes that lose what a broker had not made durable (an OS crash, on page-cache storage: its
# unflushed page cache; a disk loss: everything): lossy unclean shutdowns, in protocol-facts.md's words.
LOSSY_CRASHES = ("crash_os", "crash_disk")


class FaultArgs(Strict):
    """One fault of a generated schedule (a campaign's `faults.swarm`): what the `crash`,
    `isolate`, `partition` and `link` steps do, with two differences. A selector that names nobody
    when the step runs (`partition-elr:t-0` while the ELR is empty) skips the fault, with a
    `fault_skipped` row in the history, instead of failing the run (the schedule aimed at a role
    that the run's course never produced), or, `armed_ms`, arms it until its role comes about
    (workloads/fault_steps.py). And the fault has a number, by which `undo` undoes it."""

    id: NonNegativeInt = Field(description="the fault's number in the schedule, named by `undo`")
    kind: FaultStepKind = Field(
        description="crash_os, crash_process, crash_disk (a broker's or voter's process, host or disk, as the crash "
        "step's modes), isolate, partition, link"
    )
    node: NodeRef | None = Field(None, description="crash_* and isolate: the node; link: the sending end")
    to: NodeRef | None = Field(None, description="link: the receiving end")
    groups: Annotated[list[Annotated[list[NodeRef], Field(min_length=1)]], Field(min_length=2)] | None = Field(
        None, description="partition: the groups, as the partition step's"
    )
    drop: Annotated[float, Field(ge=0, le=1)] = Field(0.0, description="link: the share of messages lost")
    delay_ms: NonNegativeFloat = Field(0.0, description="link: added to every message's latency")
    armed_ms: NonNegativeInt = Field(
        0, description="when a selector names nobody as the step runs (or a crash's node is down), the fault stays armed "
        "this long while the next steps go on, and strikes at the first moment its selectors name somebody; skipped if "
        "they never do (0: skipped at once)"
    )
    lossy_budget: NonNegativeInt | None = Field(
        None, description="crash_os and crash_disk of a broker: when this many such crashes of brokers that the run's fault "
        "steps made are outstanding, this one is a process crash (it loses nothing): the run stays within the protocol's "
        "tolerance, fewer than min.insync.replicas lossy unclean shutdowns at once. A crash is outstanding until its broker, "
        "running again, is back in the ISR of every partition it held when it crashed"
    )

    @model_validator(mode="after")
    def _what_the_kind_needs(self) -> FaultArgs:
        needs = {"partition": {"groups"}, "link": {"node", "to"}}.get(self.kind, {"node"})
        given = {k for k in ("node", "to", "groups") if getattr(self, k) is not None}
        if given != needs:
            raise ValueError(f"a {self.kind} fault takes {' and '.join(sorted(needs))}"
                             + (f", not {', '.join(sorted(given - needs))}" if given - needs else ""))
        if self.kind != "link" and (self.drop or self.delay_ms):
            raise ValueError("drop and delay_ms belong to a link fault")
        if self.lossy_budget is not None and self.kind not in LOSSY_CRASHES:
            raise ValueError(f"lossy_budget belongs to a {' or '.join(LOSSY_CRASHES)} fault")
        return self

    def crash_mode(self) -> str | None:
        return self.kind.removeprefix("crash_") if self.kind.startswith("crash_") else None


# The protocol states a `trigger` step waits for (docs/reference, steps): each names a state of
# the protocol, never a switch or a bug.
TriggerState = Literal["under_min_isr", "isr_leader_only", "leader_change", "controller_change", "broker_fenced"]
TRIGGER_STATES: tuple[str, ...] = TriggerState.__args__  # type: ignore[attr-defined]
PARTITION_TRIGGERS = ("under_min_isr", "isr_leader_only", "leader_change")


class TriggerArgs(Strict):
    """Wait until a state of the protocol comes about, at most `timeout_ms`, and go on either way
    (a `trigger` row says which): a generated schedule's next fault then follows the state, as
    FoundationDB's BUGGIFY sites and its workloads aim faults at what the cluster is doing."""

    state: TriggerState = Field(
        description="under_min_isr: the partition's ISR is smaller than its min.insync.replicas; isr_leader_only: the "
        "ISR is the leader alone; leader_change: the partition's leader epoch moves on from what it is when the step "
        "starts; controller_change: the quorum's epoch moves on; broker_fenced: a broker is fenced"
    )
    partition: PartitionRef | None = Field(None, description="the partition, for under_min_isr, isr_leader_only and leader_change")
    timeout_ms: PositiveInt = Field(description="how long to wait at most; then the step ends all the same")

    @model_validator(mode="after")
    def _partition_when_needed(self) -> TriggerArgs:
        if (self.state in PARTITION_TRIGGERS) != (self.partition is not None):
            raise ValueError(f"{self.state} " + ("needs `partition`" if self.state in PARTITION_TRIGGERS else "takes no `partition`"))
        return self


KafkaErrorName = Annotated[
    str,
    Field(pattern=r"^[A-Z][A-Z_]*$", description="Kafka's error name for the partition or resource (NONE: no error)"),
]


class AdminArgs(Strict):
    """An admin step's arguments: `expect_error` is the answer it must get (Kafka's error name, NONE
    for success); absent, any answer is accepted and recorded (the history's `admin_answer`)."""

    expect_error: KafkaErrorName | None = None


class ElectArgs(AdminArgs):
    partition: PartitionRef
    type: Literal["preferred", "unclean"] = Field(
        "preferred", description="preferred: make the first replica the leader; unclean: elect a leader for a leaderless "
        "partition, any unfenced replica when no clean one can lead"
    )


class ReassignArgs(AdminArgs):
    partition: PartitionRef
    replicas: Annotated[
        list[BrokerId], Field(min_length=1, description="the target replicas, in order: the first is the preferred leader")
    ]


class CancelReassignmentArgs(AdminArgs):
    partition: PartitionRef


class CreateTopicArgs(TopicSpec):
    """CreateTopics while the run goes on: a topic as in `topics`, and `expect_error`."""

    expect_error: KafkaErrorName | None = None


class DeleteTopicArgs(AdminArgs):
    name: Annotated[str, Field(pattern=TOPIC_PATTERN, description="the topic to delete")]


class CreatePartitionsArgs(AdminArgs):
    topic: Annotated[str, Field(pattern=TOPIC_PATTERN, description="the topic to add partitions to")]
    count: PositiveInt = Field(description="the number of partitions the topic grows to")
    assignment: dict[NonNegativeInt, list[BrokerId]] | None = Field(
        None, description="each new partition's index -> its replicas; absent: Kafka's placement"
    )


class AlterConfigArgs(AdminArgs):
    topic: str | None = Field(None, description="the topic whose config to change; give `topic` or `cluster`")
    cluster: Literal[True] | None = Field(None, description="true: change the cluster-wide config")
    config: dict[str, Any] = Field(
        description="the keys to set and their values, under Kafka's names: topic config for `topic`, broker config for `cluster`"
    )

    @field_validator("config")
    @classmethod
    def _known_config(cls, config: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """Unknown keys and bad values are errors here too (topic or cluster config names)."""
        model = TopicConfig if info.data.get("topic") is not None else KafkaConfig
        try:
            model.model_validate(config)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            what = "unknown config key" if first["type"] == "extra_forbidden" else first["msg"]
            raise ValueError(f"{key}: {what}") from None
        return config

    @model_validator(mode="after")
    def _one_target(self) -> AlterConfigArgs:
        if (self.topic is None) == (self.cluster is None):
            raise ValueError("give exactly one of `topic: NAME` or `cluster: true`")
        return self


class StepBase(Strict):
    def kind(self) -> str:
        (name,) = type(self).model_fields
        return name

    def args(self) -> Any:
        return getattr(self, self.kind())


class ProduceStep(StepBase):
    produce: ProduceArgs = Field(description="write records and wait for each one's outcome")


class ConsumeStep(StepBase):
    consume: ConsumeArgs = Field(description="read committed records from the partition's leader and check them")


class LoadStep(StepBase):
    load: LoadArgs = Field(description="start background open-loop producers and consumers")


class PauseLoadStep(StepBase):
    pause_load: PositiveInt = Field(
        description="the background load's producers offer no record for this many milliseconds, then go on at their "
        "rate (an idle period of the open-loop load; records already offered go on); the consumers go on reading"
    )


class ListOffsetsStep(StepBase):
    list_offsets: ListOffsetsArgs = Field(description="ask the partition's leader for its latest offset (ListOffsets)")


class CrashStep(StepBase):
    crash: CrashArgs = Field(description="kill a broker or controller: its process, its host or its disk")


class FailLogDirStep(StepBase):
    fail_log_dir: FailLogDirArgs = Field(description="take a broker's log directory offline (KIP-858)")


class RestartStep(StepBase):
    restart: NodeRef


class ShutdownArgs(Strict):
    node: NodeRef
    wait: bool = Field(True, description="false: start the controlled shutdown and go on at once")


class ShutdownStep(StepBase):
    """`shutdown: NODE` (waits until the node has stopped) or `shutdown: {node, wait: false}`."""

    shutdown: NodeRef | ShutdownArgs

    def target(self) -> ShutdownArgs:
        return self.shutdown if isinstance(self.shutdown, ShutdownArgs) else ShutdownArgs(node=self.shutdown)


class IsolateStep(StepBase):
    isolate: NodeRef


class PartitionStep(StepBase):
    partition: Annotated[
        list[Annotated[list[NodeRef], Field(min_length=1)]],
        Field(min_length=2, description="split the network into disjoint groups of nodes that only talk within their group; "
              "nodes in no group keep their links"),
    ]

    @field_validator("partition")
    @classmethod
    def _disjoint(cls, groups: list[list[str]]) -> list[list[str]]:
        seen: set[str] = set()
        for group in groups:
            for node in group:
                if node in seen:
                    raise ValueError(f"{node} is in more than one group")
                seen.add(node)
        return groups


class LinkStep(StepBase):
    link: LinkArgs = Field(description="drop or delay the messages of one one-way link")


class HealStep(StepBase):
    heal: Annotated[str, Field(pattern=r"^all$|" + NODE_REF_PATTERN[1:], description="all, or a node")]


class WaitStep(StepBase):
    wait: NonNegativeInt = Field(description="let this many milliseconds pass")


class WaitForStep(StepBase):
    wait_for: WaitForCondition = Field(description="wait until the condition holds; the step fails at timeout_ms")


class ExpectStep(StepBase):
    expect: Condition = Field(description="check the condition now; the step fails if it does not hold")


class ElectStep(StepBase):
    elect: ElectArgs = Field(description="elect a partition's leader (ElectLeaders)")


class ReassignStep(StepBase):
    reassign: ReassignArgs = Field(description="move a partition to new replicas (AlterPartitionReassignments)")


class AlterConfigStep(StepBase):
    alter_config: AlterConfigArgs = Field(description="change a topic's or the cluster's config (IncrementalAlterConfigs)")


class CancelReassignmentStep(StepBase):
    cancel_reassignment: CancelReassignmentArgs = Field(
        description="revert the partition's reassignment in progress (AlterPartitionReassignments without a target)"
    )


class CreateTopicStep(StepBase):
    create_topic: CreateTopicArgs = Field(description="create a topic while the run goes on (CreateTopics)")


class DeleteTopicStep(StepBase):
    """`delete_topic: NAME` or `delete_topic: {name, expect_error}`."""

    delete_topic: Annotated[str, Field(pattern=TOPIC_PATTERN)] | DeleteTopicArgs = Field(
        description="delete a topic (DeleteTopics): its name, or its name and expect_error"
    )

    def target(self) -> DeleteTopicArgs:
        return self.delete_topic if isinstance(self.delete_topic, DeleteTopicArgs) else DeleteTopicArgs(name=self.delete_topic)


class CreatePartitionsStep(StepBase):
    create_partitions: CreatePartitionsArgs = Field(description="add partitions to a topic (CreatePartitions)")


class FaultStep(StepBase):
    fault: FaultArgs = Field(description="a generated schedule's fault: skipped when its selector names nobody; undone by `undo`")


class UndoStep(StepBase):
    undo: NonNegativeInt | Literal["all"] = Field(
        description="undo the fault with this id, and no other: restart the node it crashed, end the isolation, link "
        "fault or partition it made (a `heal` row naming it: `isolate:b2`, `link:b1->b2`, `partition:b1,c1|b2,b3`); "
        "nothing if it was skipped; armed, it is disarmed. `all`: heal every network fault and restart every node a "
        "fault step crashed (armed faults stay armed for their span)"
    )


class TriggerStep(StepBase):
    trigger: TriggerArgs = Field(description="wait for a state of the protocol, at most timeout_ms, then go on either way")


STEP_TYPES: dict[str, type[StepBase]] = {
    "produce": ProduceStep,
    "consume": ConsumeStep,
    "load": LoadStep,
    "pause_load": PauseLoadStep,
    "list_offsets": ListOffsetsStep,
    "crash": CrashStep,
    "fail_log_dir": FailLogDirStep,
    "restart": RestartStep,
    "shutdown": ShutdownStep,
    "isolate": IsolateStep,
    "partition": PartitionStep,
    "link": LinkStep,
    "heal": HealStep,
    "wait": WaitStep,
    "wait_for": WaitForStep,
    "expect": ExpectStep,
    "elect": ElectStep,
    "reassign": ReassignStep,
    "alter_config": AlterConfigStep,
    "cancel_reassignment": CancelReassignmentStep,
    "create_topic": CreateTopicStep,
    "delete_topic": DeleteTopicStep,
    "create_partitions": CreatePartitionsStep,
    "fault": FaultStep,
    "undo": UndoStep,
    "trigger": TriggerStep,
}


def _step_tag(v: Any) -> str | None:
    if isinstance(v, dict):
        if len(v) == 1:
            (key,) = v
            return key if key in STEP_TYPES else None
        return None
    if isinstance(v, StepBase):
        return v.kind()
    return None


Step = Annotated[
    Union[tuple(Annotated[t, Tag(name)] for name, t in STEP_TYPES.items())],  # noqa: UP007
    Discriminator(
        _step_tag,
        custom_error_type="unknown_step",
        custom_error_message="expected a one-key mapping naming a step: " + ", ".join(STEP_TYPES),
    ),
]
