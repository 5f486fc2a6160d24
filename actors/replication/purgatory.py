"""Requests that wait for a condition or their deadline, whichever comes first: Kafka's
DelayedOperationPurgatory, the part kraftlab needs.

Two kinds of request wait on a broker, each in a purgatory of its own as in Kafka (its
ReplicaManager keeps a produce purgatory and a fetch purgatory of the same class):
- a produce with acks=all, until the leader's high watermark passes its records (replica.py's
  `waiting`: one purgatory per partition, completed when the HWM moves);
- a follower's fetch with nothing to return yet, until a produce appends to one of its
  partitions, leadership moves, or `replica.fetch.wait.max.ms` ends (the replica manager's
  `parked`, leader_fetches.py).

The owner says when to look (`complete` with the condition that may now hold, `expire` at a
tick) and answers what comes out. Operations come out in the order they went in: the answers
leave in the order the requests came, which keeps a simulated run's trace what it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar


class Delayed(Protocol):
    deadline_ms: float  # when the request is answered whatever its condition


Op = TypeVar("Op", bound=Delayed)


class Purgatory(Generic[Op]):
    def __init__(self) -> None:
        self._ops: list[Op] = []  # in arrival order

    def __len__(self) -> int:
        return len(self._ops)

    def __bool__(self) -> bool:
        return bool(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self._ops)

    def watch(self, op: Op) -> None:
        """The request waits."""
        self._ops.append(op)

    def complete(self, done: Callable[[Op], bool]) -> list[Op]:
        """Take out the requests for which `done` holds, in arrival order, for the owner to answer."""
        if not self._ops:
            return []
        finished: list[Op] = []
        waiting: list[Op] = []
        for op in self._ops:
            (finished if done(op) else waiting).append(op)
        if finished:
            self._ops = waiting
        return finished

    def expire(self, now_ms: float) -> list[Op]:
        """Take out the requests whose deadline has come."""
        return self.complete(lambda op: op.deadline_ms <= now_ms)

    def take_all(self) -> list[Op]:
        """Take out every request (the partition changed hands, the broker stops)."""
        ops, self._ops = self._ops, []
        return ops

    def next_deadline(self) -> float | None:
        return min(op.deadline_ms for op in self._ops) if self._ops else None
