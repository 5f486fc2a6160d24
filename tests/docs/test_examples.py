"""Every example of README.md and docs/ (examples.py says which blocks and how each is checked)."""

from __future__ import annotations

import pytest

from workloads.scenario.loading import ScenarioError

from .examples import ROOT, SYBIL, documented_pages


def _examples():
    for page in documented_pages():
        document = SYBIL.parse(page)
        for example in document.examples():
            yield pytest.param(example, id=f"{page.relative_to(ROOT)}:{example.line}")


EXAMPLES = list(_examples())


def test_the_docs_have_examples_of_each_kind():
    languages = {e.values[0].region.lexemes["language"] for e in EXAMPLES}
    assert {"yaml", "sh"} <= languages


@pytest.mark.parametrize("example", EXAMPLES)
def test_example(example):
    example.evaluate()


def test_the_checks_fail_on_a_wrong_example(tmp_path):
    """A scenario block with a wrong value, a command with a misspelled option, a command whose
    exit code is not the one the page states, and Python that raises each fail their test."""
    page = tmp_path / "page.md"
    page.write_text(
        "```yaml\nname: x\nsteps:\n  - crash: {node: b1, mode: power}\n```\n\n"
        "```sh\nkraftlab run x --sed 7\n```\n\n"
        "<!-- exits: 0 -->\n```sh\nkraftlab run last-replica-standing-elr --set cluster.protocol.elr=false\n```\n\n"
        "<!-- runs -->\n```python\nimport pyarrow.dataset as ds\nds.dataset('runs/none/events')\n```\n")
    bad_yaml, bad_option, bad_exit, bad_python = SYBIL.parse(page).examples()
    with pytest.raises(ScenarioError, match="steps\\[0\\].crash.mode"):
        bad_yaml.evaluate()
    with pytest.raises(AssertionError, match="No such option '--sed'"):
        bad_option.evaluate()
    with pytest.raises(AssertionError, match="exited 1, the page says 0"):
        bad_exit.evaluate()
    with pytest.raises(FileNotFoundError):
        bad_python.evaluate()
