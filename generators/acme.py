"""Shanghai AI Lab's Acme traces (NSDI '24; CC BY 4.0), the LLM clusters' `trace_seren.csv` and
`trace_kalos.csv` (InternLM/AcmeTrace), as contract events. Pure: the shell reads the CSV
(`gpualloc.generators.job_table_files`); the conversion rules are `job_tables`'. A job's run
time is `end_time` minus `start_time`, its submission `submit_time` (times carry their offset);
evaluation jobs are batch inference, every other type (pretraining, SFT, MLLM, debug, other)
training."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpualloc.generators.job_tables import Conversion, TableJob, moment, seconds_between, table_events, whole

ACME_COLUMNS = ("job_id", "gpu_num", "type", "submit_time", "start_time", "end_time")


def acme_job(row: Mapping[str, str]) -> TableJob:
    """A job-trace row as a job; ValueError naming the field of a bad value."""
    submit = moment(row, "submit_time")
    if submit is None:
        raise ValueError("submit_time: must be a date and time, got ''")
    ran = seconds_between(moment(row, "start_time"), moment(row, "end_time"))
    kind = "batch_inference" if (row.get("type") or "").strip().lower() == "evaluation" else "training"
    return TableJob(row["job_id"], submit.timestamp(), whole(row, "gpu_num"), ran, kind)


def acme_events(
    rows: Iterable[Mapping[str, str]], gpus: int = 64, days: float | None = None
) -> tuple[list[dict[str, Any]], Conversion]:
    """The cluster's jobs (in the median window of `days` days when given) on a pool of `gpus`."""
    return table_events((acme_job(r) for r in rows), "acme", gpus, days)
