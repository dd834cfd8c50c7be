"""What a job's forecast is asked on, answers with or refuses by: the values the planner and the agent share."""

from __future__ import annotations

from dataclasses import dataclass

from gpualloc.schemas.features import Interconnect


@dataclass(frozen=True)
class Hardware:
    """What a job runs on: the GPU type and its memory, and the pool it is planned in. `nominal`:
    the memory is the type's name's (neither the job nor the pool gave it), so a physics that
    knows what a framework can use of that type takes that instead."""

    gpu_type: str
    memory_gb: float
    max_gpus: int
    step_minutes: int
    nominal: bool = False
    pool_gpus: int | None = None  # the pool's GPUs where apps' floors (`floors`) leave it `max_gpus`
    floors: tuple[tuple[str, int], ...] = ()
    interconnect: Interconnect | None = None  # the pool's links within a node (None: NVLink where the type has it)

    def room(self) -> str:
        """The GPUs a job may be given, in words: the pool's, or those its apps' floors leave
        (a refusal names both, else its count reads as the pool's size)."""
        if not self.floors:
            return f"the pool's {self.max_gpus} GPUs"
        kept = ", ".join(f"{app}: {n}" for app, n in self.floors)
        return f"the {self.max_gpus} GPUs left of the pool's {self.pool_gpus} once app floors ({kept}) are kept"


@dataclass(frozen=True)
class JobForecast:
    gpus: int
    duration: int  # pool steps to plan with: the kind's quantile, rounded up
    median: float  # pool steps
    low: float  # the interval's ends, pool steps
    high: float
    coverage: float  # of [low, high]
    quantile: float  # of `duration`
    forecast: tuple[str, ...]  # the values forecast ("gpus", "duration"); the rest were given
    peak_memory_gb: float  # forecast a GPU at `gpus`


class SizeError(ValueError):
    """A job no count of the pool's GPUs holds: the message names the feature and the rule."""
