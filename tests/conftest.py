"""How `make test` shares this machine's two cores between the tiers.

It runs in two passes (Makefile). First every tier that starts no Ray, on two pytest-xdist workers
(`-n 2 --dist loadscope`, with the groups this module's scheduler makes): the simulator's tests
are CPU-bound and independent, so two run at once. Then the tiers that start a Ray (markers `ray`
and `testbed`), in one process, one test after another: their timeouts are real time (a broker's
9 s session is 9 s), and CPU-bound tests beside them make them late (on two cores, expected
losses, cleanup bounds and election timings then miss their marks).

The groups of the first pass:
- the Spark tests share one Spark session (tests/spark/conftest.py) and the Prometheus tests one
  Prometheus: each of these tiers is a group, run by one worker;
- every other module is a group of its own, so that its module-scoped fixtures (a sweep's or a
  suite's runs) are computed once, by one worker;
- the modules that start a Ray are one group too, should a run select them with xdist.

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


def pytest_addoption(parser):
    parser.addoption("--rewrite", action="store_true", default=False,
                     help="scripted role tests (tests/datadriven.py): write the actual outputs into their files")
