"""The online invariant checks: readers of the history, like everything else that observes a run.

Each check set is an event sink that notes what an event touched, and a `check()` that judges only
that (`check_all()` judges everything); the drivers register `check` with their invariant hook:
the simulator after every event, Ray after each batch of one node's events. A check set reads the
cluster view (observability/projection.py) and events, never a role, so both drivers give the same
verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from observability.projection import ClusterProjection

from .metadata import MetadataChecks
from .partitions import PartitionChecks
from .quorum import QuorumChecks, QuorumDisruption

__all__ = ["MetadataChecks", "OnlineChecks", "PartitionChecks", "QuorumChecks", "QuorumDisruption"]


class OnlineChecks:
    """The check sets of a cluster run: KRaft quorum, committed metadata, partitions. `sinks` go
    after the cluster view in the driver's sink list (they read it); `check_sets` are what the
    driver's invariant hook calls."""

    def __init__(
        self, view: ClusterProjection, record: Callable[[Any], None], voters: Iterable[str], *, elr_enabled: bool, prevote: bool,
        incremental: bool = True,
    ) -> None:
        self.quorum = QuorumChecks(voters, prevote=prevote)
        self.metadata = MetadataChecks(elr_enabled=elr_enabled)
        self.partitions = PartitionChecks(view, record)
        self.sinks = [self.quorum, self.metadata, self.partitions]
        # `incremental` False judges everything at every call (the reference the incremental checks
        # are tested against: tests/sim/test_incremental_checks.py).
        sets = (self.quorum, self.metadata, self.partitions)
        self.check_sets = [c.check if incremental else c.check_all for c in sets]

    def check_all(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for checks in (self.quorum, self.metadata, self.partitions):
            for name, detail in checks.check_all().items():
                found.setdefault(name, detail)
        return found
