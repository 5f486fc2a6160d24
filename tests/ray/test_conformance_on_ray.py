"""The conformance suite on a local Ray (kraftlab/conformance.py): each Kafka test case has the
result docs/conformance.md records for Ray, a few at a time as the library runs there.

A Ray run takes real time (a broker's 9 s session timeout is 9 s), 30-70 s a case here: the whole
suite is about 25 minutes on this 2-core machine, more than CI's budget allows beside the rest. So
`make test` runs one short case of each Kafka test class (`conformance.RAY_SAMPLE`), and
`KRAFTLAB_CONFORMANCE_RAY=all` (or `make conformance-ray`, which also rewrites the table's Ray
column) runs them all."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kraftlab import conformance

pytestmark = pytest.mark.ray

ALL = os.environ.get("KRAFTLAB_CONFORMANCE_RAY") == "all"
CASES = conformance.cases() if ALL else conformance.ray_sample(conformance.cases())
RECORDED = conformance.recorded_results()
PARALLEL = 3


@pytest.fixture(scope="module")
def results(local_ray, tmp_path_factory):
    root = Path(tmp_path_factory.mktemp("ray-conformance"))
    pool = ThreadPoolExecutor(PARALLEL)
    futures = {c.name: pool.submit(conformance.run_case, c, "ray", root) for c in CASES}
    yield futures
    pool.shutdown(wait=True)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_has_its_recorded_result_on_ray(case, results):
    recorded = RECORDED.get(case.name, {}).get("ray")
    assert recorded == case.expected_on_ray, f"{case.name}: the table records {recorded!r} on Ray, the file expects {case.expected_on_ray!r}"
    result, why, _ = results[case.name].result()
    assert result == recorded, f"{case.kafka_name} on Ray: {why}"
