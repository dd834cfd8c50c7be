"""The bundled windows of public GPU-cluster job tables (benchmarks/traces/README.md, "Real
job tables"), converted when read from the cut CSVs they are kept as, so the CSV is the one
source of truth, and parsed as `gpualloc bench traces` reads every trace."""

from __future__ import annotations

from gpualloc.benchmarks import DATA_DIR
from gpualloc.generators.job_table_files import job_table_trace
from gpualloc.generators.job_tables import Conversion
from gpualloc.schemas.events import parse_event

TRACES = DATA_DIR / "traces"
# name -> (the table's source, its cut CSV under benchmarks/traces)
WINDOWS = {
    "philly-ee9e8c": ("philly", "philly/ee9e8c-week.csv"),
    "philly-b436b2": ("philly", "philly/b436b2-week.csv"),
    "acme-kalos": ("acme", "acme/kalos.csv"),
}


def real_traces() -> list[tuple[str, list]]:
    """(name, parsed events) for each bundled window, in `WINDOWS` order."""
    return [(name, [parse_event(e) for e in events]) for name, (events, _) in converted().items()]


def converted() -> dict[str, tuple[list[dict], Conversion]]:
    """Each bundled window's events and what converting it kept, dropped and changed."""
    return {name: job_table_trace(source, TRACES / path) for name, (source, path) in WINDOWS.items()}
