"""What a pool has bound: the facts node agents act on, which no later planner may contradict.

A start, once published, is bound by a node agent; an app's set, once committed, is what its
swap cap counts from. A restarted agent rebuilds its state by replaying its ledger through the
planner it runs now, which may plan otherwise than the one that wrote the ledger (another
release's rules). So each ledger entry records what its pass changed of the facts (`Change`:
jobs started, with their GPUs, step and time limit; jobs that stopped running; apps' sets; the
GPUs bound in the committed step), and a replay holds the pool to them (`hold`) whatever its own
planner decided: planned work may be planned anew, bound work never moves.

Pure: values in, values out, and `hold` changes only the state it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpualloc.schemas.gpu_runs import flat_runs, mask_of_flat
from gpualloc.solvers.planner.pool_state import PlannerState
from gpualloc.solvers.planner.records import AppState, JobSpec, Running

AppSets = tuple[int, int, int]  # an app's held, before and granted masks (`AppState`)


@dataclass(frozen=True)
class Facts:
    """The bound part of a pool's state at one moment: its running jobs, its apps' sets, and the
    GPUs bound in the committed step."""

    running: Mapping[str, Running] = field(default_factory=dict)
    apps: Mapping[str, AppSets] = field(default_factory=dict)
    committed: int = 0


@dataclass(frozen=True)
class Change:
    """What a pass changed of the facts: jobs that started (or were bound anew), jobs that stopped
    running (True: back in the queue), apps whose sets changed, and the committed step's GPUs."""

    started: Mapping[str, Running] = field(default_factory=dict)
    ended: Mapping[str, bool] = field(default_factory=dict)
    apps: Mapping[str, AppSets] = field(default_factory=dict)
    committed: int | None = None  # None: unchanged

    def __bool__(self) -> bool:
        return bool(self.started or self.ended or self.apps or self.committed is not None)

    def after(self, before: Facts) -> Facts:
        """The facts `before` with this change made."""
        running = {k: v for k, v in before.running.items() if k not in self.ended}
        running.update(self.started)
        return Facts(
            running,
            {**before.apps, **self.apps},
            before.committed if self.committed is None else self.committed,
        )


def facts_of(state: PlannerState | None) -> Facts:
    """The facts of a planner's state (none before the pool is configured)."""
    if state is None:
        return Facts()
    return Facts(
        dict(state.running),
        {app_id: _sets(app) for app_id, app in state.apps.items()},
        state.committed,
    )


def change(before: Facts, state: PlannerState | None) -> Change:
    """What `state` changed of the facts since `before` (running jobs compared by identity
    first: a planner replaces a running entry, never changes one)."""
    now = facts_of(state)
    started = {
        job_id: entry
        for job_id, entry in now.running.items()
        if (old := before.running.get(job_id)) is not entry and old != entry
    }
    queued = state.queued if state is not None else {}
    ended = {job_id: job_id in queued for job_id in before.running if job_id not in now.running}
    apps = {app_id: sets for app_id, sets in now.apps.items() if before.apps.get(app_id) != sets}
    committed = None if now.committed == before.committed else now.committed
    return Change(started, ended, apps, committed)


