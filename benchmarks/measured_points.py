"""The forecasters, cold, against published measured figures (benchmarks/measured/points.json,
docs/measured-points.md): what a pool with no completions yet would forecast for named fine-tuning
and quantization configurations, beside what their authors measured. The points are a check set,
never fitted to: the physics' constants come from the project's own real runs and documented
implementation facts.

A published memory figure is converted to the contract's peak (reserved memory and the CUDA
context, GiB) by what it measures (`contract_peak_gib`); then three figures, as a plan is hurt by
them: the median forecast's error, the share of points whose sized need (the forecast raised to the
margin a count is chosen with) is more than 10% under the peak (a job started where it runs out)
and more than 25% over it (GPUs held for nothing), by one GPU and sharded; a configuration that ran
refused or given more than twice its GPUs, one that ran out of memory started there; and each
time (a quantization's hours, a training run's published throughput) within a factor of two.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from gpualloc.benchmarks import DATA_DIR
from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.hardware import GIB
from gpualloc.forecasting.job_forecast import Hardware, SizeError
from gpualloc.forecasting.physics import MEASURED
from gpualloc.forecasting.physics_v1 import GPU_MEMORY_GB
from gpualloc.schemas.features import QuantizationFeatures, TrainingFeatures
from gpualloc.schemas.settings import ForecastSettings

POINTS_FILE = DATA_DIR / "measured" / "points.json"
POOL_GPUS = 1024  # the pool a point's job is sized in: its share cap leaves any of them room
# reserved over allocated memory at the peak: the median of the real runs of benchmarks/real (98 runs,
# 1.01-1.32); an allocated figure is raised by it, then the CUDA context added, as a reserved one
RESERVED_OVER_ALLOCATED = 1.10
UNDER, OVER = 0.10, 0.25  # sized need more than 10% under the peak; more than 25% over it
TIME_FACTOR = 2.0  # a quantization time forecast within this factor of the published one


class Point(BaseModel):
    """One published measurement and the configuration it was measured on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    source: str
    url: str
    quote: str | None = None  # the row or sentence the figure comes from, as published
    measure: Literal["peak_gb", "fits", "oom", "hours"]  # memory a GPU; fits / runs out of memory in `value` GB; hours
    value: float
    unit: Literal["GB", "GiB", "hours"] = "GB"  # GB: 1e9 bytes
    # what a memory figure measures: torch's max_memory_allocated, max_memory_reserved, nvidia-smi's
    # process memory, or not said; "wall" for a time
    measured_as: Literal["allocated", "reserved", "nvidia_smi", "unspecified", "wall"] = "unspecified"
    gpus: int
    gpu_type: str
    kind: Literal["training", "quantization"]
    features: dict[str, Any]
    assumed: dict[str, str]  # feature fields the source does not state: the value taken, and why
    unmodelled: str | None = None  # what the run relied on that the features and the physics cannot say
    authority: Literal["primary", "report"] = "primary"  # a tool's own documents or paper; an issue or model card
    # a training run's published throughput beside its memory: tokens a second over all its GPUs
    # (torchtune's "Tokens/sec", over an epoch)
    tokens_per_s: float | None = None


def contract_peak_gib(p: Point) -> float:
    """A published memory figure as the contract's peak, GiB: an allocated peak raised to reserved
    by `RESERVED_OVER_ALLOCATED`, a reserved one as it is, each with the CUDA context added;
    nvidia-smi's figure (which holds both) and a figure that does not say what it measures, as they are."""
    gib = p.value * (1e9 / GIB if p.unit == "GB" else 1.0)
    if p.measured_as == "allocated":
        return gib * RESERVED_OVER_ALLOCATED + MEASURED.context_gib
    if p.measured_as == "reserved":
        return gib + MEASURED.context_gib
    return gib


