"""Synthetic ground-truth traces (docs/synthetic-data.md): jobs (`job_trace`), real-time traffic
(`traffic_trace`), and both in one pool for the simulator (`forecast_trace`), where every job
carries its true size so that a plain simulator run is the oracle a forecaster is held to."""

from __future__ import annotations

import math
import random
from datetime import timedelta
from typing import Any

from gpualloc.generators.synthetic_jobs import (
    GPUS,
    POOL_GPUS,
    duration_noise_floor,
    fitting_gpus,
    job_trace,
    noise_floor_last,
    sample_job,
)
from gpualloc.generators.synthetic_traffic import (
    expected_demand,
    pool_record,
    to_events,
    traffic_plan,
    traffic_records,
    traffic_trace,
)
from gpualloc.generators.traces import T0
from gpualloc.schemas.features import QuantizationFeatures, TrainingFeatures

__all__ = [
    "duration_noise_floor",
    "forecast_trace",
    "ground_truth",
    "job_trace",
    "noise_free_gpus",
    "noise_floor_last",
    "traffic_trace",
]

NAME = "synthetic"

LOAD = 1.35  # offered GPU-steps of the jobs / GPU-steps real-time traffic leaves free
LOAD_OVER = 0.1  # ... overshot by at most this: a job that would carry it further is drawn again


def _arrival_weight(hours: float, holidays: tuple[int, ...]) -> float:
    """Jobs are submitted in office hours mostly: less in the evening, little at night or on days off."""
    day, hour = int(hours // 24), hours % 24
    if day % 7 >= 5 or day in holidays:
        return 0.15
    return 1.0 if 9 <= hour < 18 else 0.4 if 7 <= hour < 22 else 0.1


def forecast_trace(
    seed: int = 0,
    weeks: int = 4,
    gpus: int = 64,
    gpus_per_node: int = 8,
    step_minutes: int = 60,
    jobs_per_day: float | None = None,
    apps: int = 3,
    gpu_type: str = "h100-80gb",
) -> list[dict[str, Any]]:
    """One pool ("default"): apps and traffic as `traffic_trace`, jobs as `job_trace` with their
    true `gpus`, `duration` (= actual_duration) and `actual_used`. Without `jobs_per_day`, jobs
    are drawn until they offer LOAD times the GPU-steps the traffic's true level leaves free (at
    most LOAD + LOAD_OVER times: a job that would offer more is drawn again)."""
    rng = random.Random(seed * 7919 + 3)
    plan = traffic_plan(seed, weeks, apps, step_minutes, gpus)
    levels = expected_demand(plan)
    free = sum(max(0, gpus - sum(math.ceil(v[s]) for v in levels.values())) for s in range(plan.steps))
    jobs = []
    if jobs_per_day is None:
        offered = 0
        while offered < LOAD * free:
            job = sample_job(rng, gpu_type, step_minutes, gpus // 2)
            if offered + job.gpus * job.actual_duration > (LOAD + LOAD_OVER) * free:
                continue  # a job this large would overshoot the load: another is drawn in its place
            jobs.append(job)
            offered += job.gpus * job.actual_duration
    else:
        jobs = [sample_job(rng, gpu_type, step_minutes, gpus // 2) for _ in range(round(jobs_per_day * weeks * 7))]
    weights = [_arrival_weight(s * step_minutes / 60, plan.holidays) for s in range(plan.steps)]
    arrivals = sorted(rng.choices(range(plan.steps), weights=weights, k=len(jobs)))
    records = [
        pool_record(
            gpus,
            step_minutes,
            24,
            gpus_per_node=gpus_per_node,
            gpu_type=gpu_type,
            gpu_memory_gb=float(GPUS[gpu_type].memory_gb),
        )
    ]
    records += traffic_records(plan, seed)
    for i, (step, job) in enumerate(zip(arrivals, jobs)):
        at = T0 + timedelta(minutes=step * step_minutes, seconds=rng.randrange(step_minutes * 60))
        records.append(
            (
                at,
                "job.submitted",
                {
                    "id": f"job-{i}",
                    "kind": job.kind,
                    "priority": job.priority,
                    "features": job.features,
                    "gpus": job.gpus,
                    "duration": job.actual_duration,
                    "actual_duration": job.actual_duration,
                    "actual_used": job.used(),
                },
                "default",
            )
        )
    return to_events(records, f"f{seed}")


def ground_truth(seed: int = 0, weeks: int = 5) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`job_trace` and `traffic_trace` of `seed` as one trace, with their truth in the format the
    ground-truth generators share (docs/ground-truth.md)."""
    jobs, job_truth = job_trace(seed)
    traffic = traffic_trace(seed, weeks)
    features = {e["payload"]["id"]: e["payload"] for e in jobs if e["type"] == "job.submitted"}
    pools = {e["payload"]["id"]: e["pool"] for e in jobs if e["type"] == "job.submitted"}
    truth_jobs = {
        job_id: {
            "pool": pools[job_id],
            "kind": features[job_id]["kind"],
            "group": t.get("variant") or t.get("algorithm"),
            "gpu_type": t["gpu_type"],
            "median_steps": t["expected_steps"],
            "gpus": t["gpus"],
            "noise_free_gpus": noise_free_gpus(features[job_id]["kind"], features[job_id]["features"], t["gpu_type"]),
            "peak_memory_gb": t["peak_memory_gb"],
        }
        for job_id, t in job_truth.items()
    }
    plan = traffic_plan(seed, weeks)
    apps = {
        app_id: {"pool": "default", "demand": {str(step): round(v, 4) for step, v in enumerate(levels)}}
        for app_id, levels in expected_demand(plan).items()
    }
    events = sorted(jobs + traffic, key=lambda e: e["occurred_at"])
    return events, {"generator": NAME, "seed": seed, "jobs": truth_jobs, "apps": apps}


def noise_free_gpus(kind: str, features: dict[str, Any], gpu_type: str) -> int | None:
    """The count a job would run on without its memory noise."""
    model = QuantizationFeatures if kind == "quantization" else TrainingFeatures
    return fitting_gpus(kind, model.model_validate(features), gpu_type, 1.0, POOL_GPUS)
