"""The conformance suite (workloads/conformance/, kraftlab/conformance.py): Kafka's own test cases
as scenario files. In the simulator, every case has the result docs/conformance.md records for it,
that result is "agrees" unless the file documents a difference on purpose, and the table is the
one the files generate: it is stale when a file or a result changed without `make conformance`.
Each case's simulated run has the trace hash tests/golden/trace-hashes.json holds."""

from __future__ import annotations

import pytest

from kraftlab import conformance
from tests import trace_hashes

CASES = conformance.cases()
RECORDED = conformance.recorded_results()


def test_the_suite_translates_at_least_sixty_kafka_tests():
    # One scenario per test case; a parameterized Kafka test may have one per parameter.
    assert len({c.kafka_name for c in CASES}) >= 60 and len(CASES) >= 60


def test_the_table_is_the_one_the_files_generate():
    expected = conformance.render(CASES, RECORDED, conformance.inexpressible())
    assert conformance.TABLE.read_text() == expected, "docs/conformance.md is stale: run `make conformance`"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_has_its_recorded_result_in_the_simulator(case, tmp_path):
    recorded = RECORDED.get(case.name, {}).get("sim")
    assert recorded == case.expected, (
        f"{case.name}: the table records {recorded!r}, the file expects {case.expected!r}"
        " (a case differs only on purpose, with a `Differs on purpose:` paragraph)"
    )
    result, why, trace_hash = conformance.run_case(case, "sim", tmp_path)
    assert result == recorded, f"{case.kafka_name}: {why}"
    trace_hashes.check("conformance", case.name, trace_hash)


def test_the_ray_sample_has_one_case_of_each_kafka_test_class_that_agrees_on_ray():
    cases = conformance.cases()
    sample = conformance.ray_sample(cases)
    assert sorted(c.name for c in sample) == sorted(conformance.RAY_SAMPLE)  # no stale name
    assert sorted(c.kafka_class for c in sample) == sorted({c.kafka_class for c in cases})
    recorded = conformance.recorded_results()
    assert all(recorded[c.name]["ray"] == conformance.AGREES for c in sample)
