"""Loading a scenario: find the file, parse YAML, apply `--set` overrides, validate.

Every problem becomes a `ScenarioError` that names the file, the key path (as `--set` writes it,
e.g. `steps[3].crash.mode`), the line where YAML put that key, and what was expected. The caller
turns it into exit code 2 before anything runs or is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .expected_keys import UNION_MEMBER, keys_expected
from .references import check_references
from .schema import Scenario
from .step_spec import STEP_TYPES

LIBRARY_DIR = Path(__file__).resolve().parents[1] / "library"  # workloads/library


@dataclass(frozen=True)
class Problem:
    path: str  # key path, "" for the whole file
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.path or "(file)"
        line = f" (line {self.line})" if self.line else ""
        return f"{where}{line}: {self.message}"


class ScenarioError(Exception):
    """An invalid scenario or override: exit code 2, nothing runs."""

    def __init__(self, file: str, problems: Iterable[Problem]) -> None:
        self.file = file
        self.problems = list(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        lines = [f"{self.file}: invalid scenario ({len(self.problems)} problem{'s' if len(self.problems) != 1 else ''})"]
        lines += [f"  {self.file}: {p}" for p in self.problems]
        return "\n".join(lines)


# --- finding and parsing ---------------------------------------------------------------------


def library_scenarios() -> dict[str, Path]:
    """The built-in scenario library: name (the file's stem) -> path."""
    return {p.stem: p for p in sorted(LIBRARY_DIR.glob("*.yaml"))}


def resolve_source(arg: str) -> Path:
    """A path to a scenario file, or the name of a library scenario."""
    return resolve_in_library(arg, library_scenarios(), "scenario", ScenarioError)


def resolve_in_library(arg: str, library: dict[str, Path], what: str, error: type[ScenarioError]) -> Path:
    """A path to a YAML file, or the name of one in `library` (`what`: "scenario", "campaign")."""
    path = Path(arg)
    if path.is_file():
        return path
    if arg in library:
        return library[arg]
    if path.is_dir():  # it exists, so "no such file" would mislead
        raise error(arg, [Problem("", f"is a directory; expected a {what} YAML file or a library {what} name")])
    if path.suffix in (".yaml", ".yml") or "/" in arg:
        raise error(arg, [Problem("", "no such file")])
    raise error(arg, [Problem("", f"no such file or library {what} (library: {', '.join(library) or 'empty'})")])


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError as exc:
            raise yaml.constructor.ConstructorError(None, None, f"unhashable key {key!r}", key_node.start_mark) from exc
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, file: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ScenarioError(file, [Problem("", f"YAML syntax error: {exc.problem or exc}", line)]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(file, [Problem("", f"YAML syntax error: {exc}")]) from None


# --- writing ------------------------------------------------------------------------------------


class _ScenarioDumper(yaml.SafeDumper):
    """YAML as a person writes it: a text of several lines (a description, a campaign run's
    schedule) as a literal block, one line of the file per line of the text."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_ScenarioDumper.add_representer(str, _text)


def dump_scenario(raw: dict[str, Any]) -> str:
    """A scenario mapping as a scenario file, in its keys' order (`load_scenario` reads it back)."""
    return yaml.dump(raw, Dumper=_ScenarioDumper, sort_keys=False, allow_unicode=True, width=120)


# --- overrides (--set KEY=VALUE) -------------------------------------------------------------


def apply_overrides(raw: dict, overrides: Iterable[str], file: str) -> dict:
    """Set keys by dotted path. After a `config` segment the rest of the path is one Kafka config
    name (`cluster.config.min.insync.replicas=3`); numeric segments index lists (`topics.0.partitions=2`).
    Values are parsed as YAML scalars (`false`, `3`, `page_cache`)."""
    for item in overrides:
        if "=" not in item:
            raise ScenarioError(file, [Problem(f"--set {item}", "expected KEY=VALUE")])
        key, _, text = item.partition("=")
        segments = [s for s in key.strip().split(".")]
        if not key.strip() or any(not s for s in segments):
            raise ScenarioError(file, [Problem(f"--set {item}", "expected a dotted key path like cluster.brokers")])
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        _set_path(raw, segments, value, item, file)
    return raw


def _set_path(raw: Any, segments: list[str], value: Any, item: str, file: str) -> None:
    node = raw
    i = 0
    while i < len(segments):
        seg = segments[i]
        last = i == len(segments) - 1
        if i > 0 and segments[i - 1] == "config" and isinstance(node, dict):
            node[".".join(segments[i:])] = value  # Kafka config names contain dots
            return
        if isinstance(node, list):
            if not seg.isdigit() or int(seg) >= len(node):
                raise ScenarioError(file, [Problem(f"--set {item}", f"{seg!r} is not an index of a list of {len(node)}")])
            if last:
                node[int(seg)] = value
                return
            node = node[int(seg)]
        elif isinstance(node, dict):
            if last:
                node[seg] = value
                return
            if seg not in node or node[seg] is None:
                node[seg] = {}
            node = node[seg]
        else:
            raise ScenarioError(file, [Problem(f"--set {item}", f"{'.'.join(segments[:i])} is not a mapping")])
        i += 1


# --- validation ------------------------------------------------------------------------------


def _format_loc(loc: tuple, raw: Any = None) -> str:
    """('steps', 3, 'crash', 'crash', 'mode') -> 'steps[3].crash.mode' (a tagged union repeats the tag).

    An int is a list index (`[3]`) where the raw data has a list, else a mapping key (`.3`)."""
    parts: list[Any] = list(loc)
    cleaned: list[Any] = []
    for i, p in enumerate(parts):
        if cleaned and isinstance(p, str) and p in STEP_TYPES and i + 1 < len(parts) and parts[i + 1] == p:
            continue  # the discriminator's tag, followed by the field of the same name
        if isinstance(p, str) and UNION_MEMBER.fullmatch(p):
            continue  # a union member's name, not a key
        cleaned.append(p)
    out = ""
    node = raw
    for p in cleaned:
        out += f"[{p}]" if isinstance(p, int) and isinstance(node, list) else (f".{p}" if out else str(p))
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            node = None
    return out


def _parse_path(path: str) -> tuple:
    """'steps[3].produce.partition' -> ('steps', 3, 'produce', 'partition') (`_format_loc` reversed)."""
    return tuple(int(index) if index else key for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path))


def _walk(root: yaml.Node | None, loc: tuple) -> tuple[int | None, bool]:
    """(the line of the deepest YAML node the key path reaches, whether the file holds the whole
    path). Parts left past a scalar are a union member's name, not keys."""
    if root is None:
        return None, False
    node, line = root, root.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None)
            if match is None:
                return line, False
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode):
            if not (isinstance(part, int) and part < len(node.value)):
                return line, False
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line, True
    return line, True


