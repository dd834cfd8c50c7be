"""What the agent publishes (decisions, commits, rejections) and its ledger and snapshots record."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.scenario import StrictInt


class ForecastMade(BaseModel):
    """What the forecasters said of a job given by its features (`allocation.decided.forecast`)."""

    forecast: list[Literal["gpus", "duration"]]  # the values forecast; the others were given
    gpus: int
    duration: int  # steps planned: the kind's configured quantile, rounded up
    quantile: float
    median: float  # steps
    interval: tuple[float, float]  # steps
    coverage: float  # of the interval
    peak_memory_gb: float  # forecast a GPU at `gpus`


Action = Literal["start", "planned", "queued", "rejected"]  # what an arrival is told


class AllocationDecided(BaseModel):
    job_id: str
    action: Action
    gpus: list[int] = []
    start_step: int | None = None
    reason: str
    input_event_id: str
    latency_ms: float
    pass_seq: int | None = None  # added: the planning pass (arrivals of one poll share one)
    pass_size: int | None = None
    forecast: ForecastMade | None = None  # added: when the job's GPUs or duration were forecast


GpuEdge = Annotated[int, Field(strict=True, ge=0, le=LIMITS.gpus)]
StepEdge = Annotated[int, Field(strict=True, ge=0, le=LIMITS.horizon)]
Rect = tuple[GpuEdge, GpuEdge, StepEdge, StepEdge]  # [gpu_from, gpu_to, step_from, step_to), both half-open


class TentativePlan(BaseModel):
    """`plan.committed.plan`: the tentative plan from the commit's step on, as rectangles per
    holder (`gpualloc.schemas.commits` builds it, rebuilds the grid and splits a commit)."""

    gpus: StrictInt = Field(ge=1, le=LIMITS.gpus)  # the pool's GPUs: the grid's rows
    steps: StrictInt = Field(ge=1, le=LIMITS.horizon)  # the window: the grid's columns, from the commit's step
    holders: dict[str, list[Rect]] = {}  # job or app id -> GPUs [gpu_from, gpu_to) over steps [step_from, step_to)

    @model_validator(mode="after")
    def _inside(self) -> TentativePlan:
        for holder, rects in self.holders.items():
            for k, (g0, g1, t0, t1) in enumerate(rects):
                if not (0 <= g0 < g1 <= self.gpus and 0 <= t0 < t1 <= self.steps):
                    raise ValueError(
                        f"holders[{holder!r}][{k}]: [{g0}, {g1}, {t0}, {t1}] must be a non-empty "
                        f"[gpu_from, gpu_to, step_from, step_to) within {self.gpus} GPUs x "
                        f"{self.steps} steps"
                    )
        return self


FullModeOutcome = Literal["adopted", "not_better", "stale", "failed", "timed_out"]


class FullModeSolve(BaseModel):
    """A full-mode solve that ended: the step whose window it solved, what became of its plan
    (`adopted`; `not_better`: no better than the hot path's; `stale`: no legal plan once carried
    onto the window as it is now; `failed`; `timed_out`: killed past its deadline), why in words,
    its wall time, and when adopted its objective above the hot path's."""

    step: int
    outcome: FullModeOutcome
    detail: str
    seconds: float
    gain: float | None = None


class FullModeReport(BaseModel):
    """What became of full mode since the pool's previous commit: a solve `ran` (`last` says how
    it ended), is `running` (since `running_since`), its last launch was `skipped` (the size gate,
    `detail` with its figures) or it is `not_due`; `last`: the latest solve that ended (None
    when none has since the agent started); `next_step`: the step whose window it solves next."""

    state: Literal["ran", "running", "skipped", "not_due"]
    detail: str | None = None
    running_since: int | None = None  # running: the step whose window it solves
    last: FullModeSolve | None = None
    next_step: int | None = None


class Reservation(BaseModel):
    """A queued job's reservation in a commit: no work placed later may delay its start."""

    start_step: StrictInt = Field(ge=0)
    first_gpu: StrictInt = Field(ge=0)  # the block's first GPU: a block is GPUs [first_gpu, first_gpu + gpus)
    gpus: StrictInt = Field(ge=1)


