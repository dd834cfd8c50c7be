"""What users of a cluster read of a whole run: job completion times (JCT) and waits, mean and
tail, by job size and by priority; slowdown and its fairness over jobs; makespan; each app's
served share per day; the offered load. Pure functions of a `Simulation`.

Every job submitted counts. A job never started waits until the run's end, one unfinished
completes there (a whole-trace run that reached its cap, or the days simulated), and both are
counted as unfinished, so a policy cannot look better by leaving jobs out. A job that left the
pool without finishing (cancelled while queued, rejected, failed for good) is counted as
withdrawn, outside the times. A job's size is its work in GPU-hours as the
trace gives it (its true GPUs x its actual duration), the same whichever policy runs it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpualloc.solvers.simulation.report import jain, quantiles, served_share, whole_run
from gpualloc.solvers.simulation.results import PolicyRun, Simulation

# GPU-hours of work: the size buckets of the tables users read (Tiresias, Themis, Gavel...)
SIZE_BUCKETS: tuple[tuple[str, float], ...] = (("<1", 1.0), ("1-10", 10.0), ("10-100", 100.0), (">100", math.inf))


def size_bucket(gpu_hours: float) -> str:
    """The bucket of a job of `gpu_hours` of work: under 1, 1-10, 10-100, over 100."""
    return next(label for label, upper in SIZE_BUCKETS if gpu_hours < upper)


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, nearest-rank p50, p90, p99 and max, to 2 decimals (empty: none)."""
    if not values:
        return {}
    return {"mean": round(statistics.fmean(values), 2), **{k: round(v, 2) for k, v in quantiles(values).items()}}


@dataclass(frozen=True)
class JobGroup:
    """JCT and wait (steps) of a set of jobs."""

    jobs: int
    unfinished: int
    jct: dict[str, float]
    wait: dict[str, float]


@dataclass(frozen=True)
class UserMeasures:
    policy: str
    step_minutes: int
    jobs: int  # submitted, less those withdrawn
    withdrawn: int  # left the pool without finishing: cancelled while queued, rejected, failed for good
    started: int
    completed: int
    unfinished: int  # never started or never finished: counted to the run's end
    never_started: int
    jct: dict[str, float]  # steps, submission to completion (mean, p50, p90, p99, max)
    wait: dict[str, float]  # steps, submission to its (last) start: a restarted job's earlier runs count
    by_size: dict[str, JobGroup]  # GPU-hours bucket -> its jobs' figures (buckets with jobs only)
    by_priority: dict[str, JobGroup]
    slowdown: dict[str, float]  # JCT / run time
    slowdown_jain_jobs: float | None  # Jain's index of slowdown over jobs (1: every job slowed alike)
    slowdown_jain_priority_classes: float | None  # Jain's index over priority classes of mean slowdown
    makespan: int  # steps from the first submission to the last completion (the run's end if a job is unfinished)
    value: float
    timely_value: float
    served: dict[str, dict[str, object]]  # app -> {"whole": share, "days": [share or None], "worst_day"}
    served_worst_day: float | None  # the least share any app had on any day with demand


@dataclass(frozen=True)
class OfferedLoad:
    """Jobs' GPU-steps over what the pool serves from step 0 through the last arrival: `trace`
    counts each job's whole work, `span` only the work it could do inside that span had it started
    on arrival (work past the last arrival left out)."""

    trace: float
    span: float
    span_steps: int


def offered_load(jobs: Iterable[tuple[int, int, int]], gpus: int) -> OfferedLoad:
    """`jobs`: (arrival step, GPUs, steps of work) each; `gpus`: the pool's."""
    listed = list(jobs)
    span = max((arrival for arrival, _, _ in listed), default=0) + 1
    whole = sum(n * steps for _, n, steps in listed)
    inside = sum(n * min(steps, span - arrival) for arrival, n, steps in listed)
    capacity = gpus * span
    return OfferedLoad(round(whole / capacity, 3), round(inside / capacity, 3), span)


def sim_offered_load(sim: Simulation) -> OfferedLoad:
    """`offered_load` of a simulation's trace (arrivals as its first run recorded them)."""
    run = next(iter(sim.runs.values()))
    return offered_load(((step, *sim.sizes.get(job, (1, 1))) for job, step in run.submitted.items()), sim.config.gpus)


def measures(sim: Simulation, run: PolicyRun) -> UserMeasures:
    """Everything a platform team reads of `run`'s whole length. Jobs that left the pool without
    finishing (cancelled while queued, rejected, failed for good) are counted as `withdrawn` and
    kept out of the times: they waited for nothing the pool could give."""
    end = len(run.commits)
    withdrawn = {j for j in run.submitted if j not in run.finished and j not in run.pending}
    jobs = sorted(j for j in run.submitted if j not in withdrawn)
    hours = sim.config.step_minutes / 60
    jct = {j: run.finished.get(j, end) - run.submitted[j] for j in jobs}
    wait = {j: run.started.get(j, end) - run.submitted[j] for j in jobs}
    slow = {j: max(jct[j], 1) / max(run.run_steps.get(j, 1), 1) for j in jobs}
    unfinished = {j for j in jobs if j not in run.finished}
    size = {j: size_bucket(math.prod(sim.sizes.get(j, (1, 1))) * hours) for j in jobs}
    prio = {j: f"{sim.priorities.get(j, 0.0):.12g}" for j in jobs}

    def groups(key: dict[str, str], order: Sequence[str]) -> dict[str, JobGroup]:
        members: dict[str, list[str]] = {}
        for j in jobs:
            members.setdefault(key[j], []).append(j)
        return {
            label: JobGroup(
                len(members[label]),
                sum(j in unfinished for j in members[label]),
                spread([jct[j] for j in members[label]]),
                spread([wait[j] for j in members[label]]),
            )
            for label in order
            if label in members
        }

    classes: dict[str, list[float]] = {}
    for j in jobs:
        classes.setdefault(prio[j], []).append(slow[j])
    served = served_share(sim, run)
    days = [s for app in served.values() for s in app["days"] if s is not None]  # type: ignore[attr-defined]
    first = min(run.submitted.values(), default=0)
    last = end if unfinished else max((run.finished[j] for j in jobs), default=first)
    whole = whole_run(sim, run)
    return UserMeasures(
        run.policy,
        sim.config.step_minutes,
        len(jobs),
        len(withdrawn),
        sum(j in run.started for j in jobs),
        len(jobs) - len(unfinished),
        len(unfinished),
        sum(j not in run.started for j in jobs),
        spread(list(jct.values())),
        spread(list(wait.values())),
        groups(size, [label for label, _ in SIZE_BUCKETS]),
        groups(prio, sorted(set(prio.values()), key=float, reverse=True)),
        spread(list(slow.values())),
        jain(list(slow.values())),
        jain([statistics.fmean(v) for _, v in sorted(classes.items())]),
        last - first,
        whole.value,
        whole.timely_value,
        served,
        min(days) if days else None,
    )
