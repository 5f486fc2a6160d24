"""Scripted role tests: a text file of commands fed to one role, each followed by what the role did,
in the manner of etcd-io/raft's and CockroachDB's `datadriven` tests.

A file is a sequence of cases:

    # a comment: what the case shows, and the Kafka test it ports
    command arg=value arg=value
    an input line, if the command takes one (a message, for example)
    ----
    the output the command must print

Cases are separated by a blank line; the output ends at the first blank line. A test runs each
case's command through its driver (a function of the case that returns the output's text) and
compares the output with the file's; `pytest --rewrite` writes the actual outputs into the file
instead, for a reviewer to read in the diff. Unlike an assertion on one field, the whole output is
compared: a change anywhere in what the role sends, records or becomes shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

SEPARATOR = "----"


class ScriptError(ValueError):
    """A script that does not follow the format, named by file and line."""


@dataclass
class Case:
    path: Path
    line: int  # the command's line, from 1
    command: str
    args: dict[str, str]
    input: list[str]
    expected: str
    comments: list[str]

    def arg(self, key: str, default: str | None = None) -> str:
        if key in self.args:
            return self.args[key]
        if default is None:
            raise ScriptError(f"{self.path}:{self.line}: {self.command}: expected the argument {key}=...")
        return default

    def where(self) -> str:
        return f"{self.path}:{self.line}"



def ids(text: str) -> tuple[int, ...]:
    """An argument listing ids, comma-separated (`1,2,3`; `-` or nothing for none)."""
    return () if text in ("", "-") else tuple(int(b) for b in text.split(","))


def flag(text: str) -> bool:
    """An argument that is `true` or `false`."""
    if text not in ("true", "false"):
        raise ScriptError(f"expected true or false, got {text!r}")
    return text == "true"


_ARG = re.compile(r"(\w+)=(\S+)")


def parse(path: Path) -> list[Case]:
    lines = path.read_text().splitlines()
    cases: list[Case] = []
    i, comments = 0, []
    while i < len(lines):
        line = lines[i].rstrip()
        if not line:
            i += 1
            continue
        if line.startswith("#"):
            comments.append(line)
            i += 1
            continue
        start = i
        command, *words = line.split()
        args = {}
        for word in words:
            m = _ARG.fullmatch(word)
            if m is None:
                raise ScriptError(f"{path}:{i + 1}: expected key=value arguments after {command!r}, got {word!r}")
            args[m.group(1)] = m.group(2)
        i += 1
        given = []
        while i < len(lines) and lines[i].rstrip() != SEPARATOR:
            if not lines[i].strip():
                raise ScriptError(f"{path}:{start + 1}: {command}: expected a line {SEPARATOR!r} before the blank line {i + 1}")
            given.append(lines[i].rstrip())
            i += 1
        if i == len(lines):
            raise ScriptError(f"{path}:{start + 1}: {command}: expected a line {SEPARATOR!r}")
        i += 1
        out = []
        while i < len(lines) and lines[i].strip():
            out.append(lines[i].rstrip())
            i += 1
        cases.append(Case(path, start + 1, command, args, given, "\n".join(out), comments))
        comments = []
    return cases


def render(cases: list[Case], outputs: list[str]) -> str:
    blocks = []
    for case, output in zip(cases, outputs, strict=True):
        head = [*case.comments, " ".join([case.command, *(f"{k}={v}" for k, v in case.args.items())]), *case.input, SEPARATOR]
        blocks.append("\n".join(head + ([output] if output else [])))
    return "\n\n".join(blocks) + "\n"


def run(path: Path, driver: Callable[[Case], str], rewrite: bool = False) -> None:
    """Run every case of the file through `driver`, in order (the cases of a file share the
    driver's state); fail at the first whose output differs, or rewrite the file's outputs."""
    cases = parse(path)
    outputs = [driver(case).rstrip("\n") for case in cases]
    if rewrite:
        path.write_text(render(cases, outputs))
        return
    for case, output in zip(cases, outputs, strict=True):
        assert output == case.expected, (
            f"{case.where()}: {case.command} printed\n{output}\nexpected\n{case.expected}\n"
            "(pytest --rewrite writes the actual outputs into the file)")


def scripts_test(directory: Path, driver: Callable[[], Callable[[Case], str]]):
    """A pytest test running each `*.txt` script of `directory` through a new `driver()`, one test
    per file; `pytest --rewrite` rewrites the files' outputs."""
    scripts = sorted(directory.glob("*.txt"))

    @pytest.mark.parametrize("script", scripts, ids=[p.stem for p in scripts])
    def test(script, request):
        run(script, driver(), rewrite=request.config.getoption("--rewrite"))

    return test
