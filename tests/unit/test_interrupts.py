"""Ctrl-C and SIGTERM for the command (actors/runtime/interrupts.py): the handlers raise in the
main thread, SIGTERM as its own KeyboardInterrupt, with the shell's exit codes; Ray started by the
command skips its 30 s SIGTERM drain and never starts itself again from a stray call; and a
taken --metrics-port is refused before any Ray starts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner

from actors.runtime import interrupts

PROBE = """
import os, signal, sys
from actors.runtime import interrupts
os.environ.pop("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", None)
os.environ["RAY_ENABLE_AUTO_CONNECT"] = "1"  # the user's own setting is kept
interrupts.install()
print(os.environ["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"], os.environ["RAY_ENABLE_AUTO_CONNECT"])
for sig in (signal.SIGINT, signal.SIGTERM):
    interrupts.received = None
    try:
        os.kill(os.getpid(), sig)
        signal.pause()
    except KeyboardInterrupt as exc:
        print(type(exc).__name__, interrupts.exit_code(exc))
# The first signal decides, whatever interrupt reaches the main thread first.
print(interrupts.interrupted(), interrupts.received == signal.SIGTERM, interrupts.exit_code(KeyboardInterrupt()))
"""


def test_the_handlers_raise_in_the_main_thread_with_the_shells_codes():
    # In a process of its own: the handlers are the process's.
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert out[:4] == ["0 1", "KeyboardInterrupt 130", "Terminated 143", "True True 143"]


def test_without_install_nothing_is_taken(monkeypatch):
    """Whatever ran before in this process (a test that ran the CLI installs the handlers)."""

    def handlers():
        return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    before = handlers()
    try:
        monkeypatch.setattr(interrupts, "_installed", False)
        interrupts.reclaim()  # what the Ray adapter calls after ray.init: a no-op unless the command installed
        assert handlers() == before
        monkeypatch.setattr(interrupts, "_installed", True)  # and once installed, it takes them back
        interrupts.reclaim()
        assert handlers() == (interrupts._on_signal, interrupts._on_signal)
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_a_run_in_a_thread_stops_at_its_next_poll_once_abandoned(monkeypatch):
    monkeypatch.setattr(interrupts, "_abandon", type(interrupts._abandon)())
    interrupts.raise_if_abandoned()  # nothing yet
    interrupts.abandon_runs()
    with pytest.raises(interrupts.Abandoned):
        interrupts.raise_if_abandoned()
    assert isinstance(interrupts.Abandoned(), KeyboardInterrupt)


def test_a_taken_metrics_port_is_refused_before_ray_starts(tmp_path):
    """A port that cannot be bound is bad input: exit 2, nothing runs; on --runtime ray the
    check came after the embedded Ray had started (5-8 s, a Ray session folder)."""
    import ray

    from kraftlab.cli import main

    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(main, ["run", "sim-faults-smoke", "--runtime", "ray", "--metrics-port", str(port), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert f"--metrics-port {port}" in result.output and "cannot serve metrics there" in result.output
    assert not ray.is_initialized() and not (tmp_path / "r").exists()
    assert not [p for p in os.listdir(tmp_path) if "partial" in p]


DEFERRED = """
import os, signal
from actors.runtime import interrupts
interrupts.install()
try:
    with interrupts.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # bytecodes at which an undeferred handler would have raised
            pass
        print("the section ran to its end")
except KeyboardInterrupt as exc:
    print(type(exc).__name__, interrupts.exit_code(exc))
"""


def test_a_signal_in_a_deferred_section_is_raised_as_it_ends():
    """A run's folder is completed and renamed in such a section: never half of it."""
    out = subprocess.run([sys.executable, "-c", DEFERRED], capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert out[:2] == ["the section ran to its end", "Terminated 143"]


def test_the_stopped_line_says_where_the_output_is_and_whether_it_is_complete(tmp_path):
    run = tmp_path / "run"
    output = interrupts.Output(run, "the run", complete_when="summary.json")
    assert output.stopped_line() == "nothing was recorded yet"
    run.mkdir()  # `runs/<name>-<seed>-<time>/` is reserved, empty, before the run starts
    assert output.stopped_line() == "nothing was recorded yet"
    (run / "interrupted.txt").write_text("interrupted")
    assert output.stopped_line() == f"what the run recorded until then is in {run} (no summary.json)"
    (run / "summary.json").write_text("{}")
    assert output.stopped_line() == f"what the run recorded until then is in {run}"
