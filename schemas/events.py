"""Pydantic models of the event contract (docs/contract/events.md): the envelope, the payloads
the planner consumes (what the agent publishes is in `published`), and the types' registry.
Fields may be added by producers; unknown ones are ignored."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, Field, ValidationError, model_validator

from gpualloc.schemas.features import FEATURES, GpuType, Interconnect, QuantizationFeatures, TrainingFeatures
from gpualloc.schemas.limits import LIMITS, POOL
from gpualloc.schemas.published import (
    AllocationDecided,
    InputRejected,
    PassFactsPart,
    PassRecorded,
    PlanCommitted,
    PoolSnapshot,
    PoolSnapshotPart,
)
from gpualloc.schemas.scenario import BlockSize, Count, GpuIndex, Id, PoolFields, StrictInt, Text, Weight


class Envelope(BaseModel):
    event_id: Id
    type: Annotated[str, Field(max_length=LIMITS.id_chars)]
    occurred_at: AwareDatetime
    pool: Id = "default"
    schema_version: Literal[1] = 1
    payload: dict[str, Any]


class PoolConfigured(PoolFields):
    """`pool.configured`: the scenario's pool fields, without jobs; and the pool's GPU type and
    memory, which size jobs that carry `features` (added fields, optional)."""

    gpu_type: GpuType | None = None
    gpu_memory_gb: float | None = Field(default=None, gt=0, le=1024, allow_inf_nan=False)
    # added: the links between a node's GPUs, which multi-GPU jobs' collectives cross (their
    # forecast time, physics version 3); None: NVLink where the GPU type has it, else PCIe
    interconnect: Interconnect | None = None
    # added: the starvation bound: the oldest jobs queued this many steps (while their GPUs fit the
    # pool once) are planned ahead of every other job (their start no later arrival can delay)
    starvation_steps: StrictInt | None = Field(default=None, ge=1, le=LIMITS.duration)
    # added: the same bound in minutes, rounded up to steps, when `starvation_steps` is not given;
    # 0 turns the bound off; None: the contract's default (`POOL.starvation_minutes`)
    starvation_minutes: StrictInt | None = Field(default=None, ge=0, le=LIMITS.duration * 60)
    # added: reservations that bind: the k oldest starving jobs (past the starvation bound) each hold
    # a block from their earliest start by planned durations, which no work placed later may delay
    # (EASY backfilling's rule); None: none, every starving job's priority is raised instead
    reserved_jobs: StrictInt | None = Field(default=None, ge=1, le=LIMITS.reserved_jobs)
    # added: the time limit (steps) of a job that gives none (`JobSubmitted.time_limit`); None: none
    time_limit: StrictInt | None = Field(default=None, ge=1, le=LIMITS.duration)
    # added: the pool's set-up window, seconds from its first configuration to its step 0: no
    # arrival starts in it, and the first commit plans them with the apps registered in it, so a
    # backlog sent with the configuration cannot take the floors of apps sent beside it. None or
    # 0: step 0 begins at the configuration. Only the first configuration's counts
    setup_seconds: float | None = Field(default=None, ge=0, le=LIMITS.setup_seconds, allow_inf_nan=False)
    # added: the planning rules version this configuration needs (`gpualloc.solvers.release.RULES`):
    # an agent of older rules refuses it rather than plan it by rules that ignore what it asks
    rules: StrictInt | None = Field(default=None, ge=1, le=LIMITS.rules)
    # added: node agents known alive (`node.heartbeat`); None: the contract's defaults (`POOL`)
    node_silence_seconds: float | None = Field(default=None, gt=0, le=LIMITS.watch_seconds, allow_inf_nan=False)
    bind_confirm_seconds: float | None = Field(default=None, gt=0, le=LIMITS.watch_seconds, allow_inf_nan=False)
    bind_requeue_seconds: float | None = Field(default=None, gt=0, le=LIMITS.watch_seconds, allow_inf_nan=False)

    @property
    def starvation_bound(self) -> int | None:
        """The bound B in steps this configuration gives (None: off)."""
        if self.starvation_steps is not None:
            return self.starvation_steps
        minutes = POOL.starvation_minutes if self.starvation_minutes is None else self.starvation_minutes
        return -(-minutes // self.step_minutes) if minutes else None

    @model_validator(mode="after")
    def _node_divides(self) -> "PoolConfigured":
        if self.gpus_per_node and self.gpus % self.gpus_per_node:
            raise ValueError(f"gpus_per_node: must divide gpus ({self.gpus_per_node} does not divide {self.gpus})")
        confirm = POOL.bind_confirm_seconds if self.bind_confirm_seconds is None else self.bind_confirm_seconds
        requeue = POOL.bind_requeue_seconds if self.bind_requeue_seconds is None else self.bind_requeue_seconds
        if requeue < confirm:
            raise ValueError(
                f"bind_requeue_seconds: must be at least bind_confirm_seconds ({requeue:g} < {confirm:g}): a start "
                "is shown unbound before it is re-queued"
            )
        return self


class NodeStatus(BaseModel):
    node: GpuIndex
    state: Literal["up", "drained", "down"]
    detail: Text = ""


class NodeHeartbeat(BaseModel):
    """`node.heartbeat`: a node agent is alive, sent every `interval_seconds`; `holders`: the jobs
    and apps it has bound now (a start it lists is bound, whatever became of its report)."""

    node: GpuIndex
    interval_seconds: float = Field(ge=1, le=LIMITS.watch_seconds, allow_inf_nan=False)
    holders: list[Id] = Field(default=[], max_length=LIMITS.gpus)
    detail: Text = ""


class JobUsage(BaseModel):
    """What a finished job really used, for the forecasters to learn from (all optional)."""

    gpus: StrictInt | None = Field(default=None, ge=1, le=LIMITS.gpus)
    peak_memory_gb: float | None = Field(default=None, ge=0, le=1024, allow_inf_nan=False)  # per GPU
    steps: StrictInt | None = Field(default=None, ge=0, le=10**12)  # optimizer or calibration steps run
    duration: StrictInt | None = Field(default=None, ge=1, le=LIMITS.duration)  # pool steps it ran


class JobSubmitted(BaseModel):
    id: Id
    kind: Literal["training", "batch_inference", "quantization"]
    priority: Weight
    gpus: BlockSize | None = None
    duration: StrictInt | None = Field(default=None, ge=1, le=LIMITS.duration)
    features: dict[str, Any] | None = None
    requeue: bool = True
    # added: steps it may run from its start; past them the pool fails it (`job.failed`, reason
    # `time_limit`, not re-queued) and frees its GPUs. None: no limit
    time_limit: StrictInt | None = Field(default=None, ge=1, le=LIMITS.duration)
    actual_duration: StrictInt | None = Field(
        default=None, ge=1, le=LIMITS.duration
    )  # traces only: the agent ignores it
    actual_used: JobUsage | None = None  # traces only: what the job really uses, reported when it ends in a simulation

    @model_validator(mode="after")
    def _sized(self) -> "JobSubmitted":
        sized = self.gpus is not None and self.duration is not None
        if not sized and self.features is None:
            raise ValueError("gpus, duration: give both, or features for the forecaster")
        if self.features is not None and self.kind in FEATURES:
            try:
                FEATURES[self.kind].model_validate(self.features)
            except ValidationError as e:
                raise ValueError("; ".join(_feature_problems(e))) from None
        elif not sized:
            raise ValueError(f"features: {self.kind} jobs have no feature set yet (give gpus and duration)")
        return self

    def feature_model(self) -> TrainingFeatures | QuantizationFeatures | None:
        """The validated features (None without them, or for a kind without a feature set)."""
        return FEATURES[self.kind].model_validate(self.features) if self.features and self.kind in FEATURES else None


def _feature_problems(error: ValidationError) -> Iterator[str]:
    """One "features.<field>: <rule>" line per problem of a features object."""
    for err in error.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if err["loc"]:
            yield f"features.{'.'.join(map(str, err['loc']))}: {msg}"
        else:  # the cross-field rules: already "<field>: <rule>; ..."
            yield from (f"features.{part}" for part in msg.split("; "))


class JobRef(BaseModel):
    id: Id
    detail: Text = ""
    source: str | None = None  # added field: "agent" or "node-agent:<id>" when gpualloc itself
    # reports the failure (a notice for upstream; the agent acts on node.status and bindings)


class JobFailed(JobRef):
    """`job.failed`: a `JobRef`, and optionally why (added field): `out_of_memory` when the job
    ran out of GPU memory at the count it was given, `error` for any other failure, `time_limit`
    when it ran to its time limit (the agent's notice at the job's `time_limit`, or upstream's,
    whose platform enforced one of its own)."""

    reason: Literal["out_of_memory", "error", "time_limit"] | None = None


class JobCompleted(JobRef):
    """`job.completed`: a `JobRef`, and optionally what the job used (added field)."""

    used: JobUsage | None = None


class AppRegistered(BaseModel):
    id: Id
    priority: Weight
    min_gpus: Count = 0
    max_gpus: Count | None = None
    swap_cap: Count | None = None
    rps_per_gpu: Weight = 1.0
    profile: list[Count] | None = Field(default=None, min_length=24, max_length=24)
    current: list[GpuIndex] | None = Field(default=None, max_length=LIMITS.gpus)

    @model_validator(mode="after")
    def _floor_within_ceiling(self) -> "AppRegistered":
        # the agent's rule, checked where every producer meets it (`gpualloc.client` too)
        if self.max_gpus is not None and self.max_gpus < self.min_gpus:
            raise ValueError(f"max_gpus: must be >= min_gpus ({self.max_gpus} < {self.min_gpus})")
        return self


class TrafficObserved(BaseModel):
    app: Id
    gpus: Count | None = None
    requests_per_s: float | None = Field(default=None, ge=0, le=LIMITS.requests_per_s, allow_inf_nan=False)

    def gpus_needed(self, rps_per_gpu: float) -> int:
        """GPUs needed: given, or ceil(requests_per_s / rps_per_gpu) as the contract says."""
        if self.gpus is not None:
            return self.gpus
        assert self.requests_per_s is not None  # _measured: one of them is given
        return math.ceil(self.requests_per_s / rps_per_gpu)

    def load(self, rps_per_gpu: float) -> float:
        """GPUs needed before rounding up: what a traffic forecaster learns from."""
        if self.gpus is not None:
            return float(self.gpus)
        assert self.requests_per_s is not None  # _measured: one of them is given
        return self.requests_per_s / rps_per_gpu

    @model_validator(mode="after")
    def _measured(self) -> "TrafficObserved":
        if self.gpus is None and self.requests_per_s is None:
            raise ValueError("gpus, requests_per_s: give one of them")
        return self


class BindingReported(BaseModel):
    node: GpuIndex
    job_id: Id
    gpus: list[GpuIndex] = Field(max_length=LIMITS.gpus)
    status: Literal["bound", "released", "failed"]
    step: StrictInt | None = Field(default=None, ge=0)
    detail: Text = ""


class EventType(StrEnum):
    """Every event type of the contract (docs/contract/events.md), as the envelope's `type` says it."""

    POOL_CONFIGURED = "pool.configured"
    NODE_STATUS = "node.status"
    NODE_HEARTBEAT = "node.heartbeat"
    JOB_SUBMITTED = "job.submitted"
    JOB_CANCELLED = "job.cancelled"
    JOB_COMPLETED = "job.completed"
    JOB_FAILED = "job.failed"
    APP_REGISTERED = "app.registered"
    TRAFFIC_OBSERVED = "traffic.observed"
    BINDING_REPORTED = "binding.reported"
    ALLOCATION_DECIDED = "allocation.decided"
    PLAN_COMMITTED = "plan.committed"
    INPUT_REJECTED = "input.rejected"
    PASS_RECORDED = "pass.recorded"
    PASS_FACTS_PART = "pass.facts.part"
    POOL_SNAPSHOT = "pool.snapshot"
    POOL_SNAPSHOT_PART = "pool.snapshot.part"


