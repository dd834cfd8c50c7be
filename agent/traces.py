"""Trace files: JSONL of contract events, read with a clear error per bad line, for `gpualloc
simulate`, `publish` and `forecast backtest` (writing them and converting public traces is the
workshop's, `gpualloc.generators.trace_files`)."""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import ValidationError

from gpualloc.agent.loading import InputError, read_text
from gpualloc.schemas import describe
from gpualloc.schemas.events import parse_event


def read_trace(path: str | Path) -> list:
    """Parsed (envelope, payload) pairs; InputError naming the line, field and rule."""
    return [parsed for _, parsed in _read(path)]


def read_trace_messages(path: str | Path) -> list[dict]:
    """The trace's messages as they go on the bus, each validated first."""
    return [message for message, _ in _read(path)]


def _read(path: str | Path) -> list[tuple[dict, tuple]]:
    events, problems = [], []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            message = orjson.loads(line)
            events.append((message, parse_event(message)))
        except orjson.JSONDecodeError as e:
            problems.append(f"line {n}: not JSON ({e})")
        except ValidationError as e:
            problems += [f"line {n}: {msg}" for msg in describe(e)]
        except ValueError as e:
            problems.append(f"line {n}: {e}")
    if problems:
        raise InputError(str(path), first_problems(problems))
    return events


def first_problems(problems: list[str], shown: int = 20) -> list[str]:
    """The first `shown` problems of a file, and how many more there are."""
    return problems[:shown] + ([f"... and {len(problems) - shown} more"] if len(problems) > shown else [])