def _line_of(root: yaml.Node | None, loc: tuple) -> int | None:
    """The line of the deepest YAML node the key path reaches."""
    return _walk(root, loc)[0]


def _message(err: dict, model: type[BaseModel] | None = None) -> str:
    kind, msg, given = err["type"], err["msg"], err.get("input")
    if kind == "extra_forbidden":
        expected = keys_expected(model, tuple(err["loc"])) if model is not None else []
        return f"unknown key (expected one of: {', '.join(expected)})" if expected else "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind == "unknown_step":
        got = list(given) if isinstance(given, dict) else given
        return f"{msg} (got {got!r})"
    msg = msg.removeprefix("Value error, ")
    if isinstance(given, dict | list) or "got " in msg:
        return msg  # the message says what it got already
    return f"{msg} (got {given!r})"


def _made_by_override(path: str, in_file: bool, overrides: Iterable[str]) -> str | None:
    """The `--set` item a problem at `path` comes from: one that set that key, or one under or
    above it when the file itself does not hold the key (`in_file`). None: the file's own."""
    for item in overrides:
        key = item.split("=", 1)[0]
        if key == path or (not in_file and (key.startswith(path + ".") or path.startswith((key + ".", key + "[")))):
            return item
    return None


def validate(raw: Any, file: str, text: str | None = None, overrides: Iterable[str] = ()) -> Scenario:
    """`overrides`: the `--set` items applied to `raw`, so that a problem they made is reported as
    theirs, not at a line of the file that does not hold them."""
    if not isinstance(raw, dict):
        raise ScenarioError(file, [Problem("", f"expected a mapping at the top level, got {type(raw).__name__}")])
    root = None
    if text is not None:
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            root = None
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            path, message = _format_loc(loc, raw), _message(err, Scenario)
            line, in_file = _walk(root, loc)
            item = _made_by_override(path, in_file, overrides)
            if item is not None:
                message, line = f"{message} (from --set {item})", None
            problems.append(Problem(path, message, line))
        raise ScenarioError(file, merge_alternatives(problems)) from None
    problems = [Problem(path, msg, _line_of(root, _parse_path(path))) for path, msg in check_references(scenario)]
    if problems:
        raise ScenarioError(file, problems)
    return scenario


def merge_alternatives(problems: list[Problem]) -> list[Problem]:
    """One problem per key path: a value that fits none of a union's members (`seeds`: a count or
    [first, last]) gets one error per member; they become one, "...; or ...", in file order."""
    merged: dict[str, Problem] = {}
    for p in problems:
        seen = merged.get(p.path)
        if seen is None:
            merged[p.path] = p
        elif p.message not in seen.message.split("; or "):
            merged[p.path] = Problem(p.path, f"{seen.message}; or {p.message}", seen.line or p.line)
    return list(merged.values())


def read_yaml_file(path: Path, error: type[ScenarioError] = ScenarioError) -> tuple[str, Any]:
    """A file's text and its parsed YAML; unreadable or bad YAML raises `error` naming the file."""
    file = str(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(file, [Problem("", f"cannot read: {exc}")]) from None
    try:
        return text, parse_yaml(text, file)
    except ScenarioError as exc:
        raise error(file, exc.problems) from None


def load_scenario(arg: str, overrides: Iterable[str] = (), *, seed: int | None = None, runtime: str | None = None) -> tuple[Scenario, Path]:
    """Read, override and validate a scenario given as a path or a library name."""
    path = resolve_source(arg)
    file = str(path)
    text, raw = read_yaml_file(path)
    if raw is None:
        raise ScenarioError(file, [Problem("", "the file is empty; expected a scenario mapping with at least `name`")])
    if isinstance(raw, dict):
        raw = apply_overrides(raw, overrides, file)
        if seed is not None:
            raw["seed"] = seed
        if runtime is not None:
            raw["runtime"] = runtime
    return validate(raw, file, text, tuple(overrides)), path