def hold(state: PlannerState, before: Facts, recorded: Change) -> bool:
    """Hold `state` (the facts `before` when its pass began) to the facts its pass `recorded`:
    jobs run where and since when they were bound, with the time limit they were bound with;
    a job the replay started that was never bound goes back to the queue; a job that stopped is
    queued or gone as it was; apps hold the sets they held. True when anything had to change
    (the current plan is then dropped, so the next pass plans afresh around the facts)."""
    truth = recorded.after(before)
    changed = False
    for job_id, entry in list(state.running.items()):
        if job_id in truth.running:
            continue
        del state.running[job_id]
        if recorded.ended.get(job_id, True):  # re-queued, or started by the replay but never bound
            state.queued[job_id] = entry.spec
        changed = True
    for job_id, requeued in recorded.ended.items():
        if not requeued and state.queued.pop(job_id, None) is not None:
            changed = True
        elif requeued and job_id not in state.queued and job_id in before.running:
            state.queued[job_id] = before.running[job_id].spec
            changed = True
    for job_id, entry in truth.running.items():
        mine = state.running.get(job_id)
        if mine is not None and (mine.mask, mine.start, _job(mine.spec)) == (entry.mask, entry.start, _job(entry.spec)):
            continue
        known = mine.spec if mine is not None else state.queued.get(job_id)
        state.queued.pop(job_id, None)
        state.running[job_id] = entry if known is None else entry._replace(spec=_bound_spec(known, entry.spec))
        changed = True
    for app_id, (held, before_mask, granted) in truth.apps.items():
        app = state.apps.get(app_id)
        if app is not None and _sets(app) != (held, before_mask, granted):
            state.apps[app_id] = replace(app, held=held, before=before_mask, granted=granted)
            changed = True
    if state.committed != truth.committed:
        state.committed = truth.committed
        changed = True
    if changed:
        state.busy = None
    return changed


def _bound_spec(known: JobSpec, bound: JobSpec) -> JobSpec:
    """The job as it was bound (its size, duration, limit and value), with what this pool knows
    of it besides (its features and forecast, which its completion teaches from)."""
    return replace(
        known,
        kind=bound.kind,
        priority=bound.priority,
        gpus=bound.gpus,
        duration=bound.duration,
        submitted=bound.submitted,
        requeue=bound.requeue,
        time_limit=bound.time_limit,
    )


def _sets(app: AppState) -> AppSets:
    return (app.held, app.before, app.granted)


# ---- as a ledger entry records it --------------------------------------------------------------
def dump_change(c: Change) -> dict[str, Any]:
    """A change as JSON data: a started job [[kind, priority, GPUs, duration, submitted step,
    re-queue, time limit], GPU runs, start step]; an app's sets [held, before, granted] as GPU
    runs (None: never committed); GPU runs flat [first, end, first, end, ...]."""
    out: dict[str, Any] = {}
    if c.started:
        out["started"] = {job_id: [_job(r.spec), flat_runs(r.mask), r.start] for job_id, r in c.started.items()}
    if c.ended:
        out["ended"] = dict(c.ended)
    if c.apps:
        out["apps"] = {app_id: [_runs_or_none(m) for m in sets] for app_id, sets in c.apps.items()}
    if c.committed is not None:
        out["committed"] = flat_runs(c.committed)
    return out


def load_change(data: Mapping[str, Any]) -> Change:
    """`dump_change`'s form back (ValueError naming what is wrong)."""
    try:
        started = {
            job_id: Running(_spec(job_id, job), mask_of_flat(gpus), int(start))
            for job_id, (job, gpus, start) in data.get("started", {}).items()
        }
        apps = {
            app_id: (_mask_or_none(held), _mask_or_none(before), _mask_or_none(granted))
            for app_id, (held, before, granted) in data.get("apps", {}).items()
        }
        committed = data.get("committed")
        return Change(
            started,
            {job_id: bool(v) for job_id, v in data.get("ended", {}).items()},
            apps,
            None if committed is None else mask_of_flat(committed),
        )
    except (TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"facts: not a recorded change ({type(e).__name__}: {e})") from None


def _job(spec: JobSpec) -> list[Any]:
    return [spec.kind, spec.priority, spec.gpus, spec.duration, spec.submitted, spec.requeue, spec.time_limit]


def _spec(job_id: str, data: list[Any]) -> JobSpec:
    kind, priority, gpus, duration, submitted, requeue, time_limit = data
    return JobSpec(job_id, kind, priority, gpus, duration, submitted, requeue, time_limit=time_limit)


def _runs_or_none(mask: int) -> list[int] | None:
    return None if mask < 0 else flat_runs(mask)


def _mask_or_none(runs: list[int] | None) -> int:
    return -1 if runs is None else mask_of_flat(runs)
