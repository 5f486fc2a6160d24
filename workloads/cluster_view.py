"""What scenario conditions and the run summary can see of a cluster, whatever runs it.

A runtime (simulator or Ray) answers these questions from its roles' state. A value that the
running roles cannot tell yet is `UNKNOWN`, which never satisfies a condition: it is different from
None, which is a real answer ("no leader").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .committed_history import CommittedHistory


class _Unknown:
    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "unknown"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


@dataclass
class PartitionState:
    """The controller's view of a partition, plus the leader's high watermark."""

    leader: int | None
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    elr: list[int]
    last_known_elr: list[int]
    hwm: int | None
    offline: bool
    under_min_isr: bool

    @classmethod
    def committed(cls, fields: dict[str, Any], hwm: Any) -> PartitionState:
        """From a committed record's state fields (`PartitionRecord.state_fields`, plus
        `under_min_isr`), as the image holds them or a voter's `partition_state` event reports them."""
        return cls(
            leader=fields["leader"],
            leader_epoch=fields["leader_epoch"],
            partition_epoch=fields["partition_epoch"],
            replicas=list(fields["replicas"]),
            isr=list(fields["isr"]),
            elr=list(fields["elr"]),
            last_known_elr=list(fields["last_known_elr"]),
            hwm=hwm,
            offline=fields["leader"] is None,
            under_min_isr=fields["under_min_isr"],
        )


@dataclass
class ReplicaState:
    leo: int
    hwm: int
    in_sync: bool


@dataclass
class BrokerState:
    fenced: Any = UNKNOWN  # bool once a controller tracks it
    epoch: Any = UNKNOWN  # int once registered
    alive: bool = False


@dataclass
class QuorumState:
    leader: Any = UNKNOWN
    epoch: Any = UNKNOWN
    states: dict[int, str] = field(default_factory=dict)


class ClusterView(Protocol):
    # Every committed partition and broker state reported so far.
    committed_states: CommittedHistory

    def partitions(self) -> dict[str, PartitionState]: ...

    def replica(self, partition: str, broker: int) -> ReplicaState | None: ...

    def brokers(self) -> dict[int, BrokerState]: ...

    def quorum(self) -> QuorumState: ...

    def history(self) -> dict[str, int]: ...


def plain(value: Any) -> Any:
    """A JSON-friendly form: UNKNOWN becomes None (the summary has no third value)."""
    if value is UNKNOWN:
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return plain(asdict(value))
    return value
