"""The Ray tier: real actors on a local Ray (and a multi-node `ray.cluster_utils.Cluster`).

Each module gets its own Ray (embedded, or the multi-node cluster), shut down at its end, so the
modules do not depend on each other's state.
"""

import os
import sys

import pytest

from actors.runtime.ray import adapter


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    adapter.shutdown()
    info = adapter.connect(None)
    yield info
    adapter.shutdown()
