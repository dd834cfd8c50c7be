"""Reading user input (scenario and plan files) into validated models, or one clear InputError.

Every way a file can be bad (unreadable, not JSON, breaking the schema, a plan grid of the
wrong shape) ends in an `InputError` whose lines each name the field and the rule; the CLI
prints them and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from gpualloc.schemas import Plan, Scenario, describe
from gpualloc.solvers.policies import plan_names


class InputError(Exception):
    """Bad user input: `lines` say what is wrong, each naming the field and the rule."""

    def __init__(self, source: str, lines: list[str]):
        super().__init__(source, lines)
        self.source = source
        self.lines = lines or ["invalid input"]

    def __str__(self) -> str:
        return "\n".join(f"{self.source}: {line}" for line in self.lines)


def read_text(path: str | Path) -> str:
    """The file's text (UTF-8), or InputError when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), ["file not found"]) from None
    except IsADirectoryError:
        raise InputError(str(path), ["is a directory, not a file"]) from None
    except UnicodeDecodeError as e:
        raise InputError(str(path), [f"not UTF-8 text ({e.reason} at byte {e.start})"]) from None
    except OSError as e:
        raise InputError(str(path), [f"cannot read: {e.strerror or e}"]) from None


def parse_scenario(text: str | bytes, source: str = "scenario") -> Scenario:
    try:
        return Scenario.model_validate_json(text)
    except ValidationError as e:
        raise InputError(source, describe(e)) from None


def load_scenario(path: str | Path) -> Scenario:
    return parse_scenario(read_text(path), str(path))


def parse_plan(text: str | bytes, source: str = "plan") -> Plan:
    try:
        return Plan.model_validate_json(text, context={"schedulers": plan_names()})
    except ValidationError as e:
        raise InputError(source, describe(e)) from None


def load_plan(path: str | Path, scenario: Scenario | None = None) -> Plan:
    """A plan file; with `scenario`, its grid must also have the scenario's shape (R1)."""
    plan = parse_plan(read_text(path), str(path))
    if scenario is not None:
        problems = grid_shape_problems(scenario, plan)
        if problems:
            raise InputError(str(path), problems)
    return plan


def grid_shape_problems(scenario: Scenario, plan: Plan) -> list[str]:
    """Messages for a grid that is not `gpus` rows of `horizon` cells (rule R1)."""
    G, T = scenario.gpus, scenario.horizon
    out = []
    if len(plan.grid) != G:
        out.append(f"grid: must have gpus={G} rows, one per GPU (rule R1); got {len(plan.grid)}")
    for g, row in enumerate(plan.grid):
        if len(row) != T:
            out.append(f"grid[{g}]: must have horizon={T} cells, one per step (rule R1); got {len(row)}")
            if len(out) >= 5:
                out.append("grid: further rows of the wrong length not listed")
                break
    return out


def write_text(path: str | Path, text: str) -> None:
    """Write an output file, or InputError naming it when that is impossible."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(str(path), [f"cannot write: {e.strerror or e}"]) from None


def dump_json(data: Any) -> str:
    """JSON text, indented by 2."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"


def dump_plan(plan: Plan) -> str:
    """The plan file of the contract: indented by 2, one grid row (one GPU) per line."""
    data = plan.model_dump(mode="json")
    items = list(data.items())
    lines = ["{"]
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        name = orjson.dumps(key).decode()
        if key == "grid" and value:
            rows = ",\n    ".join(orjson.dumps(row).decode() for row in value)
            lines.append(f"  {name}: [\n    {rows}\n  ]{comma}")
        else:
            text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode().replace("\n", "\n  ")
            lines.append(f"  {name}: {text}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"
