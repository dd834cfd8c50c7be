"""Pydantic models of the plan file: the output of every scheduler (`gpualloc solve`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator


class Metrics(BaseModel):
    """The contract's metrics of one grid (see docs/contract/scenario-and-plan.md, Metrics)."""

    model_config = ConfigDict(extra="allow")
    utilization: float
    value: float
    objective: float
    realtime_shortfall: int
    completed: int
    scheduled: int
    unscheduled: list[str]


class Plan(BaseModel):
    """A GPU x step grid of job ids (or null), with its metrics. Extra fields are allowed."""

    model_config = ConfigDict(extra="allow")
    scenario: str
    scheduler: str  # a registered policy's plan name (gpualloc.solvers.policies)
    grid: list[list[str | None]]
    metrics: Metrics | None = None
    solve_ms: float = Field(default=0.0, ge=0)

    @field_validator("scheduler")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        """A plan file names a registered policy: the reader passes the registry's plan names as
        the validation context's `schedulers` (`gpualloc.agent.loading.parse_plan`)."""
        known = (info.context or {}).get("schedulers")
        if known and name not in known:
            choices = ", ".join(repr(n) for n in known[:-1]) + f" or {known[-1]!r}"
            raise ValueError(f"scheduler: Input should be a registered policy: {choices} (got {name!r})")
        return name
