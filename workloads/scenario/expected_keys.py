"""The keys a scenario or campaign mapping allows, found from its pydantic model by following an
error's location (for "unknown key (expected one of: ...)": docs/reference asks every input error to
say what was expected)."""

from __future__ import annotations

import re
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from .step_spec import STEP_TYPES

# The names pydantic gives a union's members in an error's location ("constrained-int",
# "list[literal['all',1,0,-1]]", "function-after[...]"): no key of a scenario or campaign looks so.
UNION_MEMBER = re.compile(r"(function-|constrained-)[\w-]+.*|(int|str|bool|float|none|list|dict|tuple|literal)(\[.*\])?")


def keys_expected(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the model allows in the mapping where the error at `loc` (an unknown key, loc's
    last part) was found: [] when the way there cannot be followed."""
    kind: Any = model
    for part in loc[:-1]:
        if isinstance(part, str) and UNION_MEMBER.fullmatch(part):
            continue
        kind = _inside(kind, part)
        if kind is None:
            return []
    kind = _model_in(kind)
    if kind is None:
        return []
    return [f.alias or name for name, f in kind.model_fields.items()]


def _model_in(kind: Any) -> type[BaseModel] | None:
    """The model `kind` is (unwrapping Annotated and Optional), if one."""
    while get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return kind
    if get_origin(kind) in (Union, UnionType):
        models = [m for m in (_model_in(a) for a in get_args(kind)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def _inside(kind: Any, part: Any) -> Any:
    """The type found under `part` (a key or an index) of a value of type `kind`."""
    while get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    origin = get_origin(kind)
    if origin in (Union, UnionType):
        # A union: the member that holds `part` (a step's tag names the step model holding a field
        # of the same name; a container member for an index).
        for member in get_args(kind):
            inner = _model_in(member)
            if inner is not None and isinstance(part, str) and any(part in (n, f.alias) for n, f in inner.model_fields.items()):
                return inner if _is_tag_of(inner, part) else _inside(inner, part)
            if inner is None and get_origin(member) in (list, tuple, dict) and _inside(member, part) is not None:
                return _inside(member, part)
        return None
    if origin in (list, tuple):
        return get_args(kind)[0] if isinstance(part, int) else None
    if origin is dict:
        return get_args(kind)[1]
    model = _model_in(kind)
    if model is not None and isinstance(part, str):
        for name, f in model.model_fields.items():
            if part in (name, f.alias):
                return f.annotation
    return None


def _is_tag_of(model: type[BaseModel], part: str) -> bool:
    """Whether `part` is a step's tag (the step's one field of the same name follows it in the
    error's location) rather than that field itself."""
    return part in STEP_TYPES and STEP_TYPES[part] is model
