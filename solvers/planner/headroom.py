"""How much headroom a real-time app is planned with: the demand quantile the objective's own
prices call for (the newsvendor's critical ratio).

A GPU-step an app is short costs the pool's real-time penalty times the app's priority (the
contract's objective); a GPU-step held for it and not needed costs the batch value it displaces:
the priority a GPU-step of the work waiting for GPUs earns (its GPU-steps' weighted mean; nothing
when nothing waits). Planning at the quantile q = short / (short + idle) of the demand forecast
makes the expected cost of the last GPU held equal either way. Pure: the same queue and app give
the same quantile, so replays plan alike.

It is the default (`forecast.realtime_priced`; docs/results.md, "Headroom", has what it earns
against fixed quantiles). A GPU held for an app is priced here as one GPU-step of average batch
value, but in a packed pool one GPU can keep an 8-GPU block from starting, a batch job started
on GPUs the app turns out to need holds them until it ends, and a future step planned short is
replanned at every boundary before it is a shortfall; the per-step newsvendor prices none of
these.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpualloc.solvers.planner.records import AppSpec, JobSpec
from gpualloc.solvers.value_models import GPU_STEPS, ValueModel

MEDIAN = 0.5  # the demand an app needs in most steps (`Realtime.median`: contested room is shared by it)
LOWEST, HIGHEST = MEDIAN, 0.99  # never below the median (a plan short half the time), never the certain peak


@dataclass(frozen=True)
class Headroom:
    quantile: float
    why: str


def fixed(quantile: float) -> Headroom:
    """The settings' quantile for every app (`forecast.realtime_priced` off)."""
    return Headroom(quantile, f"planned at demand quantile {quantile:.2f} (forecast.realtime_quantile)")


def displaced_value(queued: Iterable[JobSpec], value_model: ValueModel = GPU_STEPS) -> float:
    """What a GPU-step of the waiting work earns, weighted by its GPU-steps (0: none): under
    `gpu_steps` its priority; under `completion` its priority / its GPUs, since a job of g
    GPUs is delayed one step by g GPU-steps withheld and a step's delay costs its priority."""
    steps = value = 0.0
    for job in queued:
        work = job.gpus * job.duration
        steps += work
        value += (job.priority if value_model == GPU_STEPS else job.priority / job.gpus) * work
    return value / steps if steps else 0.0


def priced(app: AppSpec, penalty: float, displaced: float) -> Headroom:
    """`app`'s quantile at these prices (`displaced`: `displaced_value` of the queue)."""
    short = penalty * app.priority
    q = round(min(HIGHEST, max(LOWEST, short / (short + displaced) if short + displaced > 0 else HIGHEST)), 4)
    return Headroom(
        q,
        f"planned at demand quantile {q:.2f}: a GPU-step short costs {short:g} (penalty x priority), "
        f"one held idle displaces {displaced:.3g} of waiting batch value",
    )
