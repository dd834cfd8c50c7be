"""Turn pydantic validation errors into one line per problem: the field, then the rule."""

from __future__ import annotations

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
    return lines
