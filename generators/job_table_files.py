"""The public job tables read for their converters (`philly.py`, `helios.py`, `acme.py`), with
a clear error per bad row: InputError naming the line and the column. A table is read in its
source's own columns, or in the compact cut the bundled windows are kept as
(`job_tables.CUT_COLUMNS`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpualloc.agent.loading import InputError, read_text
from gpualloc.generators.acme import ACME_COLUMNS, acme_job
from gpualloc.generators.helios import HELIOS_COLUMNS, helios_job
from gpualloc.generators.job_tables import CUT_COLUMNS, Conversion, TableJob, cut_job, table_events
from gpualloc.generators.trace_files import _csv_rows

Format = tuple[str, tuple[str, ...], Callable[[Mapping[str, str]], TableJob]]  # what, columns, a row's job
CUT: Format = ("a job table cut", CUT_COLUMNS, cut_job)
# source -> the formats it is read in, its own first
SOURCES: dict[str, tuple[Format, ...]] = {
    "philly": (CUT,),
    "helios": (("a Helios cluster_log.csv", HELIOS_COLUMNS, helios_job), CUT),
    "acme": (("an Acme job trace", ACME_COLUMNS, acme_job), CUT),
}


def job_table_trace(
    source: str, csv_path: str | Path, gpus: int = 64, days: float | None = None
) -> tuple[list[dict[str, Any]], Conversion]:
    """A job table of `source` (philly, helios, acme) as contract events and what converting it
    kept, dropped and changed; InputError naming the line and the column of every bad row (or
    the columns missing from the source's own), or the job beyond the contract's limits."""
    header = next(csv.reader(io.StringIO(read_text(csv_path), newline="")), [])
    formats = SOURCES[source]
    what, columns, parse = next((f for f in formats if set(f[1]) <= set(header)), formats[0])

    def problems(n: int, row: dict[str, str]) -> list[str]:
        try:
            parse(row)
        except ValueError as e:
            return [f"line {n}: {e}"]
        return []

    rows = _csv_rows(csv_path, columns, what, problems)
    try:
        return table_events((parse(r) for r in rows), source, gpus, days)
    except ValueError as e:
        raise InputError(str(csv_path), [str(e)]) from None
