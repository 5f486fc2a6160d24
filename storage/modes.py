"""Durability modes and crash kinds (docs/explanation/architecture.md, "The simulator": its hosts, processes and disks).

| mode           | ack path                         | process crash          | OS crash / power loss      |
|----------------|----------------------------------|------------------------|----------------------------|
| fsync          | flush before acknowledging       | nothing lost           | nothing acknowledged lost  |
| page_cache     | write only; background flush     | nothing lost           | the unflushed suffix lost  |
| process_buffer | held in process memory until     | the unflushed suffix   | the unflushed suffix lost  |
|                | flushed                          | is lost                |                            |

A disk loss loses everything in every mode.
"""

from __future__ import annotations

from enum import Enum


class StorageMode(str, Enum):
    FSYNC = "fsync"
    PAGE_CACHE = "page_cache"
    PROCESS_BUFFER = "process_buffer"

    @property
    def flush_before_ack(self) -> bool:
        """Whether a role must make a write durable before acknowledging it."""
        return self is StorageMode.FSYNC

    @property
    def unflushed_survives_process_crash(self) -> bool:
        """Unflushed writes live in the OS page cache (they survive the process) unless the mode
        keeps them in the process's own memory."""
        return self is not StorageMode.PROCESS_BUFFER


class CrashKind(str, Enum):
    PROCESS = "process"  # the process dies (SIGKILL); the OS and its page cache live on
    OS = "os"  # the host dies (kernel panic, power loss): every process and the page cache
    DISK = "disk"  # the disk is replaced: the host's processes die and every file is gone
