"""Trace files written for `gpualloc trace`: JSONL of contract events, and the public openb and
Pollux CSVs read for their converters (`openb.py`, `pollux.py`) with a clear error per bad row.
Reading a trace back is the product's (`gpualloc.agent.traces`)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from gpualloc.agent.loading import InputError, read_text
from gpualloc.agent.traces import first_problems
from gpualloc.generators.openb import OPENB_COLUMNS, openb_events
from gpualloc.generators.pollux import pollux_events

POLLUX_COLUMNS = {"name": str, "time": float, "application": str, "num_replicas": int}


def write_trace(path: str | Path, events: list[dict[str, Any]]) -> None:
    Path(path).write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))


def openb_trace(csv_path: str | Path, gpus: int = 64, days: int = 2, end_day: int = 148) -> list[dict[str, Any]]:
    """The openb pod list (Alibaba GPU trace v2023) as contract events
    (`gpualloc.generators.openb`); InputError naming the line and the column of every bad row."""

    def problems(n: int, row: dict[str, str]) -> list[str]:
        bad = [
            f"line {n}: {column}: must be a number, got {row.get(column)!r}"
            for column in ("num_gpu", "creation_time", "deletion_time")
            if not _parses(float, row.get(column))
        ]
        if (row.get("scheduled_time") or "").strip() and not _parses(float, row["scheduled_time"]):
            bad.append(f"line {n}: scheduled_time: must be a number or empty, got {row['scheduled_time']!r}")
        return bad

    return openb_events(_csv_rows(csv_path, OPENB_COLUMNS, "the openb pod list", problems), gpus, days, end_day)


def pollux_trace(csv_path: str | Path, gpus: int = 64, gpus_per_node: int = 8) -> list[dict[str, Any]]:
    """A Pollux workload CSV as contract events (`gpualloc.generators.pollux`);
    InputError naming the line and the column of every bad row."""

    def problems(n: int, row: dict[str, str]) -> list[str]:
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


def _csv_rows(
    csv_path: str | Path, columns: Sequence[str], what: str, problems: Callable[[int, dict[str, str]], list[str]]
) -> list[dict[str, str]]:
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
        raise InputError(str(csv_path), first_problems(found))
    return rows


def _parses(kind: type, text: str | None) -> bool:
    if text is None or not text.strip():
        return False
    try:
        value = kind(text)
    except ValueError:
        return False
    return not isinstance(value, float) or math.isfinite(value)
