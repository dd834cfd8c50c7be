"""Pydantic models of the scenario file (docs/contract/scenario-and-plan.md).

A `Scenario` that constructs without error is valid input for every scheduler: field ranges
are checked per field, and the contract's cross-field rejections ("Input that is rejected")
are checked in one model validator that names the field and the rule of every breach.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from gpualloc.schemas.limits import LIMITS, POOL

StrictInt = Annotated[int, Field(strict=True)]


_CONTROL = re.compile("[\x00-\x1f\x7f]")  # C0 controls and DEL: one C-level scan, on every id of every message


def _printable(text: str) -> str:
    bad = _CONTROL.search(text)
    if bad is not None:
        raise PydanticCustomError(
            "printable",
            "must be printable text, without control characters (found {char})",
            {"char": repr(bad.group())},
        )
    return text


# The contract's bounds (schemas/limits.Limits): an id is printable text of bounded length (ids
# reach logs, file names and hooks, so no newline or other control character); counts and GPU
# indices stay below a pool's largest size; weights are finite and bounded.
Id = Annotated[str, StringConstraints(min_length=1, max_length=LIMITS.id_chars), AfterValidator(_printable)]
Text = Annotated[str, StringConstraints(max_length=LIMITS.text_chars)]
Count = Annotated[int, Field(strict=True, ge=0, le=LIMITS.gpus)]
GpuIndex = Annotated[int, Field(strict=True, ge=0, lt=LIMITS.gpus)]
Weight = Annotated[float, Field(gt=0, le=LIMITS.weight, allow_inf_nan=False)]
BATCH_KINDS = ("training", "batch_inference", "quantization")


def powers_of_two(top: int) -> list[int]:
    return [1 << k for k in range(top.bit_length())]


# A batch job's block: a power of two (checked with the node rules, `block_size_problems`; said
# as an enum in the exported JSON Schema)
BlockSize = Annotated[
    int,
    Field(strict=True, ge=1, le=LIMITS.gpus),
    WithJsonSchema({"type": "integer", "enum": powers_of_two(LIMITS.gpus)}),
]


class RunningState(BaseModel):
    """A batch job already running at step 0: it keeps exactly these GPUs for `remaining` steps."""

    model_config = ConfigDict(frozen=True)
    gpus: list[StrictInt] = Field(min_length=1, max_length=LIMITS.gpus)
    remaining: StrictInt = Field(ge=1, le=LIMITS.duration)


class BatchJob(BaseModel):
    """Training, batch inference or quantization: a contiguous power-of-two block, never interrupted."""

    model_config = ConfigDict(frozen=True)
    id: Id
    kind: Literal["training", "batch_inference", "quantization"]
    priority: Weight
    gpus: BlockSize
    duration: StrictInt = Field(ge=1, le=LIMITS.duration)
    arrival: StrictInt = Field(default=0, ge=0)
    running: RunningState | None = None


class RealtimeApp(BaseModel):
    """Real-time inference: elastic GPU count following `demand`, swaps capped per step."""

    model_config = ConfigDict(frozen=True)
    id: Id
    kind: Literal["realtime"]
    priority: Weight
    demand: list[Count] = Field(max_length=LIMITS.horizon)
    min_gpus: Count = 0
    max_gpus: Count | None = None
    swap_cap: Count | None = None
    current: list[StrictInt] | None = Field(default=None, max_length=LIMITS.gpus)


Job = Annotated[Union[BatchJob, RealtimeApp], Field(discriminator="kind")]


ValueModel = Literal["gpu_steps", "completion"]


class PoolFields(BaseModel):
    """The pool and the objective's weights: shared by the scenario file and `pool.configured`."""

    model_config = ConfigDict(frozen=True)
    gpus: StrictInt = Field(ge=1, le=LIMITS.gpus)
    gpus_per_node: StrictInt | None = Field(default=None, ge=1, le=LIMITS.gpus)
    horizon: StrictInt = Field(default=POOL.horizon, ge=1, le=LIMITS.horizon)
    step_minutes: StrictInt = Field(default=POOL.step_minutes, ge=1, le=LIMITS.step_minutes)
    time_decay: float = Field(default=POOL.time_decay, gt=0, le=1)
    realtime_penalty: float = Field(default=POOL.realtime_penalty, ge=0, le=LIMITS.weight, allow_inf_nan=False)
    swap_cap: Count = POOL.swap_cap
    # added: what a batch job is worth where a plan places it (docs/contract/README.md, "Value
    # models"): "gpu_steps", priority x w_t for every GPU-step it holds in the window; "completion",
    # priority x w_t for every step from its completion on. None: "gpu_steps"
    value_model: ValueModel | None = None


