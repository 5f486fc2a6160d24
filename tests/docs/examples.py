"""The documentation's examples, checked by the test suite so that they cannot rot (Sybil parses
every fenced block of README.md and docs/; test_examples.py evaluates each as a test):

- every `yaml` block that is a scenario or a campaign file, or a part of one (a `cluster:` and
  `topics:`, a list of steps), must validate as kraftlab validates files; a block that includes a
  file (`--8<-- "path"`, the docs' snippets) is checked as that file;
- every `kraftlab ...` line of an `sh` block must name a command and options that exist, with values
  of the right type (click parses it, nothing runs);
- an `sh` block right after an `<!-- exits: N -->` comment runs: each of its `kraftlab` lines must
  exit with N (simulator commands only: they take a second);
- a `python` block right after an `<!-- runs -->` comment runs, in the folder where the page's
  earlier blocks ran (so it can read the run they made), and must not raise.

A block the checks cannot take (another tool's YAML) says so with `<!-- skip: next -->` before it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import click
import yaml
from sybil import Sybil
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
INFO = re.compile(r"(?P<language>[\w-]+)(?P<attrs>[^\n]*)$\n", re.M)
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"\s*$', re.M)
EXITS = re.compile(r"<!--\s*exits:\s*(?P<code>\d+)\s*-->$")
RUNS = re.compile(r"<!--\s*runs\s*-->$")
DOC_SCENARIO = "doc-example"


def expand_snippets(text: str) -> str:
    """The text as the built page shows it: each `--8<-- "path"` replaced by the file."""
    return SNIPPET.sub(lambda m: (ROOT / m["path"]).read_text(), text)


def kraftlab_lines(text: str) -> list[list[str]]:
    """The `kraftlab` commands of a shell block, as argument lists (comments and line joins handled)."""
    text = text.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenting = True, True
        words = list(lexer)
        # One command: up to a pipe, a redirection, `&`, `&&` or `;`.
        words = words[: next((i for i, w in enumerate(words) if set(w) <= set("|&;<>")), len(words))]
        if words[:1] == ["sudo"]:
            words = words[1:]
        if words and words[0] in ("kraftlab", ".venv/bin/kraftlab"):
            out.append(words[1:])
    return out


def parse_command(args: list[str]) -> None:
    """Parse a `kraftlab` command line as the command would, without running it."""
    from kraftlab.cli import main

    command: click.Command = main
    ctx = command.make_context("kraftlab", list(args), resilient_parsing=False)
    while isinstance(command, click.Group):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # click 9 folds protected_args into args
            rest = [*ctx.protected_args, *ctx.args]
        if not rest:
            return
        name, command, rest = command.resolve_command(ctx, rest)
        assert command is not None, f"kraftlab: no command {name!r}"
        ctx = command.make_context(name, rest, parent=ctx)


def check_shell(example) -> None:
    for args in kraftlab_lines(example.parsed):
        try:
            parse_command(args)
        except click.exceptions.Exit:
            pass  # --help, --version
        except click.UsageError as exc:
            raise AssertionError(f"kraftlab {' '.join(args)}: {exc.format_message()}") from None


def run_shell(code: int):
    def evaluate(example) -> None:
        check_shell(example)
        work = Path(example.namespace.setdefault("_work", _workdir(example)))
        for args in kraftlab_lines(example.parsed):
            proc = subprocess.run([sys.executable, "-m", "kraftlab.cli", *args], cwd=work, capture_output=True, text=True,
                                  timeout=300, env=_env())
            assert proc.returncode == code, f"kraftlab {' '.join(args)} exited {proc.returncode}, the page says {code}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return evaluate


def run_python(example) -> None:
    work = Path(example.namespace.setdefault("_work", _workdir(example)))
    cwd = os.getcwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stdout(None):
            exec(compile(example.parsed, f"{example.path}:{example.line}", "exec"), {"__name__": "docs_example"})
    finally:
        os.chdir(cwd)


def _workdir(example) -> str:
    return tempfile.mkdtemp(prefix="docs-example-")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def check_yaml(example) -> None:
    from workloads.campaign.spec import load_campaign
    from workloads.scenario.loading import validate

    text = expand_snippets(example.parsed)
    raw = yaml.safe_load(text)
    if isinstance(raw, dict) and "scenario" in raw:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "campaign.yaml"
            path.write_text(text)
            load_campaign(str(path))
        return
    if isinstance(raw, list):  # a list of steps
        raw = {"topics": [{"name": "t"}], "steps": raw}
    assert isinstance(raw, dict) and raw.keys() & {"name", "cluster", "topics", "steps"}, (
        "a yaml block that is neither a scenario nor a campaign (nor a part of one): mark it <!-- skip: next -->")
    validate({"name": DOC_SCENARIO, "steps": [], **raw}, example.path, text)


def fenced_blocks(document):
    """Each `yaml` and `sh` fenced block, with the check that fits it."""
    for region in RawFencedCodeBlockLexer(info_pattern=INFO)(document):
        language = region.lexemes["language"]
        before = document.text[: region.start].rstrip().splitlines()
        exits = EXITS.search(before[-1]) if before else None
        if language == "yaml":
            region.evaluator = check_yaml
        elif language == "sh":
            region.evaluator = run_shell(int(exits["code"])) if exits else check_shell
        elif language == "python" and before and RUNS.search(before[-1]):
            region.evaluator = run_python
        else:
            continue
        region.parsed = str(region.lexemes["source"])
        yield region


SYBIL = Sybil(parsers=[fenced_blocks, SkipParser()], path=str(ROOT), patterns=["README.md", "docs/*.md", "docs/**/*.md"])


def documented_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
