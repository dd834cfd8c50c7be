"""The value models: what a batch job is worth where a plan places it.

- `gpu_steps` (the contract's default): a job earns priority x w_t for every GPU it holds at
  every step t of the window, w_t = time_decay^t. Delaying a job costs its GPUs x its duration,
  so on a full pool the plan runs the largest work first.
- `completion`: a job earns priority x w_t for every step t from its completion C on, summed to
  the end of time: priority x time_decay^C / (1 - time_decay); with a time_decay of 1 (no
  discount), priority x (LATEST - C), where LATEST (horizon + the contract's longest duration)
  is past every completion a window can plan. Every step a job is delayed costs priority x w_C
  whatever its size, so with equal priorities the plan orders shortest first (weighted
  completion time, discounted: Rothkopf's rule), and a job completing past the window is worth
  what its completion is worth, not its steps inside the window.

Apps' shortfall is priced the same under both: an app GPU-step short at t costs
realtime_penalty x the app's priority x w_t, one step of a batch GPU's value under `gpu_steps`
and one step of a job's delay under `completion`.
"""

from __future__ import annotations

from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.scenario import ValueModel

__all__ = [
    "COMPLETION",
    "GPU_STEPS",
    "VALUE_MODELS",
    "ValueModel",
    "completion_value",
    "latest_completion",
    "most_valuable_first",
]

GPU_STEPS: ValueModel = "gpu_steps"
COMPLETION: ValueModel = "completion"
VALUE_MODELS: tuple[ValueModel, ...] = (GPU_STEPS, COMPLETION)


def latest_completion(horizon: int) -> int:
    """A step past every completion a window of `horizon` steps can plan (a start inside it, the
    contract's longest duration): undiscounted completion values count the steps up to it."""
    return horizon + LIMITS.duration


def completion_value(priority: float, completion: int, decay: float, horizon: int) -> float:
    """What a job of `priority` completing at step `completion` (from the window's step 0, which
    may lie past the window) earns under `completion`. The compiled heuristic computes the same
    float (solvers/native/src/model.rs: `completion_value`)."""
    if decay < 1.0:
        return priority * decay**completion / (1.0 - decay)
    return priority * float(max(latest_completion(horizon) - completion, 0))


def most_valuable_first(value_model: ValueModel, priority: float, gpus: int, duration: int) -> tuple[float, int]:
    """A sort key putting jobs inserted into a plan (or kept for full mode) most valuable first:
    the highest priority, then under `gpu_steps` the most work, under `completion` the least."""
    work = gpus * duration
    return -priority, -work if value_model == GPU_STEPS else work
