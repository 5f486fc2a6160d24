"""How `make test` shares this machine's two cores between the tiers (pytest-xdist, two workers,
`--dist loadgroup`).

The simulator's tests are CPU-bound; the Ray tier mostly waits out real timeouts (a broker's 9 s
session is 9 s). Run side by side, each fills the other's idle time. So:

- every test that starts a Ray (markers `ray` and `testbed`) is in one group, so that one worker
  runs them one after another, as without xdist: two Rays at once would share this machine's
  /tmp/ray and double the actors each Ray test already runs three clusters of;
- the Spark tests share one Spark session (tests/spark/conftest.py) and the Prometheus tests one
  Prometheus: each tier is a group;
- every other module is a group of its own, so that its module-scoped fixtures (a sweep's or a
  suite's runs) are computed once, by one worker.

Without xdist (`pytest tests`, one process) the groups are ignored.
"""

from __future__ import annotations

import pytest


def xdist_group_of(item: pytest.Item) -> str:
    path = item.nodeid.split("::", 1)[0]
    if item.get_closest_marker("ray") or item.get_closest_marker("testbed"):
        return "ray"
    if path.startswith("tests/spark/"):
        return "spark"
    if path.startswith("tests/prometheus/"):
        return "prometheus"
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))
