"""The scenario file, exactly as contract.md defines it, as pydantic models.

Validation is strict: an unknown key, a wrong type (no silent "3" -> 3 coercion) or a bad value is
an error naming the key path. Cross-references (node names, topics, broker ids) are checked by
`Scenario.check_references` once the whole file has parsed. `Scenario.model_json_schema()` is the
published JSON Schema (workloads/scenario.schema.json) for editors.

Additions beyond contract.md (documented in the README): `cluster.network` (latency model),
`cluster.disk` (fsync latency and background flush), `consume.timeout_ms`, `produce.key`, and the
`consumed` history counter.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    Tag,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from observability.checks.invariants import DISRUPTION_NAMES, INVARIANT_NAMES


class Strict(BaseModel):
    """Unknown keys are errors; values are not coerced between types."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)


# --- names and references --------------------------------------------------------------------

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"  # Kafka's legal topic characters
PARTITION_REF_PATTERN = r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<index>\d+)$"

NODE_SELECTORS = ("controller-leader", "controller-follower")
PARTITION_SELECTORS = ("partition-leader", "partition-follower")
NODE_REF_PATTERN = r"^(b\d+|c\d+|controller-leader|controller-follower|partition-(leader|follower):[A-Za-z0-9._-]+-\d+)$"

NodeRef = Annotated[
    str,
    Field(
        pattern=NODE_REF_PATTERN,
        description="a node name (b2, c1) or a selector resolved when the step runs: controller-leader, "
        "controller-follower, partition-leader:t-0, partition-follower:t-0",
    ),
]
PartitionRef = Annotated[str, Field(pattern=PARTITION_REF_PATTERN, description="topic-partition, e.g. t-0")]
BrokerId = Annotated[int, Field(ge=1, description="a broker id, 1..cluster.brokers")]


def split_partition_ref(ref: str) -> tuple[str, int]:
    m = re.match(PARTITION_REF_PATTERN, ref)
    if m is None:
        raise ValueError(f"{ref!r} is not a partition reference like t-0")
    return m["topic"], int(m["index"])


# --- cluster ---------------------------------------------------------------------------------

StorageModeName = Literal["fsync", "page_cache", "process_buffer"]
RecoveryStrategy = Literal["aggressive", "proactive", "balanced", "none", "manual", "last_known_leader"]


