"""Turn pydantic validation errors into one line per problem: the field, then the rule."""

from __future__ import annotations

import types
from collections.abc import Mapping
from difflib import get_close_matches
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

_UNION_TAGS = {"training", "batch_inference", "quantization", "realtime"}
NEAR_MISS = 0.8  # difflib's ratio at which an unknown field is taken for a misspelt known one


def _field_path(loc: tuple[int | str, ...]) -> str:
    """`('jobs', 3, 'training', 'priority')` -> `jobs[3].priority` (the union tag is noise)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_TAGS:
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def describe(err: ValidationError) -> list[str]:
    """Readable messages, each naming the field and the rule it breaks."""
    lines: list[str] = []
    for e in err.errors():
        msg = e["msg"]
        if msg.startswith("Value error, "):
            lines.extend(part.strip() for part in msg[len("Value error, ") :].split("; "))
            continue
        path = _field_path(tuple(e["loc"])) or "(document)"
        lines.append(f"{path}: {msg}")
        if e["type"] == "missing" and e["loc"]:
            lines.extend(_misspelt(e["input"], str(e["loc"][-1]), path))
    return list(dict.fromkeys(lines))


def _misspelt(given: object, missing: str, path: str) -> list[str]:
    """A given field close to a missing required one, most likely it misspelt: named, with the
    field it is likely meant to be (unknown fields are otherwise allowed: the contract adds fields)."""
    if not isinstance(given, dict):
        return []
    keys = [k for k in given if isinstance(k, str) and k != missing]
    prefix = path[: len(path) - len(missing)]
    return [
        f"{prefix}{k}: unknown field (did you mean {missing!r}?)"
        for k in get_close_matches(missing, keys, n=1, cutoff=0.75)
    ]


def near_misses(model: type[BaseModel], value: object, path: str = "", nested: Mapping[str, Any] = {}) -> list[str]:
    """The fields of `value` that `model` does not know but nearly does (a misspelling, which the
    contract would ignore as an added field), one "field: unknown field; did you mean known?"
    line each; the fields of nested models are checked too, and `nested` names the model of a
    field typed as a plain object (a job's `features`: its kind's feature set). A field nowhere
    near a known one (ratio under NEAR_MISS) passes, as the contract allows."""
    if not isinstance(value, Mapping):
        return []
    known = {name for name, f in model.model_fields.items()} | {f.alias for f in model.model_fields.values() if f.alias}
    lines = []
    for key, inner in value.items():
        if not isinstance(key, str):
            continue
        if key not in known:
            close = get_close_matches(key, sorted(known), n=1, cutoff=NEAR_MISS)
            lines += [f"{path}{key}: unknown field; did you mean {close[0]}?"] if close else []
            continue
        child = nested.get(key) or _model_of(model.model_fields[key].annotation)
        lines += near_misses(child, inner, f"{path}{key}.") if child is not None else []
    return lines


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, itself or among the members of an optional or union type."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        return next((m for m in map(_model_of, get_args(annotation)) if m is not None), None)
    return None
