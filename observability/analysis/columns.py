"""The columns a history is read with, whoever wrote its files.

kraftlab's writer gives every file every column, with the types of `observability/events.py`. A
history written from docs/reference by other tools need not: a file per node may hold only the columns
of its node's kinds, a list that is always empty may be typed `list<null>`, and integers may be
int64 where kraftlab writes int32. Spark (and a pyarrow dataset) take the columns of one file for
the whole history, so the others' columns would read as absent, silently.

So the files are grouped by their columns and types (`Layout`, one group for kraftlab's own runs),
each group is read with its own schema, and every column is cast to one type per history
(`unify`): the wider of two integer types, float64 over integers, the element type of lists alike,
and never narrower than events.py declares it; a column that no file holds, or holds only as
nulls, takes its type from events.py. Two files
that disagree otherwise (a string and a number) are bad input, named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from pyspark.sql.types import ArrayType, BooleanType, DataType, DoubleType, IntegerType, LongType, StringType

from observability.events import COLUMN_TYPES, COMMON_COLUMNS

from .errors import AnalysisInputError

# A group's columns: (name, its Spark type, or None when the file holds it only as nulls).
Signature = tuple[tuple[str, DataType | None], ...]

_NAMED = {"string": StringType(), "int32": IntegerType(), "int64": LongType(), "float64": DoubleType(),
          "bool": BooleanType()}
_NUMERIC_ORDER = (IntegerType(), LongType(), DoubleType())


def declared_name(column: str) -> str:
    """The type events.py (and docs/reference) give `column`, by its Arrow name: int32, list<int32>..."""
    return {**COMMON_COLUMNS, **COLUMN_TYPES}[column]


def declared_type(column: str) -> DataType:
    """The type events.py gives `column` (lists of lists are not among the columns analysis reads)."""
    name = declared_name(column)
    if name.startswith("list<"):
        return ArrayType(_NAMED[name[5:-1]])
    return _NAMED[name]


def spark_type(arrow: pa.DataType) -> DataType | None:
    """The Spark type that reads an Arrow column; None for a column of nulls only (`null`, or a
    list of `null`); ValueError for a type the checks cannot read."""
    if pa.types.is_null(arrow):
        return None
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        element = spark_type(arrow.value_type)
        return None if element is None else ArrayType(element)
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return StringType()
    if pa.types.is_boolean(arrow):
        return BooleanType()
    if pa.types.is_int8(arrow) or pa.types.is_int16(arrow) or pa.types.is_int32(arrow) \
            or pa.types.is_uint8(arrow) or pa.types.is_uint16(arrow):
        return IntegerType()
    if pa.types.is_int64(arrow) or pa.types.is_uint32(arrow):
        return LongType()
    if pa.types.is_floating(arrow):
        return DoubleType()
    raise ValueError(f"type {arrow}")


def wider(a: DataType, b: DataType) -> DataType | None:
    """The type both `a` and `b` cast to without loss of meaning; None if there is none."""
    if a == b:
        return a
    if a in _NUMERIC_ORDER and b in _NUMERIC_ORDER:
        return max(a, b, key=_NUMERIC_ORDER.index)
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        element = wider(a.elementType, b.elementType)
        return None if element is None else ArrayType(element)
    return None


@dataclass
class Layout:
    """A history's files grouped by signature (the columns analysis reads, with their types)."""

    columns: tuple[str, ...]  # the columns analysis reads (loading.COLUMNS)
    groups: dict[Signature, list[Path]] = field(default_factory=dict)

    def add(self, path: Path, schema: pa.Schema) -> None:
        missing = [c for c in COMMON_COLUMNS if schema.get_field_index(c) < 0]
        if missing:
            # Without them no row can be placed (which node, which incarnation, where in its
            # numbering): judging such a file would call a history complete that says nothing.
            raise AnalysisInputError(f"{path}: no column {', '.join(f'`{c}`' for c in missing)} (every row of the "
                                     f"history has {', '.join(COMMON_COLUMNS)}, see docs/reference/events.md)")
        wanted = set(self.columns)
        columns = []
        for f in schema:
            if f.name not in wanted:
                continue
            try:
                columns.append((f.name, spark_type(f.type)))
            except ValueError as exc:
                raise AnalysisInputError(f"{path}: column `{f.name}` has {exc}, which the checks cannot read "
                                         f"(expected {declared_type(f.name).simpleString()}, see docs/reference/events.md)") from None
        signature = tuple(sorted(columns, key=lambda c: c[0]))
        self.groups.setdefault(signature, []).append(path)

    def unify(self) -> dict[str, DataType]:
        """Each column's one type (see the module's docstring)."""
        types: dict[str, DataType] = {}
        seen_in: dict[str, Path] = {}
        for signature, files in self.groups.items():
            path = files[0]  # the file named if this group's types disagree with another's
            for name, dtype in signature:
                if dtype is None:
                    continue
                if name not in types:
                    types[name], seen_in[name] = dtype, path
                    continue
                both = wider(types[name], dtype)
                if both is None:
                    raise AnalysisInputError(
                        f"column `{name}`: {types[name].simpleString()} in {seen_in[name]}, {dtype.simpleString()} "
                        f"in {path} (expected {declared_type(name).simpleString()} in every file, see docs/reference/events.md)")
                types[name] = both
        unified = {}
        for name in self.columns:
            declared = declared_type(name)
            found = types.get(name)
            if found is None:
                unified[name] = declared
                continue
            # No narrower than declared: `time_ms` written as integers still reads as float64. A
            # type that does not cast to the declared one (a `partition` of strings) is bad input:
            # read as it is, it fails a check deep inside Spark, or compares as nothing.
            both = wider(declared, found)
            if both is None:
                raise AnalysisInputError(f"{seen_in[name]}: column `{name}` is {found.simpleString()} "
                                         f"(expected {declared_name(name)}, see docs/reference/events.md)")
            unified[name] = both
        return unified
