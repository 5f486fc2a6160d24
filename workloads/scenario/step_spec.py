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
    """ListOffsets(latest) to the partition's current leader (addition to docs/reference): `expect` is
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


STEP_TYPES: dict[str, type[StepBase]] = {
    "produce": ProduceStep,
    "consume": ConsumeStep,
    "load": LoadStep,
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