@dataclass(frozen=True)
class Checked:
    point: Point
    forecast: float  # the median forecast: GiB a GPU at the published count, or hours
    need: float  # the need the count is sized by at the published count (GiB), or hours
    gpus: int | None  # the count the cold forecaster chooses on the point's GPU type; None: it refuses the job
    tokens_per_s: float | None = None  # forecast throughput at the published count, where one is published

    @property
    def truth(self) -> float:
        """The published figure as the contract's peak (GiB), or hours."""
        return contract_peak_gib(self.point) if self.point.measure == "peak_gb" else self.point.value

    @property
    def ratio(self) -> float | None:
        """Median forecast over published, for the measures that publish a figure."""
        return self.forecast / self.truth if self.point.measure in ("peak_gb", "hours") else None

    @property
    def need_ratio(self) -> float | None:
        return self.need / self.truth if self.point.measure == "peak_gb" else None

    @property
    def rate_ratio(self) -> float | None:
        """Forecast throughput over published."""
        published = self.point.tokens_per_s
        return None if published is None or self.tokens_per_s is None else self.tokens_per_s / published

    @property
    def sharded(self) -> bool:
        return self.point.gpus > 1

    @property
    def covered(self) -> bool:
        """The sized need is at or above what was published: a published peak at or under it, a
        configuration that ran out of memory refused or given more GPUs, one that fitted given
        at most its GPUs."""
        p = self.point
        if p.measure == "peak_gb":
            return self.need >= self.truth
        if p.measure == "oom":
            return self.gpus is None or self.gpus > p.gpus
        if p.measure == "fits":
            return self.gpus is not None and self.gpus <= p.gpus
        return True

    @property
    def ran_but_refused_or_doubled(self) -> bool:
        """A configuration that ran (a peak, fits, a time) refused, or given more than twice its GPUs."""
        if self.point.measure == "oom":
            return False
        return self.gpus is None or self.gpus > 2 * self.point.gpus

    @property
    def verdict(self) -> str:
        p = self.point
        count = "refused" if self.gpus is None else f"{self.gpus} GPUs"
        if p.measure == "oom":
            return f"{count}: " + ("not started where it ran out" if self.covered else "STARTED WHERE IT RAN OUT")
        if p.measure == "fits":
            return f"{count}" + ("" if self.covered else f", where it ran on {p.gpus}")
        need = f", need x{self.need_ratio:.2f}" if self.need_ratio is not None else ""
        return f"x{self.ratio:.2f}{need}; {count}" + ("" if self.gpus == p.gpus else f" (published on {p.gpus})")


def load_points() -> list[Point]:
    return [Point.model_validate(p) for p in json.loads(POINTS_FILE.read_text(encoding="utf-8"))["points"]]


def check(point: Point, settings: ForecastSettings | None = None) -> Checked:
    """The cold forecast of `point`'s configuration on its GPU type: memory (or hours) at the
    published count, and the count it would choose."""
    features = (TrainingFeatures if point.kind == "training" else QuantizationFeatures).model_validate(point.features)
    hw = Hardware(point.gpu_type, GPU_MEMORY_GB[point.gpu_type], POOL_GPUS, step_minutes=1, nominal=True)
    forecasters = Forecasters(settings or ForecastSettings())
    try:
        chosen: int | None = forecasters.size(point.kind, features, hw, None, None).gpus
    except SizeError:
        chosen = None
    at_published = forecasters.size(point.kind, features, hw, point.gpus, None)
    if point.measure == "hours":
        hours = at_published.median / 60.0
        return Checked(point, hours, hours, chosen)
    median = forecasters.jobs.median_peak(point.kind, features, point.gpu_type, point.gpus)
    rate = None
    if point.tokens_per_s is not None and isinstance(features, TrainingFeatures):
        tokens = features.dataset_tokens_m * 1e6 * features.epochs * (2 if features.variant == "dpo" else 1)
        rate = tokens / (at_published.median * 60.0)  # the pool's steps are a minute
    return Checked(point, median, at_published.peak_memory_gb, chosen, rate)


