"""The forecasters, cold, against published measured points (benchmarks/measured/points.json,
docs/measured-points.md): what a pool with no completions yet would forecast for named
fine-tuning and quantization configurations, beside what their authors measured.

A generator's truth is only as real as its author's model; these points are real runs. The check
asks what matters to a plan: that the memory forecast at the published GPU count is not below the
published peak (a forecast under it starts a job that runs out of memory), how far above it is (GPUs
held for nothing), that a configuration published as running out of memory is given more GPUs, and
how far the time forecast is from a published quantization time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from gpualloc.benchmarks import DATA_DIR
from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.job_forecast import Hardware, SizeError
from gpualloc.forecasting.physics_v1 import GPU_MEMORY_GB
from gpualloc.schemas.features import QuantizationFeatures, TrainingFeatures

POINTS_FILE = DATA_DIR / "measured" / "points.json"
POOL_GPUS = 1024  # the pool a point's job is sized in: its share cap leaves any of them room


class Point(BaseModel):
    """One published measurement and the configuration it was measured on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    source: str
    url: str
    measure: Literal["peak_gb", "fits", "oom", "hours"]  # GB a GPU; fits / runs out of memory in `value` GB; hours
    value: float
    gpus: int
    gpu_type: str
    kind: Literal["training", "quantization"]
    features: dict[str, Any]
    assumed: dict[str, str]  # feature fields the source does not state: the value taken, and why
    unmodelled: str | None = None  # what the run relied on that the features and the physics cannot say


@dataclass(frozen=True)
class Checked:
    point: Point
    forecast: float  # GB a GPU at the published count, or hours
    gpus: int | None  # the count the cold forecaster chooses on the point's GPU type; None: it refuses the job

    @property
    def ratio(self) -> float | None:
        """Forecast over published, for the measures that publish a figure."""
        return self.forecast / self.point.value if self.point.measure in ("peak_gb", "hours") else None

    @property
    def covered(self) -> bool:
        """The forecast is at or above what was published: a published peak at or under it, a
        configuration that ran out of memory refused or given more GPUs, one that fitted given
        at most its GPUs."""
        p = self.point
        if p.measure == "peak_gb":
            return self.forecast >= p.value
        if p.measure == "oom":
            return self.gpus is None or self.gpus > p.gpus
        if p.measure == "fits":
            return self.gpus is not None and self.gpus <= p.gpus
        return True

    @property
    def verdict(self) -> str:
        p = self.point
        count = "refused" if self.gpus is None else f"{self.gpus} GPUs"
        if p.measure == "oom":
            return f"{count}: " + ("not started where it ran out" if self.covered else "STARTED WHERE IT RAN OUT")
        if p.measure == "fits":
            return f"{count}" + ("" if self.covered else f", where it ran on {p.gpus}")
        return f"x{self.ratio:.2f}; {count}" + ("" if self.gpus == p.gpus else f" (published on {p.gpus})")


def load_points() -> list[Point]:
    return [Point.model_validate(p) for p in json.loads(POINTS_FILE.read_text(encoding="utf-8"))["points"]]


def check(point: Point) -> Checked:
    """The cold forecast of `point`'s configuration on its GPU type: memory (or hours) at the
    published count, and the count it would choose."""
    features = (TrainingFeatures if point.kind == "training" else QuantizationFeatures).model_validate(point.features)
    hw = Hardware(point.gpu_type, GPU_MEMORY_GB[point.gpu_type], POOL_GPUS, step_minutes=1, nominal=True)
    forecasters = Forecasters()
    try:
        chosen: int | None = forecasters.size(point.kind, features, hw, None, None).gpus
    except SizeError:
        chosen = None
    at_published = forecasters.size(point.kind, features, hw, point.gpus, None)
    value = at_published.median / 60.0 if point.measure == "hours" else at_published.peak_memory_gb
    return Checked(point, value, chosen)


def check_all() -> list[Checked]:
    return [check(p) for p in load_points()]


def table(checked: list[Checked]) -> str:
    head = f"  {'point':<36} {'measure':<8} {'published':>9} {'GPUs':>4} {'forecast':>8}  verdict"
    out = ["published measured points (cold forecasts; docs/measured-points.md)", head]
    for c in checked:
        p = c.point
        out.append(f"  {p.id:<36} {p.measure:<8} {p.value:>9.2f} {p.gpus:>4} {c.forecast:>8.2f}  {c.verdict}")
    under = [c.point.id for c in checked if not c.covered]
    out.append("  forecasts under the published figure: " + (", ".join(under) or "none"))
    return "\n".join(out)


def as_dicts(checked: list[Checked]) -> list[dict[str, Any]]:
    return [
        {
            "id": c.point.id,
            "measure": c.point.measure,
            "published": c.point.value,
            "published_gpus": c.point.gpus,
            "forecast": c.forecast,
            "ratio": c.ratio,
            "gpus": c.gpus,
            "covered": c.covered,
        }
        for c in checked
    ]
