"""Microsoft's Philly trace (ATC '19; CC BY 4.0) as contract events, from the compact job
table bundled in benchmarks/traces/philly (one virtual cluster's jobs: when each was submitted,
its GPUs, how long it ran; the cut is in benchmarks/traces/README.md). Pure: the shell reads the
CSV (`gpualloc.generators.job_table_files`); the conversion rules are `job_tables`'."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpualloc.generators.job_tables import Conversion, TableJob, number, table_events, whole

PHILLY_COLUMNS = ("job_id", "submit_time", "gpus", "duration")


def philly_job(row: Mapping[str, str]) -> TableJob:
    """A row (`submit_time` and `duration` in seconds, `gpus` a whole number) as a job;
    ValueError naming the field of a bad value."""
    return TableJob(
        row["job_id"],
        number(row, "submit_time"),
        whole(row, "gpus"),
        number(row, "duration"),
    )


def philly_events(
    rows: Iterable[Mapping[str, str]], gpus: int = 64, days: float | None = None, max_steps: int | None = None
) -> tuple[list[dict[str, Any]], Conversion]:
    """The table's jobs (in the median window of `days` days when given) on a pool of `gpus`."""
    return table_events((philly_job(r) for r in rows), "philly", gpus, days, max_steps)
