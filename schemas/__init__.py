"""Pydantic models of gpualloc's external contracts: scenario and plan files, bus events
(`events`), and the operating settings with every default (`config`)."""

from gpualloc.schemas.errors import describe
from gpualloc.schemas.plan import Metrics, Plan
from gpualloc.schemas.scenario import BATCH_KINDS, BatchJob, RealtimeApp, RunningState, Scenario

__all__ = ["BATCH_KINDS", "BatchJob", "Metrics", "Plan", "RealtimeApp", "RunningState", "Scenario", "describe"]