PAYLOADS: dict[str, type[BaseModel]] = {  # the input events
    EventType.POOL_CONFIGURED: PoolConfigured,
    EventType.NODE_STATUS: NodeStatus,
    EventType.NODE_HEARTBEAT: NodeHeartbeat,
    EventType.JOB_SUBMITTED: JobSubmitted,
    EventType.JOB_CANCELLED: JobRef,
    EventType.JOB_COMPLETED: JobCompleted,
    EventType.JOB_FAILED: JobFailed,
    EventType.APP_REGISTERED: AppRegistered,
    EventType.TRAFFIC_OBSERVED: TrafficObserved,
    EventType.BINDING_REPORTED: BindingReported,
}
OUTPUTS: dict[str, type[BaseModel]] = {  # what the agent publishes
    EventType.ALLOCATION_DECIDED: AllocationDecided,
    EventType.PLAN_COMMITTED: PlanCommitted,
    EventType.INPUT_REJECTED: InputRejected,
    EventType.PASS_RECORDED: PassRecorded,
    EventType.PASS_FACTS_PART: PassFactsPart,
    EventType.POOL_SNAPSHOT: PoolSnapshot,
    EventType.POOL_SNAPSHOT_PART: PoolSnapshotPart,
}


def parse_event(data: dict[str, Any]) -> tuple[Envelope, BaseModel]:
    """Envelope and typed payload; ValueError naming the field and the rule otherwise."""
    envelope = Envelope.model_validate(data)
    model = PAYLOADS.get(envelope.type)
    if model is None:
        raise ValueError(f"type: {envelope.type!r} is not an input event type ({', '.join(sorted(PAYLOADS))})")
    return envelope, model.model_validate(envelope.payload)


def envelope(
    type: str,
    payload: BaseModel | dict[str, Any],
    occurred_at: datetime,
    event_id: str,
    pool: str = "default",
    checked: bool = True,
) -> dict[str, Any]:
    """A contract message (a dict ready for JSON) around a payload: a model, or the fields as a
    producer writes them (checked against the type's model unless `checked` is False, for a load
    generator whose receiver checks them; kept as given)."""
    if isinstance(payload, BaseModel):
        fields = payload.model_dump(mode="json")
    else:
        model = PAYLOADS.get(type) or OUTPUTS.get(type)
        if model is None:
            raise ValueError(f"type: {type!r} is not an event type of the contract")
        if checked:
            model.model_validate(payload)
        fields = payload
    return {
        "event_id": event_id,
        "type": type,
        "occurred_at": timestamp(occurred_at),
        "pool": pool,
        "schema_version": 1,
        "payload": fields,
    }


def timestamp(dt: datetime) -> str:
    """RFC 3339 with zone, as the contract writes `occurred_at`."""
    return dt.isoformat().replace("+00:00", "Z")
