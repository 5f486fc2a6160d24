"""A Raft node's settings and the interface of the state machine on top of it: Kafka's
QuorumConfig (the controller.quorum.* settings) and RaftClient.Listener."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from actors.contract import Output

from .messages import LogEntry

# The most entries one fetch response carries.
MAX_FETCH_ENTRIES = 2_000


@dataclass(frozen=True)
class RaftConfig:
    election_timeout_ms: int = 1_000
    fetch_timeout_ms: int = 2_000
    election_backoff_max_ms: int = 1_000
    append_linger_ms: int = 25
    request_timeout_ms: int = 2_000  # controller.quorum.request.timeout.ms
    fetch_max_wait_ms: int = 500  # how long the leader parks a fetch with nothing to return
    observer_retry_ms: int = 250
    prevote: bool = True
    check_quorum: bool = True
    raft_fsync: bool = True
    # How long a graceful shutdown waits for another leader before stopping anyway: Kafka's
    # KafkaRaftClientDriver.initiateShutdown calls KafkaRaftClient.shutdown(5000), a fixed value.
    shutdown_timeout_ms: int = 5_000


class RaftListener(Protocol):
    def on_commit(self, entries: list[LogEntry], now_ms: float, out: Output) -> None: ...

    def on_become_leader(self, epoch: int, now_ms: float, out: Output) -> None: ...

    def on_lose_leadership(self, now_ms: float, out: Output) -> None: ...
