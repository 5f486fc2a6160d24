"""The `cluster` and `topics` sections of a scenario file (docs/reference/steps-and-conditions.md): sizes,
storage, Kafka config, protocol switches, and kraftlab's network and disk models."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    field_validator,
    model_validator,
)

from .names import TOPIC_PATTERN, BrokerId, Strict

# --- cluster ---------------------------------------------------------------------------------

StorageModeName = Literal["fsync", "page_cache", "process_buffer"]
RecoveryStrategy = Literal["aggressive", "proactive", "balanced", "none", "manual", "last_known_leader"]


class KafkaConfig(Strict):
    """Broker and controller settings under their real Kafka names (defaults: protocol-facts.md)."""

    min_insync_replicas: PositiveInt = Field(
        1, alias="min.insync.replicas",
        description="MinISR: the ISR size a leader needs to accept acks=all writes, taken as min(this, replication factor); "
        "a topic's own overrides it",
    )
    eligible_leader_replicas_enable: bool = Field(
        True, alias="eligible.leader.replicas.enable",
        description="KIP-966 Eligible Leader Replicas, the same switch as protocol.elr (Kafka: on by default for new "
        "clusters since 4.1)",
    )
    unclean_leader_election_enable: bool = Field(
        False, alias="unclean.leader.election.enable",
        description="when no ISR or ELR member can lead, elect any unfenced replica: an unclean election, the partition "
        "RECOVERING; Kafka's default false",
    )
    unclean_recovery_strategy: RecoveryStrategy = Field(
        "balanced", alias="unclean.recovery.strategy",
        description="KIP-966 unclean recovery of a leaderless partition, with ELR on: balanced once ISR and ELR are "
        "empty, electing the best inspected log; aggressive (proactive) as soon as no ISR or ELR member can lead; "
        "none (manual) never; last_known_leader elects the last leader without inspecting logs; Kafka's default balanced",
    )
    # Kafka's internal config (ReplicationConfigs, default 5 minutes): how often the active
    # controller elects leaders for leaderless partitions of topics that allow unclean elections.
    unclean_leader_election_interval_ms: PositiveInt = Field(
        300_000, alias="unclean.leader.election.interval.ms",
        description="while a partition has no leader, how often the active controller elects leaders for the leaderless "
        "partitions of topics that allow unclean elections",
    )
    replica_lag_time_max_ms: PositiveInt = Field(
        30_000, alias="replica.lag.time.max.ms",
        description="the leader removes from the ISR a follower that has not caught up with its log end for this long",
    )
    replica_fetch_wait_max_ms: PositiveInt = Field(
        500, alias="replica.fetch.wait.max.ms",
        description="the longest a leader holds a follower's fetch while it has nothing to return",
    )
    # How long a follower waits for a fetch's answer before it sends another (Kafka: 30 s, and at
    # least replica.fetch.wait.max.ms). None is kraftlab's default, the fetch's wait + 2 s: a lost
    # connection is noticed about as soon as a closed TCP connection would be, and a healed
    # partition resumes replication within seconds, as TCP's retransmission does.
    replica_socket_timeout_ms: PositiveInt | None = Field(
        None, alias="replica.socket.timeout.ms",
        description="how long a follower waits for a fetch's answer before it sends another, at least "
        "replica.fetch.wait.max.ms; absent: replica.fetch.wait.max.ms + 2 s (Kafka's default is 30 s)",
    )
    broker_heartbeat_interval_ms: PositiveInt = Field(
        2_000, alias="broker.heartbeat.interval.ms", description="how often a broker sends a heartbeat to the active controller"
    )
    broker_session_timeout_ms: PositiveInt = Field(
        9_000, alias="broker.session.timeout.ms",
        description="the active controller fences a broker it has not heard from for this long",
    )
    controller_quorum_election_timeout_ms: PositiveInt = Field(
        1_000, alias="controller.quorum.election.timeout.ms",
        description="a KRaft voter without a leader starts an election after a random time between this and twice this",
    )
    controller_quorum_fetch_timeout_ms: PositiveInt = Field(
        2_000, alias="controller.quorum.fetch.timeout.ms",
        description="a KRaft follower that has not heard from its leader for this long starts an election; with "
        "check_quorum, a leader resigns after 1.5 times this without fetches from a majority",
    )
    controller_quorum_election_backoff_max_ms: PositiveInt = Field(
        1_000, alias="controller.quorum.election.backoff.max.ms",
        description="the longest a KRaft voter waits before it canvasses again, after a lost election or its leader's resignation",
    )
    controller_quorum_append_linger_ms: NonNegativeInt = Field(
        25, alias="controller.quorum.append.linger.ms",
        description="how long the KRaft leader gathers metadata records before it appends them to its log",
    )
    # None stands for Kafka's defaults: Long.MAX messages, and no flush timer (the OS writes back).
    log_flush_interval_messages: PositiveInt | None = Field(
        None, alias="log.flush.interval.messages",
        description="a broker flushes after every this many records a replica appends (1: every append, as with fsync "
        "storage); absent: never by count (Kafka's default)",
    )
    log_flush_interval_ms: PositiveInt | None = Field(
        None, alias="log.flush.interval.ms",
        description="a broker flushes every write this often; absent: no flush timer, the OS writes back (Kafka's default)",
    )
    # Segment files roll at this size (Kafka: 1 GiB). Any positive size is accepted (Kafka 4 asks
    # for at least 1 MiB) so that scenarios can roll segments with a handful of records.
    log_segment_bytes: PositiveInt = Field(
        1 << 30, alias="log.segment.bytes",
        description="a log segment's size at which a new segment starts (any positive size; Kafka 4 asks for at least 1 MiB)",
    )
    # The automatic leader rebalance (Kafka's QuorumController "electPreferred" periodic task): while
    # enabled, every interval the active controller elects the preferred replica of each partition
    # led by another replica, where the preferred one can lead. The percentage is accepted as Kafka
    # accepts it; its KRaft controller does not use it (the ZooKeeper controller did).
    auto_leader_rebalance_enable: bool = Field(
        True, alias="auto.leader.rebalance.enable",
        description="every leader.imbalance.check.interval.seconds, the active controller makes each partition's "
        "preferred replica its leader where it can lead; Kafka's default true",
    )
    leader_imbalance_check_interval_seconds: PositiveInt = Field(
        300, alias="leader.imbalance.check.interval.seconds",
        description="how often the automatic leader rebalance runs, with auto.leader.rebalance.enable",
    )
    leader_imbalance_per_broker_percentage: int = Field(
        10, ge=0, le=100, alias="leader.imbalance.per.broker.percentage",
        description="accepted as Kafka accepts it, and unused: Kafka's KRaft controller does not use it either",
    )
    # KIP-858: a broker that cannot get a failed log directory acknowledged by the controller (in a
    # heartbeat's answer) within this long shuts down (Kafka's default: 30 s).
    log_dir_failure_timeout_ms: PositiveInt = Field(
        30_000, alias="log.dir.failure.timeout.ms",
        description="a broker shuts down when the controller has not acknowledged its failed log directory within this long (KIP-858)",
    )

    @model_validator(mode="after")
    def _socket_timeout_covers_the_fetch_wait(self) -> KafkaConfig:
        # Kafka's own check (KafkaConfig: "replica.socket.timeout.ms should always be at least
        # replica.fetch.wait.max.ms"): a shorter timeout gives up on every long-poll fetch.
        timeout = self.replica_socket_timeout_ms
        if timeout is not None and timeout < self.replica_fetch_wait_max_ms:
            raise ValueError(f"replica.socket.timeout.ms ({timeout}) must be at least replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms})")
        return self


class TopicConfig(Strict):
    """Topic-level overrides (Kafka's topic config names)."""

    min_insync_replicas: PositiveInt | None = Field(
        None, alias="min.insync.replicas", description="the topic's own min.insync.replicas; absent: the cluster's"
    )
    unclean_leader_election_enable: bool | None = Field(
        None, alias="unclean.leader.election.enable",
        description="the topic's own unclean.leader.election.enable; absent: the cluster's",
    )
    flush_messages: PositiveInt | None = Field(
        None, alias="flush.messages",
        description="not supported, any value is refused: a broker flushes all its files at once (set cluster.config "
        "log.flush.interval.messages)",
    )
    flush_ms: PositiveInt | None = Field(
        None, alias="flush.ms",
        description="not supported, any value is refused: a broker flushes all its files at once (set cluster.config "
        "log.flush.interval.ms)",
    )
    segment_bytes: PositiveInt | None = Field(
        None, alias="segment.bytes", description="the topic's own log.segment.bytes; absent: the cluster's"
    )

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
    the bug it fixes (the "-off" scenarios of docs/reference/library.md show each)."""

    elr: bool = Field(True, description="KIP-966 Eligible Leader Replicas (the same switch as eligible.leader.replicas.enable)")
    maximal_isr: bool = Field(True, description="the leader counts proposed ISR members when it advances the HWM")
    strict_min_isr: bool = Field(True, description="the HWM stays frozen while the ISR is below MinISR (Kafka >= 3.7)")
    broker_epoch_in_alter_partition: bool = Field(True, description="KIP-903: an ISR change names each broker's epoch")
    leader_epoch_truncation: bool = Field(True, description="KIP-101: truncate by leader epoch, not to the local HWM")
    prevote: bool = Field(True, description="KIP-996 Pre-Vote")
    check_quorum: bool = Field(True, description="a KRaft leader that hears from no majority resigns")
    raft_fsync: bool = Field(True, description="KRaft voters flush before acknowledging")


class LatencySpec(Strict):
    kind: Literal["constant", "uniform", "exponential"] = Field(
        "uniform", description="constant: always low_ms; uniform: between low_ms and high_ms; exponential: low_ms plus "
        "an exponential tail of mean mean_ms"
    )
    low_ms: NonNegativeFloat = Field(0.5, description="constant: the latency; uniform: its lowest; exponential: the minimum the tail adds to")
    high_ms: NonNegativeFloat = Field(2.0, description="uniform: the highest latency, at least low_ms; unused by the other kinds")
    mean_ms: Annotated[float, Field(gt=0)] = Field(
        1.0, description="exponential: the mean of the tail added to low_ms; unused by the other kinds"
    )

    @model_validator(mode="after")
    def _ordered(self) -> LatencySpec:
        if self.kind == "uniform" and self.high_ms < self.low_ms:
            raise ValueError(f"high_ms ({self.high_ms}) must be >= low_ms ({self.low_ms})")
        return self


class NetworkSpec(Strict):
    """Simulator network (kraftlab's own, not a Kafka setting): one-way message latency."""

    latency: LatencySpec = Field(LatencySpec(), description="each message's one-way latency in the simulator")


class DiskSpec(Strict):
    """Simulator disks (kraftlab's own, not a Kafka setting)."""

    fsync_latency: LatencySpec = Field(
        LatencySpec(kind="uniform", low_ms=0.5, high_ms=2.0),
        description="each fsync's duration in the simulator; a host's flushes queue on its one disk",
    )
    background_flush_interval_ms: Annotated[float, Field(gt=0)] = Field(
        5_000.0, description="how often each host's OS writeback (page_cache, fsync) or the process's own buffer flush "
        "(process_buffer) runs"
    )
    dirty_expire_ms: NonNegativeFloat = Field(
        30_000.0, description="page_cache: the OS writeback writes data dirty at least this long (Linux dirty_expire_centisecs)"
    )


class ClusterSpec(Strict):
    brokers: PositiveInt = Field(3, description="broker ids 1..N, node names b1..bN")
    controllers: PositiveInt = Field(3, description="KRaft controller voters, ids 1..M, node names c1..cM")
    racks: PositiveInt | None = Field(None, description="brokers assigned to racks round-robin; placement is rack-aware")
    storage: StorageModeName = Field("page_cache", description="fsync: flush before acknowledging; page_cache: an OS crash loses "
                                                               "the unflushed tail; process_buffer: a process crash does too")
    log_dirs: PositiveInt = Field(
        1, description="log directories per broker, numbered from 0 (Kafka's log.dirs); directory 0 also holds the metadata log"
    )
    config: KafkaConfig = Field(KafkaConfig(), description="broker and controller settings under Kafka's names")
    protocol: ProtocolSwitches = Field(
        ProtocolSwitches(), description="the safety mechanisms, each on unless switched off"
    )
    listeners: list[Literal["kafka"]] = Field(
        [], description="what the brokers also serve: kafka, Kafka's binary protocol, for real Kafka clients (runtime ray "
        "only); each broker listens on its node's address, and the summary's bootstrap_servers lists them"
    )
    network: NetworkSpec = Field(NetworkSpec(), description="the simulator's message latency")
    disk: DiskSpec = Field(
        DiskSpec(), description="disk timing: the simulator's fsync latency and the background flush"
    )

    @model_validator(mode="after")
    def _one_elr_switch(self) -> ClusterSpec:
        """`protocol.elr` and `eligible.leader.replicas.enable` are the same switch (docs/reference):
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
    name: Annotated[str, Field(pattern=TOPIC_PATTERN, description="the topic's name; its partitions are NAME-0, NAME-1, ...")]
    partitions: PositiveInt = Field(1, description="how many partitions")
    replication_factor: PositiveInt | None = Field(
        None, description="how many replicas each partition has; default: its assignment's, else min(3, cluster.brokers)"
    )
    assignment: dict[NonNegativeInt, list[BrokerId]] | None = Field(
        None, description="each partition's replicas, the first the preferred leader; default: Kafka's round-robin placement")
    config: TopicConfig = Field(TopicConfig(), description="topic-level config overrides (Kafka's names)")
