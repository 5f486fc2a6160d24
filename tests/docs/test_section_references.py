"""Every section the project names exists: a link to `page.md#anchor` in README.md, CHANGELOG.md or
docs/ (the generated reference pages among them, so what kraftlab/reference_docs.py emits and the
docstrings it copies), and a section named in quotes after its page (`(docs/page.md, "Section")`)
in those and in the code's docstrings, comments and YAML files. `mkdocs build --strict` checks only
the site's own links; a README link or a docstring's section name was checked by nobody.

Anchors are computed as the site computes them: Python-Markdown's toc extension."""

from __future__ import annotations

import html
import re
import subprocess
from functools import cache
from pathlib import Path

import markdown
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# [text](target.md#anchor) in Markdown; the target relative to the page.
LINK = re.compile(r"\]\((?P<target>[^)\s#]*\.md)?#(?P<anchor>[^)\s]+)\)")
# docs/page.md, "Section"  /  page.md ("Section")  /  [text](page.md), "Section": a page, then a
# quoted name, across a line break and a comment's `#` if need be.
NAMED = re.compile(r"(?P<page>[\w./-]+\.md|\bREADME\b)\)?(?:,[ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?|[ \t]+\()"
                   r"\"(?P<name>[^\"\n]+)\"")


@cache
def sections(page: Path) -> dict[str, str]:
    """A page's headings as the site renders them: anchor id -> heading text."""
    md = markdown.Markdown(extensions=["toc", "attr_list", "pymdownx.superfences", "tables", "md_in_html", "admonition",
                                       "pymdownx.details"])  # as mkdocs.yml has them
    md.convert(page.read_text())
    out: dict[str, str] = {}

    def walk(tokens):
        for t in tokens:
            out[t["id"]] = html.unescape(t["name"])
            walk(t["children"])

    walk(md.toc_tokens)
    return out


def names_a_heading(name: str, headings: dict[str, str]) -> bool:
    """`name` is a heading's text, or the part before its colon or parenthesis
    ("Kernel faults" for "Kernel faults: `--faults kernel`")."""
    for heading in headings.values():
        text = re.sub(r"^\d+\.\s+", "", heading)  # a tutorial's numbered steps
        if name in (text, heading) or re.match(re.escape(name) + r"\s*[:(]", text):
            return True
    return False


def resolve(page: str, source: Path) -> Path | None:
    """The Markdown page a reference names: relative to the file that names it, to the repository,
    or to docs/; a bare file name when one page of docs/ has it."""
    if page == "README":
        page = "README.md"
    for base in (source.parent, DOCS.parent, DOCS):
        candidate = (base / page).resolve()
        if candidate.is_file():
            return candidate
    if "/" not in page:
        found = list(DOCS.rglob(page))
        if len(found) == 1:
            return found[0]
    return None


def broken_references(source: Path, text: str) -> list[str]:
    """What `text` (the contents of `source`) names that does not exist, one line each."""
    out = []
    where = lambda m: f"{source.name}:{text.count(chr(10), 0, m.start()) + 1}"  # noqa: E731
    if source.suffix == ".md":
        for m in LINK.finditer(text):
            target = resolve(m["target"], source) if m["target"] else source
            if target is None:
                out.append(f"{where(m)}: {m['target']} does not exist")
            elif m["anchor"] not in sections(target):
                out.append(f"{where(m)}: {m['target'] or source.name} has no section #{m['anchor']}")
    for m in NAMED.finditer(text):
        target = resolve(m["page"], source)
        if target is None:
            if m["page"].startswith("docs/"):
                out.append(f"{where(m)}: {m['page']} does not exist")
            continue
        if (target.is_relative_to(DOCS) or target.name == "README.md") and not names_a_heading(m["name"], sections(target)):
            out.append(f"{where(m)}: {m['page']} has no section \"{m['name']}\"")
    return out


def sources() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    this = Path(__file__).resolve()  # its examples of broken references are meant to be broken
    return [ROOT / f for f in tracked
            if f.endswith((".md", ".py", ".yaml", ".yml")) and (ROOT / f).is_file() and ROOT / f != this]


def test_every_named_section_exists():
    files = sources()
    assert ROOT / "README.md" in files and DOCS / "reference" / "scenario-format.md" in files
    broken = [line for f in files for line in broken_references(f, f.read_text())]
    assert broken == []


def test_anchors_are_the_site_s():
    """The anchors are Python-Markdown's: lower case, punctuation dropped, spaces as hyphens,
    numbered when a heading repeats."""
    page = DOCS / "explanation" / "protocol-facts.md"
    assert sections(page)["defaults-real-kafka-names"] == "Defaults (real Kafka names)"
    assert "kernel-faults-faults-kernel" in sections(DOCS / "testbed.md")


@pytest.mark.parametrize("text, found", [
    ("[a](other.md#no-such-heading)", "other.md has no section #no-such-heading"),
    ("[a](#nowhere)", "page.md has no section #nowhere"),
    ("[a](missing.md#top)", "missing.md does not exist"),
    ('"""Seeds (docs/other.md, "No such section")."""', 'docs/other.md has no section "No such section"'),
    ('# seeds (docs/other.md,\n# "Not here either")', 'docs/other.md has no section "Not here either"'),
    ('"""The layout (README, "No such heading")."""', 'README has no section "No such heading"'),
])
def test_a_planted_broken_reference_is_found(tmp_path, monkeypatch, text, found):
    monkeypatch.setattr(__import__(__name__, fromlist=["DOCS"]), "DOCS", tmp_path / "docs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A heading\n\n```sh\n# not a heading\n```\n")
    (tmp_path / "README.md").write_text("# kraftlab\n\n## Layout\n")
    source = tmp_path / ("docs/page.md" if text.startswith("[") else "module.py")
    source.write_text("# Page\n")
    broken = broken_references(source, text)
    assert len(broken) == 1 and broken[0].endswith(found), broken


@pytest.mark.parametrize("text", [
    "[a](other.md#a-heading)",
    '"""(docs/other.md, "A heading")."""',
    "[a](other.md#other)",
    '"""The layout (README, "Layout")."""',
])
def test_a_reference_that_exists_passes(tmp_path, monkeypatch, text):
    monkeypatch.setattr(__import__(__name__, fromlist=["DOCS"]), "DOCS", tmp_path / "docs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A heading\n\n```sh\n# not a heading\n```\n")
    (tmp_path / "README.md").write_text("# kraftlab\n\n## Layout\n")
    source = tmp_path / "docs" / "page.md"
    source.write_text("# Page\n")
    assert broken_references(source, text) == []
