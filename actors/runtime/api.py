"""What the layer above (workloads: the scenario runner, the steps, fault schedules) hands the
drivers, and what it needs from them. Everything here is plain values: the drivers know nothing of
the scenario model; workloads/drivers.py and workloads/steps.py make these values from a scenario.

- `RunSettings`: what a driver builds and brings up (the cluster's settings, its topics, the seed,
  the simulator's network and disk timing);
- `ClusterRuntime`: what the steps call. Steps are carried out through this interface only, so one
  runner drives both runtimes. Node arguments are concrete names (`b2`, `c1`): selectors are
  resolved by the runner before the call. The protocol steps arrive as the commands below;
- `FaultAction`: one timed action of a fault schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from actors.runtime.network import LatencyModel
from actors.settings import ClusterSettings
from observability.committed_history import CommittedHistory
from observability.projection import ClusterProjection


class StepFailed(Exception):
    """A step could not be carried out (a node already running, a selector that names nobody, a
    step the running roles do not support yet...). The run records it as a failure."""


# --- what a driver builds ---------------------------------------------------------------------


@dataclass(frozen=True)
class TopicSettings:
    """A topic the driver creates at bring-up, through the active controller."""

    name: str
    partitions: int
    replication_factor: int
    assignment: dict[int, list[int]] | None  # partition -> replicas; None: Kafka's placement
    config: dict[str, Any]  # topic-level overrides, under Kafka's config names


@dataclass(frozen=True)
class RunSettings:
    cluster: ClusterSettings
    topics: tuple[TopicSettings, ...]
    seed: int
    # The simulator's one-way message latency and fsync latency (Ray runs on real time).
    network_latency: LatencyModel
    fsync_latency: LatencyModel
    # How often each host's OS writeback (page_cache, fsync) or process buffer flush
    # (process_buffer) runs; page_cache writes back data dirty >= dirty_expire_ms.
    background_flush_interval_ms: float
    dirty_expire_ms: float
    # Also check the quorum's liveness (EpochInflation, StaleLeader) as violations.
    disruption_checks: bool = False
    # Every broker also serves Kafka's binary protocol (`cluster.listeners: [kafka]`; Ray only).
    kafka_listeners: bool = False


# --- the protocol steps, as the drivers carry them out ------------------------------------------


@dataclass(frozen=True)
class Produce:
    topic: str
    partition: int
    count: int | None  # records m<command>-0.. (when `values` is None)
    values: list[str] | None
    acks: str | int  # "all", 1, 0, -1
    idempotent: bool
    expect: str  # acked | failed | any
    timeout_ms: float


@dataclass(frozen=True)
class Consume:
    topic: str
    partition: int
    from_offset: int
    expect_count: int | None
    expect_values: list[str] | None
    timeout_ms: float


@dataclass(frozen=True)
class Load:
    producers: int
    consumers: int
    rate_per_s: float
    message_bytes: int
    acks: str | int
    topics: list[str] | None  # None: every topic
    duration_ms: float | None  # None: until the end
    idempotent: bool  # the load producers' enable.idempotence (resolved: never None)
    buffer_memory: int = 33_554_432  # bytes a producer may hold (records waiting or in flight)
    max_block_ms: float = 60_000.0  # how long the generator's send() waits for buffer space
    delivery_timeout_ms: float = 30_000.0  # from a record's entry into the buffer
    linger_ms: float = 0.0  # how long a partition's records may wait to fill a batch
    batch_size: int | None = None  # a batch's bytes at most; None: at most 1,000 records
    # `load.client: librdkafka`: the clients' librdkafka settings (acks and enable.idempotence
    # resolved); None: kraftlab's own clients run the load.
    kafka_config: dict[str, Any] | None = None


@dataclass(frozen=True)
class ListOffsets:
    """ListOffsets(latest) to the partition's current leader. `accepts` judges the answer (an
    offset, "not_available", or another error's name); None accepts any; `expected` says what it
    wants, for the failure message."""

    topic: str
    partition: int
    timeout_ms: float
    accepts: Callable[[int | str], bool] | None
    expected: str


# Admin calls: `expect_error` is Kafka's error name the answer must have (NONE: carried out);
# None accepts any answer.


@dataclass(frozen=True)
class Elect:
    topic: str
    partition: int
    type: str  # preferred | unclean
    expect_error: str | None = None


@dataclass(frozen=True)
class Reassign:
    topic: str
    partition: int
    replicas: list[int]
    expect_error: str | None = None


@dataclass(frozen=True)
class CancelReassignment:
    topic: str
    partition: int
    expect_error: str | None = None


@dataclass(frozen=True)
class AlterConfig:
    topic: str | None  # None: the cluster's config
    config: dict[str, Any]
    expect_error: str | None = None


@dataclass(frozen=True)
class CreateTopic:
    topic: TopicSettings
    expect_error: str | None = None


@dataclass(frozen=True)
class DeleteTopic:
    topic: str
    expect_error: str | None = None


@dataclass(frozen=True)
class CreatePartitions:
    topic: str
    count: int
    assignment: dict[int, list[int]] | None
    expect_error: str | None = None


AdminCommand = Elect | Reassign | CancelReassignment | AlterConfig | CreateTopic | DeleteTopic | CreatePartitions
ADMIN_STEPS = ("elect", "reassign", "cancel_reassignment", "alter_config", "create_topic", "delete_topic", "create_partitions")
@dataclass(frozen=True)
class PauseLoad:
    for_ms: float  # the load producers offer nothing this long


ProtocolCommand = Produce | Consume | Load | PauseLoad | ListOffsets | AdminCommand


# --- fault schedules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultAction:
    at_ms: float
    action: str  # crash_os | crash_process | crash_disk | restart | isolate | partition | link | heal
    nodes: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()
    drop: float = 0.0
    delay_ms: float = 0.0

    def describe(self) -> str:
        what = self.nodes or self.groups
        return f"{self.at_ms:>9.0f} ms  {self.action:<13s} {what}"


# --- what the steps call ------------------------------------------------------------------------


class ClusterRuntime(Protocol):
    # How long an `expect` whose values the runtime cannot tell yet (UNKNOWN) waits for them: 0 in
    # the simulator (one consistent instant), a moment on Ray (copies polled from each actor).
    unknown_grace_ms: float

    @property
    def now_ms(self) -> float: ...

    # Every committed partition and broker state reported so far (what wait_for also accepts).
    committed_states: CommittedHistory

    def view(self) -> ClusterProjection: ...

    # time
    def run_for(self, duration_ms: float) -> None: ...

    def run_until(self, condition: Callable[[], bool], timeout_ms: float) -> bool:
        """Let time pass until `condition()` holds (True) or `timeout_ms` has passed (False)."""
        ...

    # processes
    def crash(self, node: str, mode: str) -> None: ...

    def restart(self, node: str) -> None: ...

    def shutdown(self, node: str, timeout_ms: float, wait: bool = True) -> None:
        """A controlled shutdown; `wait`: until the node has stopped (else return once asked)."""
        ...

    def fail_log_dir(self, broker: int, log_dir: int) -> None:
        """A broker's log directory fails until it restarts (KIP-858); directory 0 halts it."""
        ...

    # network
    def isolate(self, node: str) -> None: ...

    def partition(self, groups: Sequence[Sequence[str]]) -> None: ...

    def link(self, src: str, dst: str, drop: float, delay_ms: float) -> None: ...

    def heal(self, node: str | None) -> None: ...

    def undo_network_fault(self, fault: str, target: tuple[str, ...] | tuple[tuple[str, ...], ...]) -> None:
        """End exactly one network fault: `isolate` of (node,), `link` of (src, dst), `partition` of
        its groups; the history's `heal` row names it (`undone_target`)."""
        ...

    # protocol-level steps (produce, consume, list_offsets, load, and the admin calls: ADMIN_STEPS)
    def protocol_step(self, kind: str, args: ProtocolCommand) -> None: ...

    # the record
    def record(self, event: Any) -> None:
        """Add an event of the driver's (`observability.events`) to the history."""
        ...

    def violations(self) -> list[dict[str, Any]]: ...

    def settle(self) -> None:
        """Hand every event recorded so far to the history's readers (before the summary)."""
        ...

    def check_everything(self) -> None:
        """One full invariant check of the whole cluster view (the end of the steps)."""
        ...

    def stats(self) -> dict[str, Any]: ...
