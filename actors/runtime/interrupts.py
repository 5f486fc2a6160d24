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
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that every clean-up
    written for one runs for the other."""


class Abandoned(KeyboardInterrupt):
    """Raised in a run's own thread once the command abandons its runs: `kraftlab demo`'s two on
    the first Ctrl-C, a campaign's `runtime: ray` runs on a second one (the first waits for them)."""


_installed = False
_abandon = threading.Event()
received: int | None = None  # the first signal received (SIGINT or SIGTERM), once installed


def _on_signal(signum: int, _frame: Any) -> None:
    global received
    if received is None:
        received = signum
    # Ray reports the failed calls of the actors being stopped ("Unhandled error ... killed by
    # ray.kill"): expected now, and not the user's to read.
    os.environ["RAY_IGNORE_UNHANDLED_ERRORS"] = "1"
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def install() -> None:
    """Take SIGINT and SIGTERM (main thread only), and have any Ray started from here skip the
    node's SIGTERM drain (meant for a long-lived cluster's node, not a command's embedded one) and
    never start a Ray of its own from a Ray call made after the command's Ray is shut down (a run
    thread still going while the command exits)."""
    global _installed
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
    return Terminated() if received == signal.SIGTERM else KeyboardInterrupt()


def abandon_runs() -> None:
    """Tell every run going on in another thread of this process to stop at its next poll."""
    _abandon.set()


def raise_if_abandoned() -> None:
    """Called before each step of a run (workloads/steps.py) and, within a step, at every poll of
    the Ray cluster's `run_for` and `run_until` (the simulator has no poll)."""
    if _abandon.is_set():
        raise Abandoned()
