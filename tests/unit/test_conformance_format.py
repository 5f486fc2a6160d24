"""The conformance suite's file format (kraftlab/conformance.py): the Kafka test and its rule open
the description, a difference on purpose is a paragraph of its own, and the table round-trips."""

from pathlib import Path

import pytest

from kraftlab import conformance

CASE = """name: pcb-example
description: >-
  PartitionChangeBuilderTest.testExample: a rule
  over two | lines.

  How the scenario gets there.

  Differs on purpose: kraftlab keeps rule 1 | of §6.7.
steps: [{wait: 1}]
"""


def write(tmp_path: Path, text: str, stem: str = "pcb-example") -> Path:
    path = tmp_path / f"{stem}.yaml"
    path.write_text(text)
    return path


def test_the_description_names_the_test_the_rule_and_a_difference(tmp_path):
    case = conformance.read_case(write(tmp_path, CASE))
    assert (case.kafka_name, case.rule) == ("PartitionChangeBuilderTest.testExample", "a rule over two | lines.")
    assert case.difference == "Differs on purpose: kraftlab keeps rule 1 | of §6.7." and case.expected == conformance.DIFFERS
    later = conformance.read_case(write(tmp_path, CASE.replace("Differs on purpose:", "Not modelled yet:")))
    assert later.difference.startswith("Not modelled yet: ") and later.expected == conformance.DIFFERS
    timing = conformance.read_case(write(tmp_path, CASE.replace("Differs on purpose:", "On Ray:")))
    assert (timing.difference, timing.expected, timing.expected_on_ray) == (None, conformance.AGREES, conformance.DIFFERS)


@pytest.mark.parametrize("text, words", [
    (CASE.replace("PartitionChangeBuilderTest.testExample: ", ""), "KafkaTestClass.testMethod"),
    (CASE.replace("name: pcb-example", "name: other"), "the file's stem"),
])
def test_a_file_that_does_not_follow_the_format_is_named(tmp_path, text, words):
    with pytest.raises(conformance.SuiteError, match=words) as refused:
        conformance.read_case(write(tmp_path, text))
    assert "pcb-example.yaml" in str(refused.value)


def test_the_table_reads_back_the_results_it_shows(tmp_path):
    case = conformance.read_case(write(tmp_path, CASE))
    table = tmp_path / "conformance.md"
    table.write_text(conformance.render([case], {case.name: {"sim": "differs", "ray": "not run"}}, [{"test": "X.testY", "missing": "a step"}]))
    assert conformance.recorded_results(table) == {"pcb-example": {"sim": "differs", "ray": "not run"}}
    assert "- `X.testY`: a step" in table.read_text() and "kraftlab keeps rule 1" in table.read_text()
