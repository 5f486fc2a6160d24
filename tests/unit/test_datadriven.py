"""The scripted tests' file format (tests/datadriven.py): parsed, compared and rewritten."""

import pytest

from tests import datadriven

SCRIPT = """# what the case shows
echo word=hello
an input line
----
hello
an input line

echo word=bye
----
"""


def echo(case: datadriven.Case) -> str:
    return "\n".join([case.arg("word"), *case.input])


def test_a_script_is_read_as_commands_inputs_and_outputs(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text(SCRIPT)
    first, second = datadriven.parse(path)
    assert (first.line, first.command, first.args, first.input, first.expected, first.comments) == (
        2, "echo", {"word": "hello"}, ["an input line"], "hello\nan input line", ["# what the case shows"])
    assert (second.line, second.input, second.expected) == (8, [], "")


def test_an_output_that_differs_fails_and_rewrite_writes_the_actual_one(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text(SCRIPT)
    with pytest.raises(AssertionError, match=r"s.txt:8: echo printed\nbye\nexpected\n\n"):
        datadriven.run(path, echo)
    datadriven.run(path, echo, rewrite=True)
    assert path.read_text() == SCRIPT.replace("----\n", "----\nbye\n").replace("----\nbye\nhello", "----\nhello", 1)
    datadriven.run(path, echo)  # holds now


def test_a_case_without_its_separator_names_the_file_and_line(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("echo word=x\ninput\n\nnext\n")
    with pytest.raises(datadriven.ScriptError, match=r"s.txt:1: echo: expected a line '----' before the blank line 3"):
        datadriven.parse(path)
