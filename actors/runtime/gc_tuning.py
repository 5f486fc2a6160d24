"""The garbage collector's thresholds for processes that carry kraftlab's event streams.

A run allocates millions of short-lived tuples (messages, events, history rows) while it holds a
large, slowly growing set of long-lived ones (logs, the cluster view, the checks' state). With
CPython's default thresholds (700, 10, 10) a young collection runs every 700 allocations and the
older generations are rescanned often, so the collector's work follows the size of what the process
holds. The short-lived objects form no reference cycle (reference counting frees them), so
collecting less often changes no behaviour during a run. Measured on this 2-core
machine: `bench/sim_scale.py --partitions 1000` at 1.06x real time with the defaults, 1.44x with
these thresholds (1.29x with 10,000 for the young generation alone); one campaign run of the
standard campaign 10.3 s -> 9.2 s with a lower peak RSS (309 MB -> 291 MB).

Called where such a process starts: the `kraftlab` command, a campaign's Ray task, a node actor.
It does no I/O and changes no result: a collection only frees unreachable objects.

The long-lived objects of a run do form cycles: the simulator holds the roles, which hold callbacks
into it, and so on, so a finished run's whole world (25,500 objects for a short library scenario)
is one cycle that only a full collection frees, and at these thresholds a full collection almost
never comes. A process running one run after another (a campaign's in-process loop or Ray worker)
grew by each run's world: 2-3 MB a run of 1,000 partitions, 1 GB after 300 of them. So
`release_finished_run` collects once a run is over. Its first call also freezes what the process
holds by then (modules, libraries: long-lived by nature), so that later collections skip it:
a collection after a short run took 45-60 ms, and takes 10-13 ms so.
"""

from __future__ import annotations

import gc

YOUNG_ALLOCATIONS = 50_000  # allocations minus deallocations between two young collections
YOUNG_PER_MIDDLE = 20  # young collections between two collections of the middle generation
MIDDLE_PER_OLD = 100  # middle collections between two full ones (CPython adds its 25% rule)


def tune_for_event_streams() -> None:
    """Collect less often (see the module). Idempotent."""
    gc.set_threshold(YOUNG_ALLOCATIONS, YOUNG_PER_MIDDLE, MIDDLE_PER_OLD)


_frozen = False


def release_finished_run() -> None:
    """Free the world of a run that just ended (see the module); the first call freezes what the
    process holds by then. No I/O, no result changed."""
    global _frozen
    gc.collect()
    if not _frozen:
        gc.freeze()
        _frozen = True
