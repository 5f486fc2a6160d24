"""One Spark session for every test of this folder (starting one costs seconds and a JVM), on one
local core with few shuffle partitions: the machine's other core belongs to other work."""

from __future__ import annotations

import pytest

from observability.analysis.session import start_local


# The tests' histories are tiny: compiling each query's Java code (whole-stage and expression
# code generation) costs more than running it, about a third of each analysis here. The results do
# not depend on it (Spark interprets the same plans); real analyses keep Spark's defaults.
TINY_HISTORIES = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    session = start_local(tmp_path_factory.mktemp("spark-logs"))
    for key, value in TINY_HISTORIES.items():
        session.conf.set(key, value)
    yield session
    session.stop()


def pytest_collection_modifyitems(items):
    # Every test here needs Spark (a JVM): `-m "not spark"` leaves them out.
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
