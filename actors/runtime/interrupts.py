"""Ctrl-C and SIGTERM for the `kraftlab` command: both end the command through the same clean-up
as an error does (the run's history flushed, its cluster and data root removed, a campaign's log
closed and results.parquet rebuilt), then exit 130 (SIGINT) or 143 (SIGTERM), the shell's codes
for a command ended by a signal, distinct from the documented 0, 1 and 2.

Why the command keeps the signals to itself: the libraries it starts install handlers of their
own that do not end it cleanly. `ray.init` leaves Ray's C++ SIGTERM handler in the driver, which
aborts the process (exit 134, a stack dump, nothing cleaned up); while Ray starts, its own Python
handlers end the process with `sys.exit`, after a drain of up to 30 s meant for a long-lived
cluster's node; PySpark's SIGINT handler calls into the JVM that the same
Ctrl-C is killing, and prints py4j tracebacks. So the command installs its handlers first
(`install`), and takes them back after each of those libraries starts (`reclaim`). A library
user who never calls `install` keeps the handlers they had.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that every clean-up
    written for one runs for the other."""


class Abandoned(KeyboardInterrupt):
    """Raised in a run's own thread once the command abandons its runs: `kraftlab demo`'s two on
    the first Ctrl-C, a campaign's `runtime: ray` runs on a second one (the first waits for them)."""


@dataclass(frozen=True)
class Output:
    """Where a command keeps what it records (`record_into`), for the line it ends with when a
    signal stops it. `who` names the recorder ("the run"); `complete_when` is the file that is
    there only once the output is complete (a run's summary.json), if any."""

    path: Path
    who: str
    complete_when: str | None = None

    def stopped_line(self) -> str:
        """What the user is told about the output when the command is stopped."""
        if not self.path.is_dir() or not any(self.path.iterdir()):
            return "nothing was recorded yet"
        line = f"what {self.who} recorded until then is in {self.path}"
        if self.complete_when is not None and not (self.path / self.complete_when).exists():
            line += f" (no {self.complete_when})"
        return line


_installed = False
_abandon = threading.Event()
received: int | None = None  # the first signal received (SIGINT or SIGTERM), once installed
_output: Output | None = None  # the command's output, once the command named it (main thread)
# While the main thread is in a `deferred` section, a signal is noted here and raised at its end.
_deferring = 0
_pending: int | None = None


def _on_signal(signum: int, _frame: Any) -> None:
    global received, _pending
    if received is None:
        received = signum
    # Ray reports the failed calls of the actors being stopped ("Unhandled error ... killed by
    # ray.kill"): expected now, and not the user's to read.
    os.environ["RAY_IGNORE_UNHANDLED_ERRORS"] = "1"
    if _deferring:
        _pending = signum
        return
    raise _as_exception(signum)


def _as_exception(signum: int) -> KeyboardInterrupt:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def deferred() -> Iterator[None]:
    """A section that a signal must not cut in two (a run's folder completed and renamed into
    place: half of it would be neither a finished run nor an interrupted one). In the main thread,
    a signal received meanwhile is raised as the section ends; in another thread (which signals
    never reach) the section is plain."""
    global _deferring, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending is not None:
            signum, _pending = _pending, None
            raise _as_exception(signum)


def record_into(path: Path, who: str, complete_when: str | None = None) -> None:
    """Name where the command keeps what it records (`Output`), so that a signal ending it at any
    moment, before, during or after the work, says where that is. The command names it, not the
    runs inside it: a campaign's, a demo's, are in the command's folder."""
    global _output
    _output = Output(Path(path), who, complete_when)


def output() -> Output | None:
    """The command's output, as `record_into` named it (None: the command records nothing)."""
    return _output


def install() -> None:
    """At a command's start: take SIGINT and SIGTERM (main thread only), and have any Ray started
    from here skip the node's SIGTERM drain (meant for a long-lived cluster's node, not a command's
    embedded one) and never start a Ray of its own from a Ray call made after the command's Ray is
    shut down (a run thread still going while the command exits)."""
    global _installed, _output
    _output = None  # a command run before in this process (tests) named its own
    os.environ.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    _installed = True
    reclaim()


def installed() -> bool:
    return _installed


def reclaim() -> None:
    """Put the command's handlers back (after `ray.init`, or Spark's start), if it installed them."""
    if _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)


def exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM (128 + the signal's number): the first signal the command
    received decides, whatever interrupt reached the main thread first (Ray's driver may raise a
    KeyboardInterrupt of its own when the same signal ends its raylet)."""
    return 128 + (received if received is not None else signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def terminated(exc: BaseException) -> bool:
    return exit_code(exc) == 128 + signal.SIGTERM


def interrupted() -> bool:
    """Whether the command has received Ctrl-C or SIGTERM: an error raised after it (a py4j call
    that lost its JVM to the same Ctrl-C) is the interrupt's, not a bug's."""
    return received is not None


def as_exception() -> KeyboardInterrupt:
    """The signal received, as the exception its handler raises."""
    return _as_exception(received if received is not None else signal.SIGINT)


def abandon_runs() -> None:
    """Tell every run going on in another thread of this process to stop at its next poll."""
    _abandon.set()


def raise_if_abandoned() -> None:
    """Called before each step of a run (workloads/steps.py) and, within a step, at every poll of
    the Ray cluster's `run_for` and `run_until` (the simulator has no poll)."""
    if _abandon.is_set():
        raise Abandoned()
