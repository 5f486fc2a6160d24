"""One Spark session for every test of this folder (starting one costs seconds and a JVM), on one
local core with few shuffle partitions: the machine's other core belongs to other work."""

from __future__ import annotations

import pytest

from observability.analysis.session import start_local


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    session = start_local(tmp_path_factory.mktemp("spark-logs"))
    yield session
    session.stop()


def pytest_collection_modifyitems(items):
    # Every test here needs Spark (a JVM): `-m "not spark"` leaves them out.
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
