"""The actor contract: what every role (broker, controller voter, client) looks like to a driver.

A role is a plain state machine. A driver (the deterministic simulator or the Ray runtime) feeds it
two kinds of input, each with the current time, and carries out what it returns:

    role.start(now_ms)              -> Output   once, when the process (re)starts
    role.handle(envelope, now_ms)   -> Output   a message arrived
    role.tick(now_ms)               -> Output   the deadline it asked for has passed

An `Output` lists messages to send, storage operations to apply, events to emit and the next
deadline. The role never sends, sleeps, reads a clock, draws a random number of its own or touches a
file: randomness comes in as an injected `random.Random`, time as `now_ms`, and the disk as the bytes
recovered at start-up (see `storage.disk.NodeDisk`). This is the etcd-raft / h11 "sans-I/O" style,
and it is what lets the simulator replay every run from its seed.

Durability ordering: every storage operation of an Output is applied before any of its sends. A
send whose envelope has `after_flush=True` is held back by the driver until everything the role
wrote so far is durable (flushed), so "flush before acknowledging" is a single flag. `Flush(token)`
asks for a flush explicitly; the driver answers with a `FlushCompleted(token)` input when it is done.

Envelopes and outputs are `NamedTuple`/slotted classes rather than dataclasses because millions of
them are created per simulated minute; the protocol messages they carry are frozen dataclasses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:  # roles receive an injected random.Random; they never import `random` themselves
    import random

NodeId = str
"""A node's name as scenario files write it: `b1`..`bN` (brokers), `c1`..`cM` (voters), clients."""


class Envelope(NamedTuple):
    """A message on the wire from `src` to `dst`.

    `after_flush`: the driver must not put it on the wire before all storage writes the sender
    made so far are durable (the message acknowledges them).
    """

    src: NodeId
    dst: NodeId
    payload: Any
    after_flush: bool = False


# --- storage operations (paths are relative to the node's own data directory) -----------------


class Append(NamedTuple):
    """Append bytes to a file (created if missing)."""

    path: str
    data: bytes


class Truncate(NamedTuple):
    """Cut a file to `size` bytes (a no-op when it is already shorter)."""

    path: str
    size: int


class Replace(NamedTuple):
    """Replace a file's whole content atomically (write-to-temp then rename, as Kafka's checkpoints)."""

    path: str
    data: bytes


class Delete(NamedTuple):
    """Remove a file."""

    path: str


class Flush(NamedTuple):
    """Make every write so far durable (fsync); answered by `FlushCompleted(token)` when `token` is set."""

    token: Any = None


class StopProcess(NamedTuple):
    """The role finished a clean (controlled) shutdown: flush everything, leave the clean-shutdown
    marker holding `marker` (e.g. the broker epoch, KIP-966) and stop the process."""

    marker: bytes = b""


StorageOp = Append | Truncate | Replace | Delete | Flush | StopProcess


# --- messages on the wire -----------------------------------------------------------------------


def pickled_by_fields(cls: type) -> type:
    """Pickle a frozen, slotted dataclass as its constructor and its fields' values.

    Why: a slotted dataclass's own pickling calls `dataclasses.fields()` for every object, both
    ways, which made pickling the brokers' fetch and produce messages about twice as slow as
    the values alone (an 8-partition fetch response: 85 µs against 38 µs per round trip, payload
    aside); every message between Ray actors is pickled (actors/runtime/ray/wire.py). Only for a
    class that its constructor rebuilds exactly: every field in `__init__`, in order, and no
    `__post_init__`. Apply it above `@dataclass`."""
    from dataclasses import fields
    from operator import attrgetter

    names = tuple(f.name for f in fields(cls))
    if any(not f.init for f in fields(cls)) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: its constructor would not rebuild it exactly")
    if not names:
        cls.__reduce__ = lambda self: (cls, ())
    elif len(names) == 1:
        get_one = attrgetter(names[0])
        cls.__reduce__ = lambda self: (cls, (get_one(self),))
    else:
        get_all = attrgetter(*names)  # a tuple, in the fields' order
        cls.__reduce__ = lambda self: (cls, get_all(self))
    return cls


# --- inputs a driver gives a role besides peers' messages ---------------------------------------


@dataclass(frozen=True, slots=True)
class FlushCompleted:
    """The driver finished the `Flush` carrying this token."""

    token: Any


@dataclass(frozen=True, slots=True)
class ShutdownRequested:
    """An operator asked for a controlled shutdown (scenario step `shutdown`)."""


class Output:
    """What a role wants done after one input. Fields are lists the role appends to.

    Invariant: `next_deadline_ms` is None (no timer wanted) or an absolute virtual/real time in ms.
    A later Output's deadline replaces the earlier one: a role has exactly one pending timer.
    """

    __slots__ = ("events", "next_deadline_ms", "sends", "storage")

    def __init__(
        self,
        sends: list[Envelope] | None = None,
        storage: list[StorageOp] | None = None,
        events: list[Any] | None = None,
        next_deadline_ms: float | None = None,
    ) -> None:
        self.sends = sends if sends is not None else []
        self.storage = storage if storage is not None else []
        self.events = events if events is not None else []
        self.next_deadline_ms = next_deadline_ms

    def send(self, envelope: Envelope) -> None:
        self.sends.append(envelope)

    def write(self, op: StorageOp) -> None:
        self.storage.append(op)

    def emit(self, event: Any) -> None:
        """Record an event of the history (one of `observability.events`' kinds)."""
        self.events.append(event)

    def __repr__(self) -> str:
        return (
            f"Output(sends={self.sends!r}, storage={self.storage!r}, events={self.events!r}, "
            f"next_deadline_ms={self.next_deadline_ms!r})"
        )


@runtime_checkable
class Role(Protocol):
    """The shape every role has. `node_id` names the node it runs as."""

    node_id: NodeId

    def start(self, now_ms: float) -> Output: ...

    def handle(self, envelope: Envelope, now_ms: float) -> Output: ...

    def tick(self, now_ms: float) -> Output: ...


class RandomSource(Protocol):
    """The part of `random.Random` roles use; the driver injects the instance."""

    def random(self) -> float: ...

    def randrange(self, stop: int) -> int: ...


@dataclass(frozen=True, slots=True)
class StartContext:
    """What a driver hands a role factory when a node's process starts.

    `files`: the node's data directory as it survived (recovered from disk, path -> bytes).
    `clean_shutdown_marker`: the marker's content when the previous run ended in a clean shutdown,
    None otherwise (a crash, or the very first start); the marker is consumed by this start.
    `rng`: this node's random stream (derived from the run's seed in the simulator).
    """

    node_id: NodeId
    files: Mapping[str, bytes]
    clean_shutdown_marker: bytes | None
    rng: random.Random


RoleFactory = Callable[[StartContext], Role]
