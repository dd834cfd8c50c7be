"""Turn pydantic validation errors into one line per problem: the field, then the rule."""

from __future__ import annotations

from difflib import get_close_matches

from pydantic import ValidationError

_UNION_TAGS = {"training", "batch_inference", "quantization", "realtime"}


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
