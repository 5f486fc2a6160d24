"""What the scenario runner needs from a runtime (the simulator now, Ray later).

Steps are carried out through this interface only, so one runner drives both runtimes. Node
arguments are concrete names (`b2`, `c1`): selectors are resolved by the runner before the call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from observability.projection import ClusterProjection

from observability.committed_history import CommittedHistory


class StepFailed(Exception):
    """A step could not be carried out (a node already running, a selector that names nobody, a
    step the running roles do not support yet...). The run records it as a failure."""


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

    def shutdown(self, node: str, timeout_ms: float) -> None: ...

    # network
    def isolate(self, node: str) -> None: ...

    def partition(self, groups: Sequence[Sequence[str]]) -> None: ...

    def link(self, src: str, dst: str, drop: float, delay_ms: float) -> None: ...

    def heal(self, node: str | None) -> None: ...

    # protocol-level steps (produce, consume, load, elect, reassign, alter_config)
    def protocol_step(self, kind: str, args: Any) -> None: ...

    # the record
    def record(self, event: Any) -> None:
        """Add an event of the driver's (`observability.events`) to the history."""
        ...

    def violations(self) -> list[dict[str, Any]]: ...

    def settle(self) -> None:
        """Hand every event recorded so far to the history's readers (before the summary)."""
        ...

    def stop_checking(self) -> None:
        """No invariant checks from here on (the run's epilogue)."""
        ...

    def stats(self) -> dict[str, Any]: ...