class Scenario(PoolFields):
    """One planning problem: the pool, the horizon, the objective's weights and the jobs."""

    name: str
    jobs: list[Job]

    @property
    def node_size(self) -> int:
        return self.gpus_per_node if self.gpus_per_node is not None else self.gpus

    @property
    def batch_jobs(self) -> list[BatchJob]:
        return [j for j in self.jobs if isinstance(j, BatchJob)]

    @property
    def realtime_apps(self) -> list[RealtimeApp]:
        return [j for j in self.jobs if isinstance(j, RealtimeApp)]

    def max_gpus_of(self, app: RealtimeApp) -> int:
        return self.gpus if app.max_gpus is None else app.max_gpus

    def swap_cap_of(self, app: RealtimeApp) -> int:
        return self.swap_cap if app.swap_cap is None else app.swap_cap

    @model_validator(mode="after")
    def _cross_field_rules(self) -> "Scenario":
        problems = list(_cross_field_problems(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _cross_field_problems(sc: Scenario) -> Iterator[str]:
    """Yield one message per breach of the contract's cross-field rejection rules."""
    G, N, T = sc.gpus, sc.node_size, sc.horizon
    if G % N:
        yield f"gpus_per_node: must divide gpus ({N} does not divide {G})"
    seen: set[str] = set()
    running_owner: dict[int, str] = {}
    running_by_step = [0] * T
    for i, job in enumerate(sc.jobs):
        if job.id in seen:
            yield f"jobs[{i}] (id {job.id!r}).id: duplicate id"
        seen.add(job.id)
    for i, job in enumerate(sc.jobs):  # running jobs first: apps' `current` is checked against them
        if isinstance(job, BatchJob):
            yield from _batch_problems(sc, job, f"jobs[{i}] (id {job.id!r})", running_owner, running_by_step)
    for i, job in enumerate(sc.jobs):
        if isinstance(job, RealtimeApp):
            yield from _realtime_problems(sc, job, f"jobs[{i}] (id {job.id!r})", running_owner)
    yield from _capacity_problems(sc, running_by_step)


def block_size_problems(n: int, gpus: int, node_size: int, where: str) -> Iterator[str]:
    """Why an n-GPU block can never be placed in this pool (nothing when it can)."""
    if n < 1 or n & (n - 1):
        yield f"{where}.gpus: must be a power of two (got {n})"
    if n > gpus:
        yield f"{where}.gpus: larger than the pool ({n} > gpus {gpus})"
    elif n > node_size and n % node_size:
        yield (
            f"{where}.gpus: a block larger than a node must cover whole nodes "
            f"({n} is not a multiple of gpus_per_node {node_size})"
        )


def _batch_problems(
    sc: Scenario, job: BatchJob, where: str, running_owner: dict[int, str], running_by_step: list[int]
) -> Iterator[str]:
    G, T = sc.gpus, sc.horizon
    n = job.gpus
    yield from block_size_problems(n, G, sc.node_size, where)
    if job.running is None:
        return
    gpus = job.running.gpus
    if len(gpus) != n:
        yield f"{where}.running.gpus: must hold exactly gpus={n} GPUs (got {len(gpus)})"
    if len(set(gpus)) != len(gpus):
        yield f"{where}.running.gpus: lists a GPU twice"
    for g in gpus:
        if not 0 <= g < G:
            yield f"{where}.running.gpus: GPU {g} out of range 0..{G - 1}"
        elif g in running_owner:
            yield f"{where}.running.gpus: GPU {g} already held by running job {running_owner[g]!r}"
        else:
            running_owner[g] = job.id
    for t in range(min(job.running.remaining, T)):
        running_by_step[t] += len(set(gpus))


def _realtime_problems(sc: Scenario, app: RealtimeApp, where: str, running_owner: dict[int, str]) -> Iterator[str]:
    G, T = sc.gpus, sc.horizon
    if len(app.demand) != T:
        yield f"{where}.demand: must have horizon={T} entries (got {len(app.demand)})"
    hi = sc.max_gpus_of(app)
    if hi > G:
        yield f"{where}.max_gpus: above the pool size ({hi} > gpus {G})"
    if app.min_gpus > hi:
        yield f"{where}.min_gpus: above max_gpus ({app.min_gpus} > {hi})"
    if app.current is None:
        return
    if len(set(app.current)) != len(app.current):
        yield f"{where}.current: lists a GPU twice"
    cap = sc.swap_cap_of(app)
    if len(app.current) + cap < app.min_gpus:
        yield (
            f"{where}.current: holds {len(app.current)} GPUs and may add only swap_cap={cap} at step 0 "
            f"(rule R4), so it cannot reach min_gpus={app.min_gpus} (rule R3)"
        )
    if len(app.current) - cap > hi:
        yield (
            f"{where}.current: holds {len(app.current)} GPUs and may shed only swap_cap={cap} at step 0 "
            f"(rule R4), so it cannot get down to max_gpus={hi} (rule R3)"
        )
    for g in app.current:
        if not 0 <= g < G:
            yield f"{where}.current: GPU {g} out of range 0..{G - 1}"
        elif g in running_owner:
            yield f"{where}.current: GPU {g} is held by running job {running_owner[g]!r}"


def _capacity_problems(sc: Scenario, running_by_step: list[int]) -> Iterator[str]:
    """Floors plus running jobs must fit at every step; `current` GPUs must not be shared.

    Step 0 also counts what each app cannot shed at once: with `current` given it keeps at least
    len(current) - swap_cap GPUs (rule R4), so those floors must fit beside the running jobs.
    """
    apps = sc.realtime_apps
    floor = sum(a.min_gpus for a in apps)
    for t, running in enumerate(running_by_step):
        if floor + running > sc.gpus:
            yield (
                f"jobs.min_gpus: the sum of real-time min_gpus ({floor}) plus running jobs' GPUs "
                f"({running}) at step {t} exceeds gpus ({sc.gpus})"
            )
            break
    holders: dict[int, str] = {}
    for a in apps:
        for g in a.current or ():
            if g in holders and holders[g] != a.id:
                yield f"jobs (id {a.id!r}).current: GPU {g} is also the current GPU of {holders[g]!r}"
            holders[g] = a.id
    step0 = sum(max(a.min_gpus, len(set(a.current or ())) - sc.swap_cap_of(a)) for a in apps)
    if running_by_step and step0 + running_by_step[0] > sc.gpus and step0 != floor:
        yield (
            f"jobs.current: at step 0 the real-time apps must keep {step0} GPUs (min_gpus, or "
            f"len(current) - swap_cap under R4) beside {running_by_step[0]} running, above gpus ({sc.gpus})"
        )
