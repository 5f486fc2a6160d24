"""A killed actor's process, watched from its machine: whether it still runs (no Ray call)."""

from __future__ import annotations

import time
from pathlib import Path

from .constants import PROCESS_END_TIMEOUT_S


def process_is_running(pid: int) -> bool:
    """Whether process `pid` of this machine still runs (a zombie has ended: it runs no code).
    Read from /proc: Linux only; elsewhere every process counts as ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # the state follows the command name


def wait_for_processes_to_end(pids, timeout_s: float = PROCESS_END_TIMEOUT_S) -> list[int]:
    """Wait until none of `pids` runs (at most `timeout_s`); the ones still running."""
    deadline = time.monotonic() + timeout_s
    running = [pid for pid in pids if process_is_running(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.005)
        running = [pid for pid in running if process_is_running(pid)]
    return running
