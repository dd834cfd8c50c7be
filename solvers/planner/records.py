"""The planner's values: a pool's configuration, jobs and apps as planned, decisions, commits,
full mode's plans and what became of them, and cuts for plans made elsewhere. Plain data: what
the shell reads and passes back; the planner (`planner.py`) is the one to change its state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, NamedTuple

from gpualloc.forecasting.job_forecast import JobForecast
from gpualloc.schemas.features import Features
from gpualloc.schemas.limits import POOL
from gpualloc.schemas.published import Action
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.problem import Problem
from gpualloc.solvers.value_models import GPU_STEPS, ValueModel

BLOCKER = "\x00unavailable"  # pseudo running job holding GPUs that may take no new work
Source = Literal["heuristic", "milp"]  # a commit's `source`, in the events contract's words (`PlanCommitted`)
HOT_PATH: Source = "heuristic"
FULL_MODE: Source = "milp"


def is_blocker(job_id: str) -> bool:
    """A blocker's id: `BLOCKER`, or a later part of it (`window.window`); no job's id starts
    with a control character."""
    return job_id.startswith(BLOCKER)


@dataclass(frozen=True)
class PoolConfig:
    gpus: int
    gpus_per_node: int | None = None
    horizon: int = POOL.horizon
    step_minutes: int = POOL.step_minutes
    time_decay: float = POOL.time_decay
    realtime_penalty: float = POOL.realtime_penalty
    swap_cap: int = POOL.swap_cap
    gpu_type: str | None = None  # what jobs given by their features are sized for
    gpu_memory_gb: float | None = None
    starvation_steps: int | None = None  # the starvation bound B (`Planner.starving`); None: off
    time_limit: int | None = None  # the time limit of a job submitted without one; None: none
    # the default before the configuration that set `time_limit`, and that configuration's
    # `occurred_at` (None: the first configuration's, in force for every earlier job)
    previous_time_limit: int | None = None
    time_limit_since: datetime | None = None
    # node agents known alive (`gpualloc.solvers.planner.node_watch`)
    node_silence_seconds: float = POOL.node_silence_seconds
    bind_confirm_seconds: float = POOL.bind_confirm_seconds
    bind_requeue_seconds: float = POOL.bind_requeue_seconds
    value_model: ValueModel = GPU_STEPS  # what a batch job is worth where it is placed (`value_models`)
    # the starving jobs that hold reservations (`reservations`), oldest first; None: none, every
    # starving job's priority is raised instead (`starvation.raised`)
    reserved_jobs: int | None = None
    interconnect: str | None = None  # the links a node's GPUs talk over (None: NVLink where the type has it)

    @property
    def node_size(self) -> int:
        return self.gpus_per_node or self.gpus

    def time_limit_at(self, submitted: datetime) -> int | None:
        """The default time limit of a job submitted at `submitted`: a configuration applies to
        the jobs submitted from its `occurred_at` on, whenever the pool takes it."""
        if self.time_limit_since is not None and submitted < self.time_limit_since:
            return self.previous_time_limit
        return self.time_limit

    def with_time_limit_history(self, before: PoolConfig, at: datetime) -> PoolConfig:
        """This configuration, occurring at `at`, as it follows `before`: a changed default keeps
        the one in force at `at` for jobs submitted earlier; an unchanged one keeps `before`'s."""
        if self.time_limit == before.time_limit:
            return replace(
                self, previous_time_limit=before.previous_time_limit, time_limit_since=before.time_limit_since
            )
        return replace(self, previous_time_limit=before.time_limit_at(at), time_limit_since=at)


@dataclass(frozen=True)
class JobSpec:
    id: str
    kind: str
    priority: float
    gpus: int
    duration: int
    submitted: int  # step of arrival
    requeue: bool = True
    # the validated features, when the job gave them (its completion teaches the forecasters)
    features: Features | None = None
    forecast: JobForecast | None = None  # when its GPUs or duration were forecast
    time_limit: int | None = None  # steps it may run from its start: failed at that boundary (`Admission.expire`)

    def __post_init__(self) -> None:
        # planned to hold its GPUs no longer than its limit lets it run
        if self.time_limit is not None:
            object.__setattr__(self, "duration", min(self.duration, self.time_limit))


class Running(NamedTuple):
    """A running job as the pool holds it, until it ends at a boundary the plan sees."""

    spec: JobSpec  # the job as it was decided (its GPUs, planned duration, time limit)
    mask: int  # the GPUs it holds, a bit each
    start: int  # the step it started in


