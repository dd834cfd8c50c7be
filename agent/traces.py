"""Trace files: JSONL of contract events, read with a clear error per bad line, and the public
Pollux workload CSVs read for the converter (`gpualloc.solvers.generators.pollux`)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import orjson
from pydantic import ValidationError

from gpualloc.agent.loading import InputError, read_text
from gpualloc.schemas import describe
from gpualloc.schemas.events import parse_event
from gpualloc.solvers.generators.openb import OPENB_COLUMNS, openb_events
from gpualloc.solvers.generators.pollux import pollux_events


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
        raise InputError(str(path), _first(problems))
    return events


def write_trace(path: str | Path, events: list[dict]) -> None:
    Path(path).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))


POLLUX_COLUMNS = {"name": str, "time": float, "application": str, "num_replicas": int}


def openb_trace(csv_path: str | Path, gpus: int = 64, days: int = 2, end_day: int = 148) -> list[dict]:
    """The openb pod list (Alibaba GPU trace v2023) as contract events
    (`gpualloc.solvers.generators.openb`); InputError naming the line and the column of every bad row."""

    def problems(n: int, row: dict) -> list[str]:
        bad = [
            f"line {n}: {column}: must be a number, got {row.get(column)!r}"
            for column in ("num_gpu", "creation_time", "deletion_time")
            if not _parses(float, row.get(column))
        ]
        if (row.get("scheduled_time") or "").strip() and not _parses(float, row["scheduled_time"]):
            bad.append(f"line {n}: scheduled_time: must be a number or empty, got {row['scheduled_time']!r}")
        return bad

    return openb_events(_csv_rows(csv_path, OPENB_COLUMNS, "the openb pod list", problems), gpus, days, end_day)


def pollux_trace(csv_path: str | Path, gpus: int = 64, gpus_per_node: int = 8) -> list[dict]:
    """A Pollux workload CSV as contract events (`gpualloc.solvers.generators.pollux`);
    InputError naming the line and the column of every bad row."""

    def problems(n: int, row: dict) -> list[str]:
        return [
            f"line {n}: {column}: must be {kind.__name__}, got {row.get(column)!r}"
            for column, kind in POLLUX_COLUMNS.items()
            if not _parses(kind, row.get(column))
        ]

    rows = _csv_rows(csv_path, list(POLLUX_COLUMNS), "a Pollux workload", problems)
    try:
        return pollux_events(rows, gpus, gpus_per_node)
    except ValueError as e:  # the pool's own fields (--gpus, --gpus-per-node)
        raise InputError(str(csv_path), [str(e)]) from None


def _csv_rows(csv_path: str | Path, columns, what: str, problems) -> list[dict]:
    """The rows of a CSV with `columns`; InputError listing the missing columns, or every bad
    row's problems (`problems(line number, row)`)."""
    reader = csv.DictReader(io.StringIO(read_text(csv_path), newline=""))
    missing = [c for c in columns if c not in (reader.fieldnames or ())]
    if missing:
        raise InputError(
            str(csv_path), [f"line 1: {', '.join(missing)}: missing column ({what} has {', '.join(columns)})"]
        )
    rows, found = [], []
    for n, row in enumerate(reader, 2):
        bad = problems(n, row)
        found += bad
        if not bad:
            rows.append(row)
    if found:
        raise InputError(str(csv_path), _first(found))
    return rows


def _first(problems: list[str], shown: int = 20) -> list[str]:
    return problems[:shown] + ([f"... and {len(problems) - shown} more"] if len(problems) > shown else [])


def _parses(kind: type, text: str | None) -> bool:
    if text is None or not text.strip():
        return False
    try:
        value = kind(text)
    except ValueError:
        return False
    return not isinstance(value, float) or math.isfinite(value)
