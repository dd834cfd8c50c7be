"""Pydantic models of the plan file: the output of every scheduler (`gpualloc solve`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SchedulerName = Literal["fifo", "heuristic", "milp"]


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
    scheduler: SchedulerName
    grid: list[list[str | None]]
    metrics: Metrics | None = None
    solve_ms: float = Field(default=0.0, ge=0)