class PlanCommitted(BaseModel):
    step: int
    seq: int
    step_start: AwareDatetime
    assignments: dict[str, list[int]]
    plan: TentativePlan | None = None  # added (replaces `grid`): the tentative plan, this part's holders
    part: StrictInt = Field(default=1, ge=1)  # added: this message is part `part` of `parts` of commit `seq`
    parts: StrictInt = Field(default=1, ge=1)
    source: Literal["heuristic", "milp"]
    objective: float
    bound: float | None = None
    started: list[str] = []  # added: jobs that start running at this step
    full_mode: str | None = None  # added: what became of the last full-mode plan, when one ended
    full_mode_report: FullModeReport | None = None  # added: full mode's state at this commit, in fields
    frontier: dict[str, int] = {}  # added: per "topic:partition", the next input offset when it was made
    # added: a reactive commit of the step (a later seq): only the holders it changes, whose sets replace
    # theirs for the rest of the step; every other holder keeps its set (plan None, started empty)
    reactive: bool = False
    reasons: dict[str, str] = {}  # added: per holder, why it holds what it does now (a reactive grant's why)
    # added: per queued job holding a reservation (`pool.configured`'s `reserved_jobs`), the step it
    # is reserved from (by planned durations; it may lie past the window) and its block; None: none
    reservations: dict[str, Reservation] | None = None

    @model_serializer(mode="wrap")
    def _without_empty_reservations(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A commit with no reservation is written as before the field was added: not a byte more."""
        data: dict[str, Any] = handler(self)
        if data.get("reservations") is None:
            data.pop("reservations", None)
        return data

    @model_validator(mode="after")
    def _part_of_parts(self) -> PlanCommitted:
        if self.part > self.parts:
            raise ValueError(f"part: {self.part} must be at most parts ({self.parts})")
        return self


class InputRejected(BaseModel):
    reason: str
    original: str
    topic: str
    partition: int
    offset: int
    source: str | None = None  # None: the pool's agent; "group:<name>": a shared group's member (misplaced keys)
    original_bytes: int | None = None  # added: the record's value's length (None: a null value)...
    original_sha256: str | None = None  # ...and its SHA-256, hex: `original` holds at most LIMITS.original_chars
    truncated: bool = False  # added: `original` was cut to that length


class RecordedCommit(BaseModel):
    """A commit as its transaction recorded it, so a replay makes the same one."""

    seq: int
    full_mode: str | None = None  # what became of full mode's plan, as the commit said
    full_mode_report: FullModeReport | None = None  # as the commit said
    bound: float | None = None
    # the adopted full-mode plan (source milp), else None: {"batch": {job: [start, GPU runs]}, "realtime": {app:
    # [[steps, GPU runs], ...]}}, GPU runs [first, end, first, end, ...]; older entries: hex masks (a mask per step)
    schedule: dict[str, Any] | None = None
    ahead: bool = False  # the hot path's plan was made ahead, from the last `cut` (else replanned here)


class PassRecorded(BaseModel):
    """`pass.recorded` on the ledger topic: one per agent transaction. `inputs` are the consumed
    records in the order they were handed to the planner, as runs [topic, partition, first, last]
    of consecutive offsets (`inline` holds records that came from no topic: `--config`); then the
    commits made, in order; then, when `cut`, the window was cut for the next boundary's plan,
    made ahead of it. `frontier` is the next offset to consume per `topic:partition`, and `run`
    the agent settings a replay needs (policy, hot-path effort, clock, full-mode cadence)."""

    txn: int = Field(ge=1)
    now: AwareDatetime
    inputs: list[tuple[str, int, int, int]] = []
    inline: dict[str, str] = {}
    commits: list[RecordedCommit] = []
    cut: bool = False
    frontier: dict[str, int] = {}
    run: dict[str, Any] = {}
    # added: what the pass changed of what is bound (`gpualloc.solvers.planner.facts.dump_change`): jobs started
    # {job: [[kind, priority, gpus, duration, submitted, requeue, time_limit], GPU runs, start step]}, jobs that
    # stopped running {job: re-queued}, apps' sets {app: [held, before, granted] GPU runs or null}, the committed
    # step's GPUs; None: written by a release that did not record it
    facts: dict[str, Any] | None = None
    facts_parts: StrictInt = Field(default=0, ge=0)  # added: > 0: `facts` is in that many `pass.facts.part` records
    seq: int | None = None  # added: the commits (reactive ones too) published up to and with this pass
    # added: records dead-lettered without being planned ("topic:partition:offset" -> reason): a pass the planner
    # raised on; a replay dead-letters them again, and its frontier moves past them
    refused: dict[str, str] = {}


class PassFactsPart(BaseModel):
    """`pass.facts.part` on the ledger topic (key: pool), written in the transaction of the entry
    `txn` before it: piece `part` (1 .. parts) of that entry's `facts` packed (zlib-compressed
    JSON, base64, as a snapshot's `state`), when they would make the entry larger than one message."""

    txn: int = Field(ge=1)
    part: int = Field(ge=1)
    text: str


class PoolSnapshot(BaseModel):
    """`pool.snapshot` on the compacted state topic (key: pool): the pool's state after
    transaction `txn`, and where its ledger goes on. A state too large for one record is cut
    into `parts` pieces: this record holds the first, `pool.snapshot.part` records of the same
    transaction the others."""

    version: int
    txn: int
    seq: int
    ledger_partition: int
    ledger_next: int  # at or before the offset of the first ledger entry after it (skip entries up to txn)
    frontier: dict[str, int]
    # zlib-compressed JSON, base64: {"pool": the planner's state, "seen": [[event id, step, digest], ...]}; its
    # first piece when `parts` > 1 (the pieces joined in part order make the text)
    state: str
    parts: int = Field(default=1, ge=1)  # added: the pieces `state` is cut into (this record's is the first)


class PoolSnapshotPart(BaseModel):
    """`pool.snapshot.part` on the state topic (key: pool, a NUL character, `part`; on the pool's
    partition): piece `part` (1 .. parts - 1) of the state of the `pool.snapshot` of `txn`."""

    txn: int
    part: int = Field(ge=1)
    state: str
