"""`gpualloc config`: every setting with its flags, environment variable and default, and the
effective settings with secrets masked. Read from the settings model and the CLI's own parser,
so the table cannot miss an option or name a flag that does not exist."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from pydantic import BaseModel

from gpualloc.agent.cli.arguments import SETTING, env_name
from gpualloc.schemas.settings import Settings


@dataclass(frozen=True)
class Option:
    path: str  # dotted, as in a settings file
    default: object
    flags: tuple[str, ...]  # "command --flag", for every command that takes it

    @property
    def env(self) -> str:
        return "KAFKA_BOOTSTRAP_SERVERS or GPUALLOC_BOOTSTRAP" if self.path == "bootstrap" else env_name(self.path)


def _leaves(values: dict[str, object], prefix: str = ""):
    """(dotted path, default) of every leaf under `values` (a model's defaults, nested models
    as their default instances: `simulation.full_mode` is not `RollingFullMode()`)."""
    for name, value in values.items():
        if isinstance(value, BaseModel):
            yield from _leaves({n: getattr(value, n) for n in type(value).model_fields}, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def _flags(parser: argparse.ArgumentParser, command: str = "") -> dict[str, list[str]]:
    """Setting path -> "command --flag" for every flag of every (sub)command that sets it."""
    out: dict[str, list[str]] = {}
    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for path, flags in _flags(sub, f"{command} {name}".strip()).items():
                    out.setdefault(path, []).extend(flags)
        elif action.dest.startswith(SETTING):
            out.setdefault(action.dest[len(SETTING) :], []).append(f"{command} {action.option_strings[0]}")
    return out


def options(parser: argparse.ArgumentParser) -> list[Option]:
    flags = _flags(parser)
    defaults = {name: info.default for name, info in Settings.model_fields.items()}
    return [Option(path, default, tuple(flags.get(path, ()))) for path, default in _leaves(defaults)]


def markdown(opts: list[Option]) -> str:
    lines = ["| setting | environment variable | default | flags |", "|---|---|---|---|"]
    for o in opts:
        shown = "none" if o.default is None else json.dumps(o.default) if not isinstance(o.default, str) else o.default
        flags = ", ".join(f"`{f}`" for f in o.flags) or "-"
        lines.append(f"| `{o.path}` | `{o.env}` | {shown or '(empty)'} | {flags} |")
    return "\n".join(lines) + "\n"


def effective(settings: Settings) -> dict:
    """The settings as JSON data, secrets masked (SecretStr dumps as asterisks)."""
    return settings.model_dump(mode="json")
