"""SenseTime's Helios traces (SC '21; CC BY 4.0), a cluster's `cluster_log.csv`
(S-Lab-System-Group/HeliosData), as contract events. Pure: the shell reads the CSV
(`gpualloc.generators.job_table_files`); the conversion rules are `job_tables`'. A job's run
time is `end_time` minus `start_time` (the table's `duration` is the same), its submission
`submit_time`; times are the cluster's local clock, without an offset."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpualloc.generators.job_tables import Conversion, TableJob, moment, seconds_between, table_events, whole

HELIOS_COLUMNS = ("job_id", "gpu_num", "submit_time", "start_time", "end_time")


def helios_job(row: Mapping[str, str]) -> TableJob:
    """A `cluster_log.csv` row as a job; ValueError naming the field of a bad value."""
    submit = moment(row, "submit_time")
    if submit is None:
        raise ValueError("submit_time: must be a date and time, got ''")
    ran = seconds_between(moment(row, "start_time"), moment(row, "end_time"))
    return TableJob(row["job_id"], submit.timestamp(), whole(row, "gpu_num"), ran)


def helios_events(
    rows: Iterable[Mapping[str, str]], gpus: int = 64, days: float | None = None
) -> tuple[list[dict[str, Any]], Conversion]:
    """The cluster's jobs (in the median window of `days` days when given) on a pool of `gpus`."""
    return table_events((helios_job(r) for r in rows), "helios", gpus, days)