class KafkaConfig(Strict):
    """Broker and controller settings under their real Kafka names (defaults: protocol-facts.md)."""

    min_insync_replicas: PositiveInt = Field(1, alias="min.insync.replicas")
    eligible_leader_replicas_enable: bool = Field(True, alias="eligible.leader.replicas.enable")
    unclean_leader_election_enable: bool = Field(False, alias="unclean.leader.election.enable")
    unclean_recovery_strategy: RecoveryStrategy = Field("balanced", alias="unclean.recovery.strategy")
    # Kafka's internal config (ReplicationConfigs, default 5 minutes): how often the active
    # controller elects leaders for leaderless partitions of topics that allow unclean elections.
    unclean_leader_election_interval_ms: PositiveInt = Field(300_000, alias="unclean.leader.election.interval.ms")
    replica_lag_time_max_ms: PositiveInt = Field(30_000, alias="replica.lag.time.max.ms")
    replica_fetch_wait_max_ms: PositiveInt = Field(500, alias="replica.fetch.wait.max.ms")
    # How long a follower waits for a fetch's answer before it sends another (Kafka: 30 s, and at
    # least replica.fetch.wait.max.ms). None is kraftlab's default, the fetch's wait + 2 s: a lost
    # connection is noticed about as soon as a closed TCP connection would be, and a healed
    # partition resumes replication within seconds, as TCP's retransmission does.
    replica_socket_timeout_ms: PositiveInt | None = Field(None, alias="replica.socket.timeout.ms")
    broker_heartbeat_interval_ms: PositiveInt = Field(2_000, alias="broker.heartbeat.interval.ms")
    broker_session_timeout_ms: PositiveInt = Field(9_000, alias="broker.session.timeout.ms")
    controller_quorum_election_timeout_ms: PositiveInt = Field(1_000, alias="controller.quorum.election.timeout.ms")
    controller_quorum_fetch_timeout_ms: PositiveInt = Field(2_000, alias="controller.quorum.fetch.timeout.ms")
    controller_quorum_election_backoff_max_ms: PositiveInt = Field(
        1_000, alias="controller.quorum.election.backoff.max.ms"
    )
    controller_quorum_append_linger_ms: NonNegativeInt = Field(25, alias="controller.quorum.append.linger.ms")
    # None stands for Kafka's defaults: Long.MAX messages, and no flush timer (the OS writes back).
    log_flush_interval_messages: PositiveInt | None = Field(None, alias="log.flush.interval.messages")
    log_flush_interval_ms: PositiveInt | None = Field(None, alias="log.flush.interval.ms")
    # Segment files roll at this size (Kafka: 1 GiB). Any positive size is accepted (Kafka 4 asks
    # for at least 1 MiB) so that scenarios can roll segments with a handful of records.
    log_segment_bytes: PositiveInt = Field(1 << 30, alias="log.segment.bytes")

    @model_validator(mode="after")
    def _socket_timeout_covers_the_fetch_wait(self) -> "KafkaConfig":
        # Kafka's own check (KafkaConfig: "replica.socket.timeout.ms should always be at least
        # replica.fetch.wait.max.ms"): a shorter timeout gives up on every long-poll fetch.
        timeout = self.replica_socket_timeout_ms
        if timeout is not None and timeout < self.replica_fetch_wait_max_ms:
            raise ValueError(f"replica.socket.timeout.ms ({timeout}) must be at least replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms})")
        return self


class TopicConfig(Strict):
    """Topic-level overrides (Kafka's topic config names)."""

    min_insync_replicas: PositiveInt | None = Field(None, alias="min.insync.replicas")
    unclean_leader_election_enable: bool | None = Field(None, alias="unclean.leader.election.enable")
    flush_messages: PositiveInt | None = Field(None, alias="flush.messages")
    flush_ms: PositiveInt | None = Field(None, alias="flush.ms")
    segment_bytes: PositiveInt | None = Field(None, alias="segment.bytes")

    @field_validator("flush_messages", "flush_ms")
    @classmethod
    def _flush_is_per_broker(cls, value: int | None) -> int | None:
        # A broker flushes all of its dirty files at once (one Flush), so a per-topic interval
        # cannot be honoured; refusing it beats silently ignoring it.
        if value is not None:
            raise ValueError("per-topic flush intervals are not supported; set cluster.config log.flush.interval.messages / log.flush.interval.ms")
        return value


class ProtocolSwitches(Strict):
    """Safety mechanisms, all on by default (today's Kafka); each can be switched off to reproduce
    the bug it fixes (DESIGN.md, "Protocol variants")."""

    elr: bool = True
    maximal_isr: bool = True
    strict_min_isr: bool = True
    broker_epoch_in_alter_partition: bool = True
    leader_epoch_truncation: bool = True
    prevote: bool = True
    check_quorum: bool = True
    raft_fsync: bool = True


class LatencySpec(Strict):
    kind: Literal["constant", "uniform", "exponential"] = "uniform"
    low_ms: NonNegativeFloat = 0.5
    high_ms: NonNegativeFloat = 2.0
    mean_ms: Annotated[float, Field(gt=0)] = 1.0

    @model_validator(mode="after")
    def _ordered(self) -> LatencySpec:
        if self.kind == "uniform" and self.high_ms < self.low_ms:
            raise ValueError(f"high_ms ({self.high_ms}) must be >= low_ms ({self.low_ms})")
        return self


class NetworkSpec(Strict):
    """Simulator network (addition to contract.md): one-way message latency."""

    latency: LatencySpec = LatencySpec()


