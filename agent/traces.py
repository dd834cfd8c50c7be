"""Trace files: JSONL of contract events, read with a clear error per bad line, and the public
Pollux workload CSVs read for the converter (`gpualloc.solvers.simulation.pollux`)."""

from __future__ import annotations

import csv
from pathlib import Path

import orjson
from pydantic import ValidationError

from gpualloc.agent.loading import InputError, read_text
from gpualloc.schemas import describe
from gpualloc.schemas.events import parse_event
from gpualloc.solvers.simulation.pollux import pollux_events

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
        raise InputError(str(path), problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else []))
    return events


def write_trace(path: str | Path, events: list[dict]) -> None:
    Path(path).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))


def pollux_trace(csv_path: str | Path, gpus: int = 64, gpus_per_node: int = 8) -> list[dict]:
    """A Pollux workload CSV as contract events (`gpualloc.solvers.simulation.pollux`)."""
    try:
        with open(csv_path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise InputError(str(csv_path), [f"cannot read: {e.strerror or e}"]) from None
    try:
        return pollux_events(rows, gpus, gpus_per_node)
    except (KeyError, ValueError) as e:
        raise InputError(str(csv_path), [f"not a Pollux workload ({type(e).__name__}: {e})"]) from None
