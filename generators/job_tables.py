"""Public GPU-cluster job tables (Philly, Helios, Acme; see benchmarks/traces/README.md) as
contract events, the part every source shares. Pure: each source's module turns its rows into
`TableJob`s (`philly.py`, `helios.py`, `acme.py`; the bundled windows are kept in one compact
cut, `cut_job`), the shell reads the CSV (`gpualloc.generators.job_table_files`).

What the conversion changes, the same for every table:
- a job's GPUs round up to a power of two (the contract's blocks), so a job of more than a node
  covers whole 8-GPU nodes; `Conversion.added_work` is the share of GPU-work this adds;
- a job's duration is its run time (end minus start; Philly's cut holds the sum over its
  attempts) in 10-minute steps, rounded up, at least one; declared `duration` and
  `actual_duration` are the same (no table has a requested limit);
- jobs that never ran (no run time, or none at all) and jobs without GPUs are dropped and counted;
- every job has the same priority (no table has one);
- the first job kept arrives at step 0; the pool holds at least the largest job."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from gpualloc.generators.job_events import job_events
from gpualloc.schemas.limits import LIMITS

# The compact cut the bundled windows are kept as (benchmarks/traces/README.md): `submit_time`
# in seconds from the table's origin, `duration` the seconds the job ran
CUT_COLUMNS = ("job_id", "submit_time", "gpus", "duration")
STEP_MINUTES = 10
NODE = 8
PRIORITY = 5  # every job's: the tables give none
DAY = 86400.0


@dataclass(frozen=True)
class TableJob:
    """One row of a job table: `submit` in seconds from any origin the table shares, `seconds`
    the time it ran (None: it never ran)."""

    id: str
    submit: float
    gpus: int
    seconds: float | None
    kind: str = "training"

    @property
    def ran(self) -> float:
        """Seconds it ran (0 when it never did)."""
        return self.seconds or 0.0


@dataclass
class Conversion:
    """What converting a table kept, dropped and changed."""

    rows: int = 0
    kept: int = 0
    never_ran: int = 0
    no_gpus: int = 0
    gpu_work: float = 0.0  # GPU-seconds of the jobs kept, at their own GPU counts
    added_work: float = 0.0  # the share of GPU-work rounding their GPUs up adds
    sizes: Counter[int] = field(default_factory=Counter)  # rounded GPUs -> jobs

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "kept": self.kept,
            "never_ran": self.never_ran,
            "no_gpus": self.no_gpus,
            "gpu_hours": round(self.gpu_work / 3600, 1),
            "added_work": round(self.added_work, 4),
            "sizes": {str(k): v for k, v in sorted(self.sizes.items())},
        }


def number(row: Mapping[str, str], column: str) -> float:
    """A finite, nonnegative number from `column`; ValueError naming the column otherwise."""
    text = (row.get(column) or "").strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:
        raise ValueError(f"{column}: must be a nonnegative number, got {text!r}")
    return value


def whole(row: Mapping[str, str], column: str) -> int:
    """A nonnegative whole number from `column`; ValueError naming the column otherwise."""
    text = (row.get(column) or "").strip()
    if not text.isdigit():
        raise ValueError(f"{column}: must be a whole number, got {text!r}")
    return int(text)


def moment(row: Mapping[str, str], column: str) -> datetime | None:
    """An ISO date and time from `column` (None when empty); ValueError naming the column when
    it is not one. Times without an offset are read as UTC, so a table mixing none is consistent."""
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{column}: must be a date and time (YYYY-MM-DD HH:MM:SS), got {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def cut_job(row: Mapping[str, str]) -> TableJob:
    """A row of the compact cut (`CUT_COLUMNS`) as a job; ValueError naming the field of a bad value."""
    return TableJob(row["job_id"], number(row, "submit_time"), whole(row, "gpus"), number(row, "duration"))


def block(gpus: int) -> int:
    """The power of two at or above `gpus`: a contract block (above a node, whole nodes)."""
    return 1 << max(0, math.ceil(math.log2(gpus)))


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    """Run time from start to end; None when either is missing or the job ran no time."""
    if start is None or end is None or end <= start:
        return None
    return (end - start).total_seconds()


def runnable(jobs: Iterable[TableJob]) -> tuple[list[TableJob], Conversion]:
    """The jobs that ran on GPUs, and the count of each kind of drop and the rounding's cost."""
    stats, kept = Conversion(), []
    for job in jobs:
        stats.rows += 1
        if job.gpus <= 0:
            stats.no_gpus += 1
        elif job.ran <= 0:
            stats.never_ran += 1
        else:
            kept.append(job)
    stats.kept = len(kept)
    stats.gpu_work = sum(j.gpus * j.ran for j in kept)
    rounded = sum(block(j.gpus) * j.ran for j in kept)
    stats.added_work = (rounded - stats.gpu_work) / stats.gpu_work if stats.gpu_work else 0.0
    stats.sizes = Counter(block(j.gpus) for j in kept)
    return kept, stats