class FrozenDict(dict[int, int]):
    """A value's mapping: read like a dict, replaced whole, never changed in place (copies and
    pickles, for the full-mode solver's process, as a dict does)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a FrozenDict is replaced, never changed in place")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


_NOTHING = FrozenDict()


@dataclass(frozen=True)
class AppSpec:
    """A real-time app as it registered (`app.registered`): its bounds, its value and how its
    traffic reads. Replaced whole when the app registers again; what the pool learns of the app
    since lives in its `AppState`."""

    id: str
    priority: float
    min_gpus: int = 0
    max_gpus: int | None = None
    swap_cap: int | None = None
    profile: Sequence[int] | None = None  # GPUs by hour of day, before traffic history exists (kept as a tuple)
    rps_per_gpu: float = 1.0  # requests per second one GPU serves

    def __post_init__(self) -> None:
        # kept read-only, whatever was given, so the value cannot be changed through it
        if self.profile is not None and not isinstance(self.profile, tuple):
            object.__setattr__(self, "profile", tuple(self.profile))

    def cap(self, pool_cap: int) -> int:
        """Its swap cap: its own, else the pool's (`pool_cap`)."""
        return pool_cap if self.swap_cap is None else self.swap_cap

    def ceiling(self, gpus: int) -> int:
        """The most GPUs it may hold in a pool of `gpus`."""
        return gpus if self.max_gpus is None else min(self.max_gpus, gpus)


class Seen(NamedTuple):
    """An app's observation as the pool keeps its latest: GPUs needed in a step."""

    step: int
    gpus: int


@dataclass(frozen=True)
class AppState:
    """A registered app as the pool knows it: its registration and what happened since (its
    observations, the sets it held). A value: the planner replaces an app's, never changes one
    in place."""

    spec: AppSpec
    observed: Mapping[int, int] = field(default_factory=lambda: _NOTHING)  # step -> largest GPUs observed (read-only)
    held: int = -1  # GPU mask held in the last committed step (-1: never committed), reactive grants included
    before: int = -1  # GPU mask held at the end of the step before it: what R4 counts a step's grants against
    latest: Seen | None = None  # its last observation, of the latest step observed
    granted: int = 0  # GPUs of `held` granted within the committed step (its commit's own set excluded)

    def __post_init__(self) -> None:
        if not isinstance(self.observed, FrozenDict):  # kept read-only, whatever was given
            object.__setattr__(self, "observed", FrozenDict(self.observed))


@dataclass(frozen=True)
class Decision:
    job_id: str
    action: Action
    gpus: tuple[int, ...]
    start_step: int | None
    reason: str
    forecast: JobForecast | None = None  # when the job's GPUs or duration were forecast


@dataclass(frozen=True)
class Commit:
    step: int
    assignments: dict[str, tuple[int, ...]]  # job or app id -> GPUs binding for this step
    started: tuple[str, ...]  # jobs that start running at this step
    window: Problem  # the window this step was planned in
    schedule: Schedule  # the plan over that window (its step 0 is this commit)
    source: Source = HOT_PATH  # HOT_PATH, or FULL_MODE: an adopted full-mode plan
    reasons: dict[str, str] = field(default_factory=dict)  # app id -> the headroom it is planned with, and why
    # queued job id -> (step, GPUs): the reservation it holds (`reservations`), its start by planned durations
    reserved: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Grant:
    """A real-time app's set changed within the committed step: GPUs given at once when its
    observed demand exceeds what it holds (`RealTime.react`: idle ones, and others apps held above
    their own demand), or GPUs so given handed back as idle when its demand falls again
    (`RealTime.release`). Published as a reactive commit of that step, which carries only the
    sets it changes."""

    step: int
    app_id: str
    gpus: tuple[int, ...]  # the app's whole set in the step now
    added: tuple[int, ...]
    reason: str
    given: dict[str, tuple[int, ...]] = field(default_factory=dict)  # app that gave GPUs -> its set now
    released: tuple[int, ...] = ()

    @property
    def sets(self) -> dict[str, tuple[int, ...]]:
        """Every app whose set it changes, with its set now."""
        return {self.app_id: self.gpus, **self.given}


@dataclass(frozen=True)
class FullModePlan:
    """A full-mode plan of the window at step `made_at` (a snapshot of the planner's state)."""

    made_at: int
    schedule: Schedule
    objective: float
    bound: float | None = None


@dataclass(frozen=True)
class Adoption:
    """What became of a full-mode plan at a step boundary: the schedule to commit, or None
    with the reason (stale, illegal once reconciled, or no better than the hot path)."""

    schedule: Schedule | None
    reason: str
    objective: float | None = None  # the reconciled plan's, on the current window
    hot_objective: float | None = None  # the hot path's, on the same window
    hot: tuple[Problem, Schedule] | None = None  # the hot path's window and plan, for `tick_after`


@dataclass(frozen=True)
class Cut:
    """A window cut for a plan made elsewhere: the step it is for, and the problem to solve."""

    step: int
    problem: Problem
