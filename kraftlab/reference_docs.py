"""The documentation's reference pages that the code already knows, generated from the definitions
themselves (`make docs-reference`, or `python -m kraftlab.reference_docs`) into docs/reference/;
tests/unit/test_reference_docs.py fails when a committed page differs from what the code generates,
so that they cannot drift from the code.

- the scenario and campaign file formats, from the pydantic models' JSON Schema;
- the event kinds and their columns, from `observability/events.py`;
- the metric families, from the metrics model;
- the anomalies and invariants, with their definitions and sources.

(The command line's page is made by mkdocs-click from the click commands themselves.)
Each function returns a page's Markdown; `pages()` maps each page's path under docs/ to it.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs"

SCENARIO_PAGE = "reference/scenario-format.md"
CAMPAIGN_PAGE = "reference/campaign-format.md"
EVENTS_PAGE = "reference/events.md"
METRICS_PAGE = "reference/metrics.md"
FINDINGS_PAGE = "reference/anomalies-and-invariants.md"


def pages() -> dict[str, str]:
    """Every generated page: its path under docs/ -> its Markdown."""
    return {
        SCENARIO_PAGE: scenario_format_page(),
        CAMPAIGN_PAGE: campaign_format_page(),
        EVENTS_PAGE: events_page(),
        METRICS_PAGE: metrics_page(),
        FINDINGS_PAGE: findings_page(),
    }


# --- helpers ---------------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    """Text that fits in one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _generated_note(source: str) -> str:
    return (f'!!! note "Generated"\n    This page is generated from {source} by `make docs-reference`; a test fails when it is\n'
            "    out of date.\n")


# --- file formats, from the JSON Schema ---------------------------------------------------------


def _schema_type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    """A property's type, as a reader of YAML would say it."""
    if "$ref" in prop:
        return _ref_name(prop["$ref"])
    if "const" in prop:
        return f"`{_yaml_value(prop['const'])}`"
    if "enum" in prop:
        values = [f"`{_yaml_value(v)}`" for v in prop["enum"]]
        return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
    for key in ("anyOf", "oneOf"):
        if key in prop:
            kinds = [_schema_type(p, defs) for p in prop[key] if p.get("type") != "null"]
            nullable = any(p.get("type") == "null" for p in prop[key])
            return " or ".join(dict.fromkeys(kinds)) + (" or null" if nullable else "")
    kind = prop.get("type", "any")
    if kind == "array":
        items = prop.get("items")
        if isinstance(items, dict) and items:
            return f"list of {_schema_type(items, defs)}"
        if "prefixItems" in prop:
            return "[" + ", ".join(_schema_type(p, defs) for p in prop["prefixItems"]) + "]"
        return "list"
    if kind == "object":
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"mapping of {_schema_type(extra, defs)}"
        return "mapping"
    return {"integer": "int", "number": "number", "string": "string", "boolean": "bool"}.get(kind, kind)


def _ref_name(ref: str) -> str:
    name = ref.rsplit("/", 1)[-1]
    return f"[{name}](#{name.lower()})"


def _bounds(prop: dict[str, Any]) -> str:
    out = []
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in prop:
            out.append(f"{sign} {prop[key]}")
    if "pattern" in prop:
        out.append(f"pattern `{prop['pattern']}`")
    for p in prop.get("anyOf", []):
        b = _bounds(p)
        if b:
            out.append(b)
    return ", ".join(out)


def _description(prop: dict[str, Any]) -> str:
    if prop.get("description"):
        return prop["description"]
    for p in prop.get("anyOf", []):
        if p.get("description"):
            return p["description"]
    return ""


def _model_section(name: str, model: dict[str, Any], defs: dict[str, Any], level: str = "###") -> str:
    required = set(model.get("required", []))
    rows = []
    for key, prop in model.get("properties", {}).items():
        default = "required" if key in required else _default(prop)
        notes = "; ".join(x for x in (_description(prop), _bounds(prop)) if x)
        rows.append((f"`{key}`", _schema_type(prop, defs), default, notes))
    doc = model.get("description", "")
    parts = [f"{level} {name}", ""]
    if doc:
        parts += [" ".join(doc.split()), ""]
    parts.append(_table(("key", "type", "default", "notes"), rows) if rows else "(no keys)")
    return "\n".join(parts) + "\n"


def _default(prop: dict[str, Any]) -> str:
    """A key's default as YAML would write it; a section's (a mapping of its own keys' defaults)
    is left to that section's table."""
    if "default" not in prop:
        return ""
    value = prop["default"]
    if isinstance(value, dict) and value:
        return "its keys' defaults"
    return f"`{_yaml_value(value)}`"


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _format_page(title: str, intro: str, schema: dict[str, Any], source: str) -> str:
    defs = schema.get("$defs", {})
    parts = [f"# {title}", "", _generated_note(source), intro, "", _model_section("Top-level keys", schema, defs, level="##")]
    parts.append("## The parts, in alphabetical order\n")
    for name in sorted(defs):
        parts.append(_model_section(name, defs[name], defs))
    return "\n".join(parts)


def scenario_format_page() -> str:
    from workloads.scenario.schema import Scenario

    schema = Scenario.model_json_schema(by_alias=True)
    intro = ("A scenario file is YAML. Unknown keys are refused (exit code 2, naming the file and the key). "
             "Each step is a mapping with one key, the step's kind (`crash: b1`, `wait_for: {...}`); "
             "[Your first scenario](../tutorials/first-scenario.md) shows them at work and "
             "`kraftlab schema` prints this schema as JSON Schema, for editors.")
    return _format_page("Scenario files", intro, schema, "the scenario's pydantic models (`workloads/scenario/`)")


