"""How much headroom a real-time app is planned with: the demand quantile the objective's own
prices call for (the newsvendor's critical ratio).

A GPU-step an app is short costs the pool's real-time penalty times the app's priority (the
contract's objective); a GPU-step held for it and not needed costs the batch value it displaces:
the priority a GPU-step of the work waiting for GPUs earns (its GPU-steps' weighted mean; nothing
when nothing waits). Planning at the quantile q = short / (short + idle) of the demand forecast
makes the expected cost of the last GPU held equal either way. Pure: the same queue and app give
the same quantile, so replays plan alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpualloc.solvers.planner.records import AppSpec, JobSpec

LOWEST, HIGHEST = 0.5, 0.99  # never below the median (a plan short half the time), never the certain peak


@dataclass(frozen=True)
class Headroom:
    quantile: float
    short_cost: float  # a GPU-step short
    idle_cost: float  # a GPU-step held and not needed

    @property
    def why(self) -> str:
        return (
            f"planned at demand quantile {self.quantile:.2f}: a GPU-step short costs {self.short_cost:g} "
            f"(penalty x priority), one held idle displaces {self.idle_cost:.3g} of waiting batch value"
        )


def displaced_value(queued: Iterable[JobSpec]) -> float:
    """What a GPU-step of the waiting work earns: its priorities weighted by GPU-steps (0: none)."""
    steps = value = 0.0
    for job in queued:
        work = job.gpus * job.duration
        steps += work
        value += job.priority * work
    return value / steps if steps else 0.0


def priced(app: AppSpec, penalty: float, displaced: float) -> Headroom:
    """`app`'s quantile at these prices (`displaced`: `displaced_value` of the queue)."""
    short = penalty * app.priority
    q = short / (short + displaced) if short + displaced > 0 else HIGHEST
    return Headroom(round(min(HIGHEST, max(LOWEST, q)), 4), short, displaced)