class DiskSpec(Strict):
    """Simulator disks (addition to contract.md)."""

    fsync_latency: LatencySpec = LatencySpec(kind="uniform", low_ms=0.5, high_ms=2.0)
    background_flush_interval_ms: Annotated[float, Field(gt=0)] = 5_000.0
    dirty_expire_ms: NonNegativeFloat = 30_000.0


class ClusterSpec(Strict):
    brokers: PositiveInt = 3
    controllers: PositiveInt = 3
    racks: PositiveInt | None = None
    storage: StorageModeName = "page_cache"
    config: KafkaConfig = KafkaConfig()
    protocol: ProtocolSwitches = ProtocolSwitches()
    network: NetworkSpec = NetworkSpec()
    disk: DiskSpec = DiskSpec()

    @model_validator(mode="after")
    def _one_elr_switch(self) -> ClusterSpec:
        """`protocol.elr` and `eligible.leader.replicas.enable` are the same switch (contract.md):
        turning either off turns ELR off; setting both, differently, is an error."""
        cfg_set = "eligible_leader_replicas_enable" in self.config.model_fields_set
        proto_set = "elr" in self.protocol.model_fields_set
        cfg, proto = self.config.eligible_leader_replicas_enable, self.protocol.elr
        if cfg_set and proto_set and cfg != proto:
            raise ValueError(
                f"protocol.elr ({proto}) and config.eligible.leader.replicas.enable ({cfg}) are the same "
                "switch and must agree"
            )
        enabled = cfg and proto
        if enabled != cfg or enabled != proto:
            object.__setattr__(self, "config", self.config.model_copy(update={"eligible_leader_replicas_enable": enabled}))
            object.__setattr__(self, "protocol", self.protocol.model_copy(update={"elr": enabled}))
        return self

    def node_names(self) -> list[str]:
        return [f"b{i}" for i in range(1, self.brokers + 1)] + [f"c{i}" for i in range(1, self.controllers + 1)]


class TopicSpec(Strict):
    name: Annotated[str, Field(pattern=TOPIC_PATTERN)]
    partitions: PositiveInt = 1
    replication_factor: PositiveInt | None = Field(
        None, description="default: min(3, cluster.brokers)"
    )
    assignment: dict[NonNegativeInt, list[BrokerId]] | None = None
    config: TopicConfig = TopicConfig()


# --- conditions ------------------------------------------------------------------------------

_COMPARISON = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*(-?\d+|null)\s*$")


class Comparison(BaseModel):
    """A number condition written as a string: ">= 1", "< 3", "!= 0", "!= null"."""

    model_config = ConfigDict(frozen=True)
    op: Literal["==", "!=", ">=", "<=", ">", "<"]
    value: int | None

    def holds(self, actual: Any) -> bool:
        if self.value is None:
            if self.op == "==":
                return actual is None
            if self.op == "!=":
                return actual is not None
            return False
        if actual is None or isinstance(actual, bool) or not isinstance(actual, int | float):
            return False
        return {
            "==": actual == self.value,
            "!=": actual != self.value,
            ">=": actual >= self.value,
            "<=": actual <= self.value,
            ">": actual > self.value,
            "<": actual < self.value,
        }[self.op]

    def __str__(self) -> str:
        return f"{self.op} {'null' if self.value is None else self.value}"

    @model_serializer
    def _as_written(self) -> str:
        return str(self)


def _number_or_comparison(nullable: bool):
    def parse(v: Any) -> Any:
        if v is None and nullable:
            return None
        if isinstance(v, bool) or (v is None):
            raise ValueError(f"expected a whole number{' or null' if nullable else ''} or a comparison like \">= 1\"")
        if isinstance(v, int):
            return v
        if isinstance(v, str):
            m = _COMPARISON.match(v)
            if m is None:
                raise ValueError(f"expected a comparison like \">= 1\" or \"!= null\", got {v!r}")
            op, raw = m.groups()
            if raw == "null" and op not in ("==", "!="):
                raise ValueError(f"null can only be compared with == or != (got {v!r})")
            return Comparison(op=op, value=None if raw == "null" else int(raw))
        raise ValueError(f"expected a whole number or a comparison like \">= 1\", got {type(v).__name__}")

    schema: dict[str, Any] = {
        "anyOf": [{"type": "integer"}, {"type": "string", "pattern": _COMPARISON.pattern}]
        + ([{"type": "null"}] if nullable else [])
    }
    return Annotated[Any, BeforeValidator(parse), WithJsonSchema(schema)]


