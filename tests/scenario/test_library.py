"""Every scenario of the built-in library passes in the simulator (each file carries its own
expectations: steps with expected states, and the invariants a protocol variant is meant to break),
to the trace hash tests/golden/trace-hashes.json holds for it (tests/trace_hashes.py)."""

import pytest

from kraftlab import conformance
from kraftlab.runner import run_scenario
from tests import trace_hashes
from workloads.scenario.loading import library_scenarios, load_scenario


@pytest.mark.parametrize("name", sorted(library_scenarios()))
def test_library_scenario_passes(name, tmp_path):
    path = library_scenarios()[name]
    scenario, _ = load_scenario(str(path))
    result = run_scenario(scenario, source=name, out_dir=tmp_path / "run")
    summary = result.summary
    assert summary["ok"], (summary["failures"], summary["violations"], summary["epilogue_violations"])
    # `ok` counts every violation, those first found after the last step included (docs/reference).
    assert {v["invariant"] for v in summary["epilogue_violations"]} <= set(scenario.expect_violations)
    trace_hashes.check("library", name, summary["stats"]["trace_hash"])


def test_the_golden_file_names_every_library_scenario_and_conformance_case():
    kept = trace_hashes.golden()
    assert sorted(kept["library"]) == sorted(library_scenarios()), "run `make trace-hashes`"
    assert sorted(kept["conformance"]) == sorted(c.name for c in conformance.cases()), "run `make trace-hashes`"


def test_a_data_plane_scenario_replays_to_the_same_trace_hash(tmp_path):
    path = library_scenarios()["last-replica-standing-no-elr"]
    hashes = []
    for i in range(2):
        scenario, _ = load_scenario(str(path))
        hashes.append(run_scenario(scenario, source="x", out_dir=tmp_path / f"run{i}").summary["stats"]["trace_hash"])
    scenario, _ = load_scenario(str(path), seed=1)
    other = run_scenario(scenario, source="x", out_dir=tmp_path / "other").summary["stats"]["trace_hash"]
    assert hashes[0] == hashes[1] != other