def median_window(jobs: list[TableJob], days: float) -> tuple[float, float]:
    """The window of `days` days, counted from the first submission, whose submitted GPU-work
    (GPUs x seconds run) is the median of the table's whole windows (the lower median; the
    earliest of equals): typical load, chosen by rule rather than by hand. The whole table
    when it spans less than one window."""
    first, last = min(j.submit for j in jobs), max(j.submit for j in jobs)
    width = days * DAY
    whole = int((last - first) // width)
    if whole < 1:
        return first, last + 1
    work = [0.0] * whole
    for j in jobs:
        k = int((j.submit - first) // width)
        if k < whole:
            work[k] += j.gpus * j.ran
    ranked = sorted(range(whole), key=lambda k: (work[k], k))
    k = ranked[(whole - 1) // 2]
    return first + k * width, first + (k + 1) * width


def table_events(
    jobs: Iterable[TableJob],
    source: str,
    gpus: int = 64,
    days: float | None = None,
) -> tuple[list[dict[str, Any]], Conversion]:
    """Contract events (pool.configured, then job.submitted in time order) for the jobs that ran,
    within the median window of `days` days when given (`median_window`), on a pool of at least
    `gpus` GPUs in 8-GPU nodes. The `Conversion` counts the rows of the window (all of them
    without `days`). ValueError naming the job and the field when a job is beyond the contract's
    limits (`LIMITS.gpus`, `LIMITS.duration`)."""
    jobs = list(jobs)
    kept, stats = runnable(jobs)
    if kept and days is not None:  # the drops and the rounding counted within the window
        lo, hi = median_window(kept, days)
        kept, stats = runnable(j for j in jobs if lo <= j.submit < hi)
    kept.sort(key=lambda j: (j.submit, j.id))
    step = STEP_MINUTES * 60
    steps = [max(1, math.ceil(j.ran / step)) for j in kept]
    for job, n in zip(kept, steps):
        if block(job.gpus) > LIMITS.gpus:
            raise ValueError(f"job {job.id!r}: gpus: {job.gpus} is more than the contract's {LIMITS.gpus}")
        if n > LIMITS.duration:
            raise ValueError(
                f"job {job.id!r}: duration: {job.ran:.0f} s is more than the contract's {LIMITS.duration} "
                f"steps of {STEP_MINUTES} minutes"
            )
    first = kept[0].submit if kept else 0.0
    for job in kept:
        if job.submit - first > LIMITS.duration * step:  # past any trace the contract's steps can hold
            raise ValueError(
                f"job {job.id!r}: submit_time: {job.submit:.0f} s is {job.submit - first:.0f} s after the first "
                f"job's, more than the contract's {LIMITS.duration} steps of {STEP_MINUTES} minutes"
            )
    biggest = max((block(j.gpus) for j in kept), default=1)
    pool = NODE * math.ceil(max(gpus, biggest) / NODE)
    submitted = (
        (
            job.submit - first,
            {
                "id": job.id,
                "kind": job.kind,
                "priority": PRIORITY,
                "gpus": block(job.gpus),
                "duration": n,
                "actual_duration": n,
            },
        )
        for job, n in zip(kept, steps)
    )
    return job_events(source, pool, submitted, STEP_MINUTES, NODE), stats