NumberCond = _number_or_comparison(nullable=False)
NullableNumberCond = _number_or_comparison(nullable=True)
BrokerSet = list[BrokerId]
QuorumStateName = Literal["unattached", "prospective", "candidate", "leader", "follower", "resigned"]


class ReplicaSubject(Strict):
    partition: PartitionRef
    broker: BrokerId


# Which attribute keys each subject allows (contract.md, "Conditions").
PARTITION_ATTRS = (
    "leader", "leader_epoch", "partition_epoch", "replicas", "isr", "elr", "last_known_elr", "hwm", "offline", "under_min_isr",
)
REPLICA_ATTRS = ("leo", "hwm", "in_sync")
BROKER_ATTRS = ("fenced", "epoch", "alive")
QUORUM_ATTRS = ("leader", "epoch", "states")
HISTORY_COUNTERS = (
    "acked", "failed", "acked_lost", "consumed", "elections_clean", "elections_unclean", "elections_elr",
    "quorum_elections",
)
SUBJECTS = {"partition": PARTITION_ATTRS, "replica": REPLICA_ATTRS, "broker": BROKER_ATTRS, "quorum": QUORUM_ATTRS}


class Condition(Strict):
    """Keys that must all hold. At most one subject (partition, replica, broker, quorum); its
    attributes; and any history counters."""

    partition: PartitionRef | None = None
    replica: ReplicaSubject | None = None
    broker: BrokerId | None = None
    quorum: Literal[True] | None = None

    leader: NullableNumberCond = None
    leader_epoch: NumberCond = None
    partition_epoch: NumberCond = None
    replicas: BrokerSet | None = None
    isr: BrokerSet | None = None
    elr: BrokerSet | None = None
    last_known_elr: BrokerSet | None = None
    hwm: NumberCond = None
    offline: bool | None = None
    under_min_isr: bool | None = None
    leo: NumberCond = None
    in_sync: bool | None = None
    fenced: bool | None = None
    epoch: NumberCond = None
    alive: bool | None = None
    states: dict[PositiveInt, QuorumStateName] | None = None

    acked: NumberCond = None
    failed: NumberCond = None
    acked_lost: NumberCond = None
    consumed: NumberCond = None
    elections_clean: NumberCond = None
    elections_unclean: NumberCond = None
    elections_elr: NumberCond = None  # of the clean elections, those from the ELR
    quorum_elections: NumberCond = None

    @model_validator(mode="after")
    def _attributes_match_subject(self) -> Condition:
        given = self.model_fields_set - {"timeout_ms"}
        subjects = [s for s in SUBJECTS if s in given]
        if len(subjects) > 1:
            raise ValueError(f"a condition has at most one subject, got {', '.join(subjects)}")
        subject = subjects[0] if subjects else None
        allowed = set(SUBJECTS[subject]) if subject else set()
        for key in sorted(given - set(SUBJECTS) - set(HISTORY_COUNTERS)):
            if key not in allowed:
                owners = [s for s, attrs in SUBJECTS.items() if key in attrs]
                where = " or ".join(f"`{o}`" for o in owners)
                raise ValueError(f"`{key}` needs a {where} subject in the same condition")
        if not given:
            raise ValueError("a condition needs at least one key")
        if subject and not (given - {subject}):
            raise ValueError(f"the `{subject}` subject needs at least one attribute to check ({', '.join(SUBJECTS[subject])})")
        # `leader: null` is meaningful (no leader), so an explicit None must be kept apart from "absent".
        return self

    @model_serializer(mode="wrap")
    def _only_given_keys(self, handler: Any) -> dict[str, Any]:
        # `leader: null` means "no leader": a key the file did not give must not be written back.
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set or k == "timeout_ms"}

    def checks(self) -> dict[str, Any]:
        """The attribute and counter checks, by key (subject keys excluded)."""
        return {k: getattr(self, k) for k in self.model_fields_set if k not in SUBJECTS}


