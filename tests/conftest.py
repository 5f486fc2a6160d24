"""How `make test` shares this machine's two cores between the tiers (pytest-xdist: `-n 2
--dist loadscope`, with the groups this module's scheduler makes).

The simulator's tests are CPU-bound; the Ray tier mostly waits out real timeouts (a broker's 9 s
session is 9 s). Run side by side, each fills the other's idle time. So:

- every module that starts a Ray (tests/ray, tests/testbed, and RayDP's comparison in tests/spark)
  is one group, run by one worker one module after another, as without xdist: the Ray tests already
  run three clusters at a time, and two Rays at once would double that on two cores;
- the Spark tests share one Spark session (tests/spark/conftest.py) and the Prometheus tests one
  Prometheus: each of these tiers is a group;
- every other module is a group of its own, so that its module-scoped fixtures (a sweep's or a
  suite's runs) are computed once, by one worker.

Groups go out largest first; a worker takes the next group when it is nearly done with its own.
Without xdist (`pytest tests`, one process) none of this applies.
"""

from __future__ import annotations

RAY_DIRS = ("tests/ray/", "tests/testbed/")
RAY_MODULES = ("tests/spark/test_engines.py",)  # RayDP against local Spark
SHARED_SESSION_DIRS = {"tests/spark/": "spark", "tests/prometheus/": "prometheus"}


def group_of(nodeid: str) -> str:
    """The group of a test, from its node id (all that xdist's scheduler sees)."""
    module = nodeid.split("::", 1)[0]
    if module.startswith(RAY_DIRS) or module in RAY_MODULES:
        return "ray"
    for folder, group in SHARED_SESSION_DIRS.items():
        if module.startswith(folder):
            return group
    return module


def pytest_xdist_make_scheduler(config, log):
    # xdist's own loadgroup reads `xdist_group` marks through the node id, which pytest 9 no longer
    # lets a plugin rewrite: the groups are made here instead, from the node id.
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return TierScheduling(config, log)
