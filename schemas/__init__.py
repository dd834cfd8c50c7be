"""Pydantic models of gpualloc's external contracts (scenario, plan; events later)."""

from gpualloc.schemas.errors import describe
from gpualloc.schemas.plan import Metrics, Plan, SchedulerName
from gpualloc.schemas.scenario import BATCH_KINDS, BatchJob, RealtimeApp, RunningState, Scenario

__all__ = ["BATCH_KINDS", "BatchJob", "Metrics", "Plan", "RealtimeApp", "RunningState",
           "Scenario", "SchedulerName", "describe"]
