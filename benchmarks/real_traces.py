"""Windows of public GPU-cluster job tables (benchmarks/traces/README.md, "Real job tables"),
converted when read from the cut CSVs they are kept as, so the CSV is the one source of truth,
and parsed as `gpualloc bench traces` reads every trace.

The cuts are third-party data, kept outside the repository: in a folder of tables (`TABLES`, the
steering repository's shared/traces beside this one, or one given), each at its path below."""

from __future__ import annotations

from pathlib import Path

from gpualloc.generators.job_table_files import job_table_trace
from gpualloc.generators.job_tables import Conversion
from gpualloc.schemas.events import parse_event

TABLES = Path("../shared/traces")  # from the repository's root, as CI and `make` run
# name -> (the table's source, its cut CSV under the tables' folder)
WINDOWS = {
    "philly-ee9e8c": ("philly", "philly/ee9e8c-week.csv"),
    "philly-b436b2": ("philly", "philly/b436b2-week.csv"),
    "acme-kalos": ("acme", "acme/kalos.csv"),
}


def present(folder: Path = TABLES) -> list[str]:
    """The windows whose cut is in `folder`."""
    return [name for name, (_, path) in WINDOWS.items() if (folder / path).is_file()]


def real_traces(folder: Path = TABLES) -> list[tuple[str, list]]:
    """(name, parsed events) for each window present in `folder`, in `WINDOWS` order."""
    return [(name, [parse_event(e) for e in events]) for name, (events, _) in converted(folder).items()]


def converted(folder: Path = TABLES) -> dict[str, tuple[list[dict], Conversion]]:
    """Each present window's events and what converting it kept, dropped and changed."""
    return {name: job_table_trace(WINDOWS[name][0], folder / WINDOWS[name][1]) for name in present(folder)}
