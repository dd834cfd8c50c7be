"""Corrections of a group and of a model on top of their kind's: shrinkage from pooled to own.

A group is a training variant or a quantization algorithm on a GPU type; a model is the
architecture a job trains or quantizes (`designs.architecture`). A group's duration is its kind's
plus its mean residual under the kind's correction as it stands (`Offset`); its memory and a
model's add small ridge regressions (`designs.group_memory_row`) fitted to what the levels above
left over. The penalty shrinks each towards zero, so a group or model with few completions is
forecast as the level above and one with a few dozen by its own. A group also keeps its errors:
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
class GroupModel:
    memory: OnlineRidge  # GB a GPU, on `designs.group_memory_row`
    duration: Offset = field(default_factory=Offset)  # log steps
    errors: ErrorWindow = field(default_factory=lambda: ErrorWindow(GROUP_ERRORS))  # log duration
    memory_errors: ErrorWindow = field(default_factory=lambda: ErrorWindow(GROUP_ERRORS))  # log peak

    @classmethod
    def fresh(cls, memory_dims: int) -> "GroupModel":
        return cls(OnlineRidge(memory_dims, PENALTY, relative=True))

    def dump(self) -> dict[str, Any]:
        return {
            "memory": self.memory.dump(),
            "duration": self.duration.dump(),
            "errors": self.errors.errors,
            "memory_errors": self.memory_errors.errors,
        }

    @classmethod
    def load(cls, data: dict[str, Any]) -> "GroupModel":
        return cls(
            OnlineRidge.load(data["memory"], PENALTY, relative=True),
            Offset.load(data["duration"]),
            ErrorWindow(GROUP_ERRORS, list(data["errors"])),
            ErrorWindow(GROUP_ERRORS, list(data["memory_errors"])),
        )


def errors_of(group: GroupModel | None, pooled: ErrorWindow, memory: bool = False) -> ErrorWindow:
    """The group's own errors once it has enough, else its kind's."""
    own = None if group is None else (group.memory_errors if memory else group.errors)
    return own if own is not None and len(own.errors) >= MIN_ERRORS else pooled


def taught(models: dict[str, OnlineRidge], key: str, dims: int) -> OnlineRidge:
    """A model's memory correction, made the most recently taught (the oldest dropped past MODELS)."""
    ridge = models.pop(key, None) or OnlineRidge(dims, PENALTY, relative=True)
    models[key] = ridge
    while len(models) > MODELS:
        del models[next(iter(models))]
    return ridge
