"""Corrections of a group and of a model on top of their kind's: shrinkage from pooled to own.

A group is a training variant or a quantization algorithm on a GPU type; a model is the
architecture a job trains or quantizes (`designs.architecture`). A group's duration is its kind's
plus its mean residual under the kind's correction as it stands (`Offset`); its memory and a
model's add small ridge regressions (`designs.group_memory_row`) fitted to what the levels above
left over, each used once its out-of-sample errors show it helps (`Refinement`). The penalty
shrinks each towards zero, so a group or model with few completions is forecast as the level
above and one with a few dozen by its own. A group also keeps its errors:
its intervals and memory margins once they hold `MIN_ERRORS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpualloc.forecasting.ridge import MIN_ERRORS, ErrorWindow, OnlineRidge

PENALTY = 4.0  # completions' worth of pull towards the level above
GROUP_ERRORS = 100  # errors a group keeps
MODELS = 256  # models a kind keeps corrections for (the least recently taught is dropped first)


@dataclass
class Offset:
    """A level's mean residual under its kind's correction as it is now: the sums of its
    examples' targets and design rows, so it is exact whatever the order they came in (a residual
    taken against the kind's correction at the time would keep what the kind learned later)."""

    count: int = 0
    sum_y: float = 0.0
    sum_x: list[float] = field(default_factory=list)

    def learn(self, x: np.ndarray, y: float) -> None:
        self.count += 1
        self.sum_y += float(y)
        row = [float(v) for v in x]
        self.sum_x = row if not self.sum_x else [a + b for a, b in zip(self.sum_x, row)]

    def value(self, kind: OnlineRidge) -> float:
        """The mean of (target - the kind's forecast), shrunk by PENALTY examples of zero."""
        if not self.count:
            return 0.0
        return (self.sum_y - kind.predict(np.array(self.sum_x))) / (self.count + PENALTY)

    def dump(self) -> dict[str, Any]:
        return {"count": self.count, "sum_y": self.sum_y, "sum_x": self.sum_x}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "Offset":
        return cls(int(data["count"]), float(data["sum_y"]), [float(v) for v in data["sum_x"]])


@dataclass
class Refinement:
    """A level's memory correction (GB a GPU, on `designs.group_memory_row`) and whether it has
    earned its place: `gain` sums, over the level's completions and before each was learned, the
    squared log error of the forecast without it less that with it. It is used while that is
    positive, so a level whose few examples would mislead more than inform is left out."""

    ridge: OnlineRidge
    gain: float = 0.0

    @classmethod
    def fresh(cls, dims: int) -> "Refinement":
        return cls(OnlineRidge(dims, PENALTY, relative=True))

    def value(self, row: np.ndarray) -> float:
        return self.ridge.predict(row) if self.gain > 0 else 0.0

    def dump(self) -> dict[str, Any]:
        return {**self.ridge.dump(), "gain": self.gain}

    @classmethod
    def load(cls, data: dict[str, Any], dims: int | None = None) -> "Refinement":
        return cls(OnlineRidge.load(data, PENALTY, relative=True, dims=dims), float(data.get("gain", 0.0)))


@dataclass
class GroupModel:
    memory: Refinement
    duration: Offset = field(default_factory=Offset)  # log steps
    errors: ErrorWindow = field(default_factory=lambda: ErrorWindow(GROUP_ERRORS))  # log duration
    memory_errors: ErrorWindow = field(default_factory=lambda: ErrorWindow(GROUP_ERRORS))  # log peak

    @classmethod
    def fresh(cls, memory_dims: int) -> "GroupModel":
        return cls(Refinement.fresh(memory_dims))

    def dump(self) -> dict[str, Any]:
        return {
            "memory": self.memory.dump(),
            "duration": self.duration.dump(),
            "errors": self.errors.errors,
            "memory_errors": self.memory_errors.errors,
        }

    @classmethod
    def load(cls, data: dict[str, Any], memory_dims: int | None = None) -> "GroupModel":
        """From `dump`; memory terms added since it was made start untaught."""
        return cls(
            Refinement.load(data["memory"], memory_dims),
            Offset.load(data["duration"]),
            ErrorWindow(GROUP_ERRORS, list(data["errors"])),
            ErrorWindow(GROUP_ERRORS, list(data["memory_errors"])),
        )


def errors_of(group: GroupModel | None, pooled: ErrorWindow, memory: bool = False) -> ErrorWindow:
    """The group's own errors once it has enough, else its kind's."""
    own = None if group is None else (group.memory_errors if memory else group.errors)
    return own if own is not None and len(own.errors) >= MIN_ERRORS else pooled


def taught(models: dict[str, Refinement], key: str, dims: int) -> Refinement:
    """A model's memory correction, made the most recently taught (the oldest dropped past MODELS)."""
    level = models.pop(key, None) or Refinement.fresh(dims)
    models[key] = level
    while len(models) > MODELS:
        del models[next(iter(models))]
    return level