def campaign_format_page() -> str:
    from workloads.campaign.spec import CampaignSpec

    schema = CampaignSpec.model_json_schema(by_alias=True)
    intro = ("A campaign file is YAML: a base scenario, seeds, a matrix (and variants) of overrides, an optional "
             "random fault profile and load profile, and expectations per cell. "
             "[A campaign and its minimal failures](../tutorials/campaigns.md) walks through one.")
    return _format_page("Campaign files", intro, schema, "the campaign's pydantic model (`workloads/campaign/spec.py`)")


# --- the event history ------------------------------------------------------------------------------


def _columns_of(cls: type) -> list[tuple[str, str]]:
    """A kind's own columns and their types: a batch kind's are the keys its `rows()` writes (asked
    of an empty batch), another kind's are its fields."""
    from observability.events import COLUMN_TYPES

    names = list(_empty_batch(cls).rows()) if cls.is_batch else list(cls._fields)
    return [(n, COLUMN_TYPES[n]) for n in names]


def _empty_batch(cls: type) -> Any:
    """An instance of a batch kind with no records: every field its type's empty value."""
    empty = {tuple: (), str: "", int: 0, float: 0.0, bool: False}
    values = {}
    for name, hint in typing.get_type_hints(cls).items():
        if name in cls._field_defaults:
            continue
        origin = typing.get_origin(hint) or hint
        if origin in (typing.Union, types.UnionType):
            values[name] = None
        else:
            values[name] = empty[origin]
    return cls(**values)


def events_page() -> str:
    from observability.events import COMMON_COLUMNS, KINDS

    parts = ["# Event kinds", "", _generated_note("`observability/events.py`"),
             "A run's history (`events/`, Parquet) has one row per event. Every row has the common columns; "
             "each kind adds its own (null where a kind has none). The record kinds (`produce_send`, "
             "`produce_ack`, `consume`, `final_read`) are one row per record. "
             "[The event history](history.md) shows how to load them.", "",
             "## Common columns", "", _table(("column", "type"), ((f"`{k}`", v) for k, v in COMMON_COLUMNS.items())), "",
             "## Kinds", ""]
    for kind, cls in KINDS.items():
        doc = inspect.getdoc(cls) or ""
        parts += [f"### `{kind}`", "", doc, ""]
        cols = _columns_of(cls)
        if cols:
            parts += [_table(("column", "type"), ((f"`{n}`", t) for n, t in cols)), ""]
    return "\n".join(parts)


# --- metrics ------------------------------------------------------------------------------------------


def metrics_page() -> str:
    from observability.metrics import model

    doc = inspect.getdoc(model) or ""
    rows = [(f"`{f.name}`", f.type, f.help) for f in model.FAMILIES.values()]
    return "\n".join([
        "# Metrics", "", _generated_note("the metrics model (`observability/metrics/model.py`)"),
        "Every run writes `metrics.om` (OpenMetrics, one sample of every series per second of run time), "
        "and a Ray run serves the same series live with `--metrics-port`. "
        "[Metrics in Prometheus](../tutorials/metrics.md) loads them and opens the dashboards.", "",
        "## Families", "", _table(("family", "type", "help"), rows), "",
        "## Where each value comes from", "", doc, ""])


# --- anomalies and invariants -------------------------------------------------------------------


def findings_page() -> str:
    from observability.anomaly_names import ANOMALIES
    from observability.checks.invariants import DISRUPTION_CHECKS, PARTITION_INVARIANTS, QUORUM_INVARIANTS

    return "\n".join([
        "# Anomalies and invariants", "", _generated_note("`observability/anomaly_names.py` and `observability/checks/invariants.py`"),
        "A run's verdict rests on two kinds of findings. **Anomalies** are what a client could see, "
        "found in the history of records alone (Jepsen's way: what was sent, acknowledged, read, and "
        "what the committed log holds at the end); `kraftlab analyze` counts them. **Invariants** are "
        "the protocol's safety properties, checked on the cluster's state after every event while the "
        "run goes on, and re-checked by Spark from the history. Scenario files name the invariants a "
        "run is expected to break (`expect_violations`); campaign files name both (`catch`, `absent`).", "",
        "## Anomalies", "",
        _table(("anomaly", "definition", "counted in", "source"), ((f"`{a.name}`", a.definition, a.unit, a.source) for a in ANOMALIES)), "",
        "## Partition invariants", "",
        _table(("invariant", "definition"), ((f"`{k}`", v) for k, v in PARTITION_INVARIANTS.items())), "",
        "## Quorum invariants", "",
        _table(("invariant", "definition"), ((f"`{k}`", v) for k, v in QUORUM_INVARIANTS.items())), "",
        "## Disruption checks", "",
        "Liveness, not safety: a scenario turns them on with `disruption_checks: true` (what Pre-Vote "
        "and Check Quorum exist to prevent), and they are then reported as violations.", "",
        _table(("check", "definition"), ((f"`{k}`", v) for k, v in DISRUPTION_CHECKS.items())), "",
        "The invariants are those of [the protocol's facts](../explanation/protocol-facts.md#partition-replication-invariants).", ""])



def main() -> int:
    for path, markdown in pages().items():
        (DOCS / path).write_text(markdown)
        print(f"wrote docs/{path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
