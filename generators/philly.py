"""Microsoft's Philly trace (ATC '19; CC BY 4.0) as contract events. Philly publishes its jobs
as JSON; the bundled weeks (benchmarks/traces/philly) are kept in the compact cut
(`job_tables.CUT_COLUMNS`: when each job was submitted, its GPUs, how long it ran; how they were
cut is in benchmarks/traces/README.md). Pure: the shell reads the CSV
(`gpualloc.generators.job_table_files`); the conversion rules are `job_tables`'."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpualloc.generators.job_tables import Conversion, cut_job, table_events


def philly_events(
    rows: Iterable[Mapping[str, str]], gpus: int = 64, days: float | None = None
) -> tuple[list[dict[str, Any]], Conversion]:
    """The cut's jobs (in the median window of `days` days when given) on a pool of `gpus`."""
    return table_events((cut_job(r) for r in rows), "philly", gpus, days)
