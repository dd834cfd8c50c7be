"""A kind's learned corrections, as they start and as a snapshot stores them: the state a job forecaster teaches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpualloc.forecasting.designs import BASELINES, PROBES, Baseline, group_memory_row, memory_row
from gpualloc.forecasting.groups import GroupModel, Refinement
from gpualloc.forecasting.ridge import ErrorWindow, OnlineRidge
from gpualloc.schemas.features import GPU_TYPES, Features

PARTS_PENALTY = 8.0  # completions' worth of pull of the parts' correction towards the physics as it is


def parts_row(base: Baseline[Any], f: Features, gpus: int) -> np.ndarray:
    return np.array(list((base.components or base.parts)(f, gpus).values()))


@dataclass
class KindModel:
    """One kind's pooled corrections, their errors, its groups and its interval's shift. Memory
    has two pooled corrections: `memory`, on the design row (`designs.memory_row`), for a physics
    whose accounting leaves things out; `parts`, each part of the accounting scaled on its own (a
    completion corrects the part it shows wrong, and what one model teaches carries to another in
    proportion to what it holds of that part), for one that accounts for what the runtime holds
    (`Baseline.by_parts`)."""

    memory: OnlineRidge
    duration: OnlineRidge
    errors: ErrorWindow = field(default_factory=ErrorWindow)  # log duration, out of sample
    memory_errors: ErrorWindow = field(default_factory=ErrorWindow)  # log peak (its prior: the physics')
    groups: dict[str, GroupModel] = field(default_factory=dict)
    architectures: dict[str, Refinement] = field(default_factory=dict)  # memory; the most recently taught last
    shift: float = 0.0  # of the interval's tails: up while completions fall outside more than they should
    parts: OnlineRidge = field(default_factory=lambda: OnlineRidge(0))

    def dump(self) -> dict[str, Any]:
        return {
            "parts": self.parts.dump(),
            "memory": self.memory.dump(),
            "duration": self.duration.dump(),
            "errors": self.errors.errors,
            "memory_errors": self.memory_errors.errors,
            "groups": {key: g.dump() for key, g in self.groups.items()},
            "architectures": [[key, r.dump()] for key, r in self.architectures.items()],
            "shift": self.shift,
        }

    @classmethod
    def load(cls, data: dict[str, Any], kind: str) -> "KindModel":
        """From `dump`; terms added since it was made start untaught."""
        level_dims = len(group_memory_row(kind, PROBES[kind], 1))
        parts = data.get("parts")
        return cls(
            OnlineRidge.load(data["memory"], dims=len(memory_row(kind, PROBES[kind], GPU_TYPES[0], 1, 1.0))),
            OnlineRidge.load(data["duration"]),
            ErrorWindow(errors=list(data["errors"])),
            ErrorWindow(errors=list(data.get("memory_errors", []))),
            {key: GroupModel.load(g, level_dims) for key, g in data.get("groups", {}).items()},
            {key: Refinement.load(r, level_dims) for key, r in data.get("architectures", [])},
            float(data.get("shift", 0.0)),
            _fresh_parts(kind) if parts is None else OnlineRidge.load(parts, PARTS_PENALTY, relative=True),
        )


def _fresh_parts(kind: str) -> OnlineRidge:
    return OnlineRidge(len(parts_row(BASELINES[kind], PROBES[kind], 1)), PARTS_PENALTY, relative=True)


def fresh_model(kind: str) -> KindModel:
    probe = BASELINES[kind].design(PROBES[kind], GPU_TYPES[0], 1, 1.0, 1.0)
    memory = OnlineRidge(len(memory_row(kind, PROBES[kind], GPU_TYPES[0], 1, 1.0)))
    return KindModel(memory, OnlineRidge(len(probe)), parts=_fresh_parts(kind))


def group_key(f: Features, gpu_type: str) -> str:
    """A job's group: its variant (training) or algorithm (quantization) on its GPU type."""
    return f"{getattr(f, 'variant', None) or getattr(f, 'algorithm')}/{gpu_type}"