class WaitForCondition(Condition):
    timeout_ms: PositiveInt = 30_000

    def checks(self) -> dict[str, Any]:
        return {k: v for k, v in super().checks().items() if k != "timeout_ms"}


# --- steps -----------------------------------------------------------------------------------

Acks = Literal["all", 1, 0, -1]


def kafka_idempotence(acks: Acks, idempotent: bool | None) -> bool:
    """Whether a producer is idempotent: `idempotent` if given, else Kafka's default since 3.0
    (enable.idempotence on with acks=all, off with 0 or 1)."""
    return acks in ("all", -1) if idempotent is None else idempotent


class ProduceArgs(Strict):
    topic: str
    partition: NonNegativeInt = 0
    count: PositiveInt | None = None
    values: list[str] | None = None
    acks: Acks = "all"
    # enable.idempotence as for `load`. Off, a retry after an answer that never came back (a leader
    # that appended, then lost its leadership) writes the records twice.
    idempotent: bool | None = Field(
        None,
        description="enable.idempotence of the step's producer; absent: on with acks all, off with acks 0 or 1 "
        "(Kafka's default since 3.0); true needs acks all",
    )
    expect: Literal["acked", "failed", "any"] = "any"
    timeout_ms: PositiveInt = 30_000

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
    topic: str
    partition: NonNegativeInt = 0
    from_offset: NonNegativeInt = Field(0, alias="from")
    expect_count: NonNegativeInt | None = None
    expect_values: list[str] | None = None
    timeout_ms: PositiveInt = 10_000


class LoadProducerConfig(Strict):
    """The load producers' settings under Kafka's producer config names. The buffer bounds what a
    producer holds (records waiting or in flight, in bytes): when it is full, the load generator's
    `send()` blocks, for at most `max.block.ms` (then that record fails, never written), and the
    records that come due meanwhile are not offered: they are counted as throttled."""

    buffer_memory: PositiveInt = Field(33_554_432, alias="buffer.memory")  # Kafka's default, 32 MiB
    max_block_ms: NonNegativeInt = Field(60_000, alias="max.block.ms")  # Kafka's default
    # Kafka's default is 120,000; kraftlab's load has used 30,000 since its first version (a run's
    # records settle sooner); it counts from when a record enters the buffer.
    delivery_timeout_ms: PositiveInt = Field(30_000, alias="delivery.timeout.ms")
    # Batching. linger.ms: how long a partition's records may wait for more to fill a batch (Kafka's
    # default is 5 since 4.0, 0 before; kraftlab's 0 keeps the load's 10 ms rounds as they were:
    # a round's records already leave together). batch.size: a batch's bytes at most (Kafka's
    # default 16,384); absent, kraftlab's default of at most 1,000 records a batch.
    linger_ms: NonNegativeInt = Field(0, alias="linger.ms")
    batch_size: PositiveInt | None = Field(None, alias="batch.size")


class LoadArgs(Strict):
    producers: PositiveInt = 1
    consumers: NonNegativeInt = 0
    rate_per_s: Annotated[float, Field(gt=0)] = 100.0
    message_bytes: PositiveInt = 100
    acks: Acks = "all"
    topics: list[str] | None = None
    duration_ms: PositiveInt | None = None
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
        description="the load producers' buffer.memory (bytes), max.block.ms and delivery.timeout.ms",
    )

    def idempotence(self) -> bool:
        return kafka_idempotence(self.acks, self.idempotent)


