"""What every role needs to know about the cluster it runs in, as plain values.

The scenario's `cluster` becomes these in workloads/drivers.py (`cluster_settings`); the roles know
nothing of the scenario model. `KafkaSettings` holds the static broker and controller config under
the scenario's field names (`min_insync_replicas` for `min.insync.replicas`); `ProtocolSettings`
the safety mechanisms' switches.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.modes import StorageMode


@dataclass(frozen=True)
class KafkaSettings:
    min_insync_replicas: int
    eligible_leader_replicas_enable: bool
    unclean_leader_election_enable: bool
    unclean_recovery_strategy: str  # aggressive|proactive, balanced, none|manual, last_known_leader
    unclean_leader_election_interval_ms: int  # how often the controller looks for leaderless partitions to elect uncleanly
    replica_lag_time_max_ms: int
    replica_fetch_wait_max_ms: int
    replica_socket_timeout_ms: int | None  # None: the fetch's wait + FETCH_REQUEST_GRACE_MS
    broker_heartbeat_interval_ms: int
    broker_session_timeout_ms: int
    controller_quorum_election_timeout_ms: int
    controller_quorum_fetch_timeout_ms: int
    controller_quorum_election_backoff_max_ms: int
    controller_quorum_append_linger_ms: int
    # None stands for Kafka's defaults: Long.MAX messages, and no flush timer (the OS writes back).
    log_flush_interval_messages: int | None
    log_flush_interval_ms: int | None
    log_segment_bytes: int
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10  # accepted, unused by the KRaft controller (as Kafka's)
    # How long a broker waits for the controller to acknowledge a failed log directory in a
    # heartbeat before it shuts down (Kafka's log.dir.failure.timeout.ms, KIP-858).
    log_dir_failure_timeout_ms: int = 30_000


@dataclass(frozen=True)
class ProtocolSettings:
    elr: bool
    maximal_isr: bool
    strict_min_isr: bool
    broker_epoch_in_alter_partition: bool
    leader_epoch_truncation: bool
    prevote: bool
    check_quorum: bool
    raft_fsync: bool


@dataclass(frozen=True)
class ClusterSettings:
    brokers: int
    controllers: int
    racks: int | None
    storage: StorageMode
    config: KafkaSettings
    protocol: ProtocolSettings
    # Log directories per broker, numbered 0..log_dirs-1 (Kafka's log.dirs); directory 0 also holds
    # the broker's metadata log (Kafka's metadata.log.dir defaults to the first of log.dirs).
    log_dirs: int = 1

    @property
    def voters(self) -> tuple[str, ...]:
        return tuple(f"c{i}" for i in range(1, self.controllers + 1))

    def rack_of(self, broker: int) -> str | None:
        """Brokers are assigned to racks round-robin (docs/reference)."""
        return None if self.racks is None else f"rack{(broker - 1) % self.racks}"
