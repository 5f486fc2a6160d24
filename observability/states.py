"""What scenario conditions and the run summary can see of a cluster, whatever runs it: the
states the cluster view (projection.py) folds from the event history.

A value the history cannot tell yet is `UNKNOWN`, which never satisfies a condition: it is
different from None, which is a real answer ("no leader").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
    recovery_state: str = "RECOVERED"  # KIP-704: RECOVERING after an unclean election
    adding_replicas: list[int] = field(default_factory=list)  # a reassignment in progress (§6.7)
    removing_replicas: list[int] = field(default_factory=list)
    preferred_leader: int | None = None  # the first replica in the assignment's order

    @classmethod
    def from_change(cls, ev: Any, hwm: Any) -> PartitionState:
        """From a voter's `partition_change` event (a committed partition record)."""
        return cls(
            leader=ev.leader,
            leader_epoch=ev.leader_epoch,
            partition_epoch=ev.partition_epoch,
            replicas=list(ev.replicas),
            isr=list(ev.isr),
            elr=list(ev.elr),
            last_known_elr=list(ev.last_known_elr),
            hwm=hwm,
            offline=ev.leader is None,
            under_min_isr=ev.under_min_isr,
            recovery_state=ev.recovery_state,
            adding_replicas=list(ev.adding_replicas or ()),
            removing_replicas=list(ev.removing_replicas or ()),
            preferred_leader=ev.replicas[0] if len(ev.replicas) else None,
        )


@dataclass
class ReplicaState:
    leo: int
    hwm: int
    in_sync: bool
    dir: Any = UNKNOWN  # its log directory, as the committed partition record names it


@dataclass
class BrokerState:
    fenced: Any = UNKNOWN  # bool once a controller tracks it
    epoch: Any = UNKNOWN  # int once registered
    alive: bool = False
    in_controlled_shutdown: Any = UNKNOWN  # bool once a controller tracks it
    offline_log_dirs: Any = UNKNOWN  # the registration's directories reported offline (KIP-858)


@dataclass
class QuorumState:
    leader: Any = UNKNOWN
    epoch: Any = UNKNOWN
    states: dict[int, str] = field(default_factory=dict)


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
