"""Independent seeds of a randomized sweep, computed two at a time (this machine's cores halve the
wall time). `spawn`, not fork: the test process may hold Ray's threads from the Ray tier. What a
seed returns crosses a process boundary, so it must be plain data."""

import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

WORKERS = 2


def in_seed_order(seed_outcome: Callable[..., Any], seeds: Iterable[int], *args: Any) -> Iterator[Any]:
    """`seed_outcome(seed, *args)` for each seed, in seed order; stopping early (a `break` in the
    caller) cancels the seeds not started."""
    seeds = list(seeds)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WORKERS, mp_context=ctx) as pool:
        try:
            yield from pool.map(seed_outcome, seeds, *([a] * len(seeds) for a in args), chunksize=1)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
