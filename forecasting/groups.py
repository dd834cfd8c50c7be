"""Corrections of a group and of a model on top of their kind's: shrinkage from pooled to own.

A group is a training variant or a quantization algorithm on a GPU type; a model is the
architecture a job trains or quantizes (`designs.architecture`). Each has small ridge regressions
(`designs.group_duration_row`, `designs.group_memory_row`) fitted to what the levels above it
left over, each example's residual taken before those levels learned from it. The penalty
shrinks them to zero, so a group or model with few completions is forecast as the level above
and one with a few dozen by its own law. A group also keeps its errors: its intervals and memory
margins once they hold `MIN_ERRORS`.
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
class Residual:
    """What a level adds to the forecasts of the levels above it."""

    duration: OnlineRidge  # log steps
    memory: OnlineRidge  # GB a GPU

    @classmethod
    def fresh(cls, duration_dims: int, memory_dims: int) -> "Residual":
        return cls(OnlineRidge(duration_dims, PENALTY), OnlineRidge(memory_dims, PENALTY))

    def dump(self) -> dict[str, Any]:
        return {"duration": self.duration.dump(), "memory": self.memory.dump()}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "Residual":
        return cls(OnlineRidge.load(data["duration"], PENALTY), OnlineRidge.load(data["memory"], PENALTY))


@dataclass
class GroupModel:
    residual: Residual
    errors: ErrorWindow = field(default_factory=lambda: ErrorWindow(GROUP_ERRORS))  # log duration
    memory_errors: ErrorWindow = field(default_factory=lambda: ErrorWindow(GROUP_ERRORS))  # log peak

    def dump(self) -> dict[str, Any]:
        return {**self.residual.dump(), "errors": self.errors.errors, "memory_errors": self.memory_errors.errors}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "GroupModel":
        return cls(
            Residual.load(data),
            ErrorWindow(GROUP_ERRORS, list(data["errors"])),
            ErrorWindow(GROUP_ERRORS, list(data["memory_errors"])),
        )


def errors_of(group: GroupModel | None, pooled: ErrorWindow, memory: bool = False) -> ErrorWindow:
    """The group's own errors once it has enough, else its kind's."""
    own = None if group is None else (group.memory_errors if memory else group.errors)
    return own if own is not None and len(own.errors) >= MIN_ERRORS else pooled


def taught(models: dict[str, Residual], key: str, fresh: Residual) -> Residual:
    """The model's corrections, made the most recently taught (the oldest dropped past MODELS)."""
    residual = models.pop(key, None) or fresh
    models[key] = residual
    while len(models) > MODELS:
        del models[next(iter(models))]
    return residual


def predict(residual: Residual | None, duration_row: np.ndarray, memory_row: np.ndarray) -> tuple[float, float]:
    """(log steps, GB) a level adds; nothing for a level that has not learned."""
    if residual is None:
        return 0.0, 0.0
    return residual.duration.predict(duration_row), residual.memory.predict(memory_row)