def check_all(settings: ForecastSettings | None = None) -> list[Checked]:
    return [check(p, settings) for p in load_points()]


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def figures(checked: list[Checked]) -> dict[str, Any]:
    """The check set's figures for a set of points: memory (median forecast's error, sized need
    under and over), counts, times."""
    peaks = [c for c in checked if c.point.measure == "peak_gb"]
    errors = [max(r, 1 / r) - 1 for c in peaks if (r := c.ratio) is not None]
    needs = [r for c in peaks if (r := c.need_ratio) is not None]
    times = [r for c in checked if c.point.measure == "hours" and (r := c.ratio) is not None]
    times += [r for c in checked if (r := c.rate_ratio) is not None]
    return {
        "points": len(checked),
        "peaks": len(peaks),
        "memory_median_error": statistics.median(errors) if errors else None,
        "need_under_10": _share([r < 1 - UNDER for r in needs]),
        "need_over_25": _share([r > 1 + OVER for r in needs]),
        "ran_refused_or_doubled": [c.point.id for c in checked if c.ran_but_refused_or_doubled],
        "oom_started": [c.point.id for c in checked if c.point.measure == "oom" and not c.covered],
        "times": len(times),  # quantization hours and training throughputs
        "times_within_2x": sum(1 / TIME_FACTOR <= r <= TIME_FACTOR for r in times),
        "time_median_error": statistics.median(max(r, 1 / r) - 1 for r in times) if times else None,
    }


GROUPS = {
    "training, one GPU": lambda c: c.point.kind == "training" and not c.sharded,
    "training, sharded": lambda c: c.point.kind == "training" and c.sharded,
    "quantization": lambda c: c.point.kind == "quantization",
}


def summary(checked: list[Checked]) -> dict[str, dict[str, Any]]:
    """`figures` by group, and of the points whose run the features describe (no `unmodelled`)."""
    out = {name: figures([c for c in checked if rule(c)]) for name, rule in GROUPS.items()}
    out["modelled, all"] = figures([c for c in checked if c.point.unmodelled is None])
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def table(checked: list[Checked]) -> str:
    head = f"  {'point':<52} {'measure':<8} {'published':>9} {'as GiB':>7} {'GPUs':>4} {'forecast':>8}  verdict"
    out = ["published measured points (cold forecasts; docs/measured-points.md)", head]
    for c in checked:
        p = c.point
        out.append(
            f"  {p.id:<52} {p.measure:<8} {p.value:>9.2f} {c.truth:>7.2f} {p.gpus:>4} {c.forecast:>8.2f}  {c.verdict}"
        )
    out.append(
        f"  {'group':<22} {'points':>6} {'peaks':>5} {'mem err':>7} {'<-10%':>6} {'>+25%':>6} {'ran, refused/>2x':>16} "
        f"{'oom started':>11} {'times in 2x':>11} {'time err':>8}"
    )
    for name, f in summary(checked).items():
        out.append(
            f"  {name:<22} {f['points']:>6} {f['peaks']:>5} {_pct(f['memory_median_error']):>7} "
            f"{_pct(f['need_under_10']):>6} {_pct(f['need_over_25']):>6} {len(f['ran_refused_or_doubled']):>16} "
            f"{len(f['oom_started']):>11} {f['times_within_2x']:>5}/{f['times']:<5} {_pct(f['time_median_error']):>8}"
        )
    under = [c.point.id for c in checked if not c.covered]
    out.append("  sized under the published figure: " + (", ".join(under) or "none"))
    return "\n".join(out)


def as_dicts(checked: list[Checked]) -> list[dict[str, Any]]:
    return [
        {
            "id": c.point.id,
            "measure": c.point.measure,
            "published": c.point.value,
            "contract_peak_gib": c.truth if c.point.measure == "peak_gb" else None,
            "published_gpus": c.point.gpus,
            "forecast": c.forecast,
            "need": c.need,
            "ratio": c.ratio,
            "gpus": c.gpus,
            "covered": c.covered,
        }
        for c in checked
    ]