class ListOffsetsArgs(Strict):
    """ListOffsets(latest) to the partition's current leader (addition to contract.md): `expect` is
    `not_available` (the leader does not trust its HWM yet, §6.4.2), a number or a comparison."""

    partition: PartitionRef
    expect: Literal["not_available", "any"] | NumberCond = "any"
    timeout_ms: PositiveInt = 5_000


class CrashArgs(Strict):
    node: NodeRef
    mode: Literal["process", "os", "disk"]


class LinkArgs(Strict):
    from_node: NodeRef = Field(alias="from")
    to_node: NodeRef = Field(alias="to")
    drop: Annotated[float, Field(ge=0, le=1)] = 0.0
    delay_ms: NonNegativeFloat = 0.0


class ElectArgs(Strict):
    partition: PartitionRef
    type: Literal["preferred", "unclean"] = "preferred"


class ReassignArgs(Strict):
    partition: PartitionRef
    replicas: Annotated[list[BrokerId], Field(min_length=1)]


class AlterConfigArgs(Strict):
    topic: str | None = None
    cluster: Literal[True] | None = None
    config: dict[str, Any]

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
    produce: ProduceArgs


class ConsumeStep(StepBase):
    consume: ConsumeArgs


class LoadStep(StepBase):
    load: LoadArgs


class ListOffsetsStep(StepBase):
    list_offsets: ListOffsetsArgs


class CrashStep(StepBase):
    crash: CrashArgs


class RestartStep(StepBase):
    restart: NodeRef


class ShutdownStep(StepBase):
    shutdown: NodeRef


class IsolateStep(StepBase):
    isolate: NodeRef


class PartitionStep(StepBase):
    partition: Annotated[list[Annotated[list[NodeRef], Field(min_length=1)]], Field(min_length=2)]

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
    link: LinkArgs


class HealStep(StepBase):
    heal: Annotated[str, Field(pattern=r"^all$|" + NODE_REF_PATTERN[1:], description="all, or a node")]


class WaitStep(StepBase):
    wait: NonNegativeInt


class WaitForStep(StepBase):
    wait_for: WaitForCondition


class ExpectStep(StepBase):
    expect: Condition


class ElectStep(StepBase):
    elect: ElectArgs


class ReassignStep(StepBase):
    reassign: ReassignArgs


class AlterConfigStep(StepBase):
    alter_config: AlterConfigArgs


STEP_TYPES: dict[str, type[StepBase]] = {
    "produce": ProduceStep,
    "consume": ConsumeStep,
    "load": LoadStep,
    "list_offsets": ListOffsetsStep,
    "crash": CrashStep,
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


# --- the scenario ----------------------------------------------------------------------------


class Scenario(Strict):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=200)]
    description: str = ""
    runtime: Literal["sim", "ray"] = "sim"
    seed: NonNegativeInt = 0
    cluster: ClusterSpec = ClusterSpec()
    topics: list[TopicSpec] = []
    steps: list[Step] = []
    expect_violations: list[str] = []
    # kraftlab's: also check the quorum's liveness (EpochInflation, StaleLeader) after every event,
    # reported as violations: what turning `prevote` or `check_quorum` off shows under faults.
    disruption_checks: bool = False

    @field_validator("expect_violations")
    @classmethod
    def _known_invariants(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in INVARIANT_NAMES | DISRUPTION_NAMES:
                raise ValueError(f"unknown invariant {name!r} (the names of reference/protocol-facts.md: {', '.join(sorted(INVARIANT_NAMES))}; "
                                 f"with disruption_checks: {', '.join(sorted(DISRUPTION_NAMES))})")
        return names

    @model_validator(mode="after")
    def _fill_topic_defaults(self) -> Scenario:
        filled = [
            t if t.replication_factor is not None else t.model_copy(update={"replication_factor": min(3, self.cluster.brokers)})
            for t in self.topics
        ]
        object.__setattr__(self, "topics", filled)
        return self

    def topic(self, name: str) -> TopicSpec | None:
        return next((t for t in self.topics if t.name == name), None)
