"""The public job tables read for their converters (`philly.py`, `helios.py`, `acme.py`), with
a clear error per bad row: InputError naming the line and the column."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpualloc.generators.acme import ACME_COLUMNS, acme_events, acme_job
from gpualloc.generators.helios import HELIOS_COLUMNS, helios_events, helios_job
from gpualloc.generators.job_tables import Conversion
from gpualloc.generators.philly import PHILLY_COLUMNS, philly_events, philly_job
from gpualloc.generators.trace_files import _csv_rows

# source -> (what the CSV is, its columns, one row's parse, the converter)
SOURCES: dict[str, tuple[str, tuple[str, ...], Callable[[Mapping[str, str]], Any], Callable[..., Any]]] = {
    "philly": ("a Philly job table", PHILLY_COLUMNS, philly_job, philly_events),
    "helios": ("a Helios cluster_log.csv", HELIOS_COLUMNS, helios_job, helios_events),
    "acme": ("an Acme job trace", ACME_COLUMNS, acme_job, acme_events),
}


def job_table_trace(
    source: str, csv_path: str | Path, gpus: int = 64, days: float | None = None, max_steps: int | None = None
) -> tuple[list[dict[str, Any]], Conversion]:
    """A job table of `source` (philly, helios, acme) as contract events and what converting it
    kept, dropped and changed; InputError naming the line and the column of every bad row."""
    what, columns, parse, convert = SOURCES[source]

    def problems(n: int, row: dict[str, str]) -> list[str]:
        try:
            parse(row)
        except ValueError as e:
            return [f"line {n}: {e}"]
        return []

    return convert(_csv_rows(csv_path, columns, what, problems), gpus, days, max_steps)
