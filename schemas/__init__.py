"""Pydantic models of gpualloc's external contracts (scenario, plan; events later)."""

from schemas.errors import describe
from schemas.plan import Metrics, Plan, SchedulerName
from schemas.scenario import BATCH_KINDS, BatchJob, RealtimeApp, RunningState, Scenario

__all__ = ["BATCH_KINDS", "BatchJob", "Metrics", "Plan", "RealtimeApp", "RunningState",
           "Scenario", "SchedulerName", "describe"]
