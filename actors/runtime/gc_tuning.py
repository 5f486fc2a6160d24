"""The garbage collector's thresholds for processes that carry kraftlab's event streams.

A run allocates millions of short-lived tuples (messages, events, history rows) while it holds a
large, slowly growing set of long-lived ones (logs, the cluster view, the checks' state). With
CPython's default thresholds (700, 10, 10) a young collection runs every 700 allocations and the
older generations are rescanned often, so the collector's work follows the size of what the process
holds. Almost nothing kraftlab allocates forms a reference cycle (reference counting frees it), so
collecting less often changes no behaviour and costs little memory. Measured on this 2-core
machine: `bench/sim_scale.py --partitions 1000` at 1.06x real time with the defaults, 1.44x with
these thresholds (1.29x with 10,000 for the young generation alone); one campaign run of the
standard campaign 10.3 s -> 9.2 s with a lower peak RSS (309 MB -> 291 MB).

Called where such a process starts: the `kraftlab` command, a campaign's Ray task, a node actor.
It does no I/O and changes no result: a collection only frees unreachable objects.
"""

from __future__ import annotations

import gc

YOUNG_ALLOCATIONS = 50_000  # allocations minus deallocations between two young collections
YOUNG_PER_MIDDLE = 20  # young collections between two collections of the middle generation
MIDDLE_PER_OLD = 100  # middle collections between two full ones (CPython adds its 25% rule)


def tune_for_event_streams() -> None:
    """Collect less often (see the module). Idempotent."""
    gc.set_threshold(YOUNG_ALLOCATIONS, YOUNG_PER_MIDDLE, MIDDLE_PER_OLD)
