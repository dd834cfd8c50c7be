"""GPU counts and durations of training and quantization jobs from their features: the physics
baseline (`physics`, `quantization`) times a correction learned online from what finished jobs
really used, with a prediction interval from the correction's recent out-of-sample errors.

Two corrections a kind, both ridge regressions on log features (`ridge.OnlineRidge`):
- memory: the GB a GPU a job's reported peak exceeds the baseline's (over its headroom) by, on
  the design row and the row scaled by the baseline's GB, so both fixed overheads a GPU (the
  runtime's context, communication buffers) and proportional ones (allocator fragmentation) are
  learnable; the GPU count is the smallest power of two at which the corrected peak fits the GPU.
  Before it learns anything, the baseline's own headroom stands in for what it misses;
- duration: log of the hours a job ran over the baseline's hours at its GPU count.
A forecast's duration quantiles are the correction's point forecast plus the quantiles of its
last errors (`ridge.ErrorWindow`). Everything is a deterministic function of what was learned, in
the order it was learned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar, cast

import numpy as np

from gpualloc.forecasting import physics, quantization
from gpualloc.forecasting.ridge import ErrorWindow, OnlineRidge
from gpualloc.schemas.features import (
    GPU_TYPES,
    OPTIMIZERS,
    PRECISIONS,
    QUANT_ALGORITHMS,
    TRAINING_VARIANTS,
    QuantizationFeatures,
    TrainingFeatures,
)
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.settings import ForecastSettings

Features = TrainingFeatures | QuantizationFeatures
F = TypeVar("F", TrainingFeatures, QuantizationFeatures)  # a baseline's own kind of features


@dataclass(frozen=True)
class Hardware:
    """What a job runs on: the GPU type and its memory, and the pool it is planned in."""

    gpu_type: str
    memory_gb: float
    max_gpus: int
    step_minutes: int


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


@dataclass(frozen=True)
class Baseline(Generic[F]):
    """A kind's physics: memory a GPU and hours at a count, the fewest GPUs, and the design row."""

    memory: Callable[[F, int], float]
    parts: Callable[[F, int], dict[str, float]]  # the same by what holds it
    hours: Callable[[F, str, int], float]
    smallest: Callable[[F], int]
    design: Callable[[F, str, int, float, float], list[float]]


def _one_hot(value: str, choices: tuple[str, ...]) -> list[float]:
    return [1.0 if value == c else 0.0 for c in choices]


def _common(gpu_type: str, gpus: int, hours: float, memory: float) -> list[float]:
    """Terms every design shares: the hardware, the count, and the baseline's own answers (so a
    correction can grow or shrink with them: fixed overheads weigh most on small jobs)."""
    return [
        1.0,
        math.log2(gpus),
        math.log(hours),
        1.0 / (1.0 + hours),
        math.log1p(memory),
        1.0 / (1.0 + memory),
        *_one_hot(gpu_type, GPU_TYPES),
    ]


def _training_design(f: TrainingFeatures, gpu_type: str, gpus: int, hours: float, memory: float) -> list[float]:
    return [
        *_common(gpu_type, gpus, hours, memory),
        math.log(f.params_b),
        math.log(f.params_b) ** 2,
        math.log(f.micro_batch) ** 2,
        math.log2(gpus) ** 2,
        math.log((f.active_params_b or f.params_b) / f.params_b),
        math.log(f.layers),
        math.log(f.hidden_size),
        math.log(f.seq_len),
        math.log(f.dataset_tokens_m * f.epochs),
        math.log(f.global_batch),
        math.log(f.micro_batch),
        math.log(f.lora_rank or 1),
        float(f.gradient_checkpointing),
        f.zero_stage / 3,
        math.log2(f.tensor_parallel),
        math.log2(f.pipeline_parallel),
        float(f.flash_attention),
        float(f.reference_model),
        *_one_hot(f.variant, TRAINING_VARIANTS),
        *_one_hot(f.precision, PRECISIONS),
        *_one_hot(f.optimizer, OPTIMIZERS),
    ]


def _quantization_design(f: QuantizationFeatures, gpu_type: str, gpus: int, hours: float, memory: float) -> list[float]:
    return [
        *_common(gpu_type, gpus, hours, memory),
        math.log(f.params_b),
        math.log(f.bits),
        math.log1p(f.calibration_samples),
        math.log(f.seq_len),
        math.log(f.group_size or 1),
        *_one_hot(f.algorithm, QUANT_ALGORITHMS),
    ]


# Any: the kind picks the baseline, and the features are of that kind
BASELINES: dict[str, Baseline[Any]] = {
    "training": Baseline(
        physics.memory_per_gpu_gb,
        physics.memory_parts_gb,
        physics.training_hours,
        physics.smallest_count,
        _training_design,
    ),
    "quantization": Baseline(
        quantization.memory_per_gpu_gb,
        quantization.memory_parts_gb,
        quantization.quantization_hours,
        lambda f: 1,
        _quantization_design,
    ),
}


@dataclass
class KindModel:
    """One kind's two corrections and its duration errors."""

    memory: OnlineRidge
    duration: OnlineRidge
    errors: ErrorWindow = field(default_factory=ErrorWindow)

    def dump(self) -> dict[str, Any]:
        return {"memory": self.memory.dump(), "duration": self.duration.dump(), "errors": self.errors.errors}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "KindModel":
        return cls(
            OnlineRidge.load(data["memory"]),
            OnlineRidge.load(data["duration"]),
            ErrorWindow(errors=list(data["errors"])),
        )


def _fresh(kind: str) -> KindModel:
    probe = BASELINES[kind].design(_PROBES[kind], GPU_TYPES[0], 1, 1.0, 1.0)
    return KindModel(OnlineRidge(len(_memory_row(kind, _PROBES[kind], GPU_TYPES[0], 1, 1.0))), OnlineRidge(len(probe)))


MEMORY_SCALE = 50.0  # GB: keeps the proportional terms of the memory row near the others' magnitude


def _memory_row(kind: str, f: Features, gpu_type: str, gpus: int, accounted: float) -> np.ndarray:
    """What the memory correction is linear in: each part of the baseline's accounting (so a part
    it under- or over-counts is corrected in proportion), fixed GB (the runtime's, by GPU type;
    buffers once there are peers) and GB by variant or algorithm (each holds memory its own way)."""
    group = (
        _one_hot(cast(TrainingFeatures, f).variant, TRAINING_VARIANTS)
        if kind == "training"
        else _one_hot(cast(QuantizationFeatures, f).algorithm, QUANT_ALGORITHMS)
    )
    parts = [gb / MEMORY_SCALE for gb in BASELINES[kind].parts(f, gpus).values()]
    return np.array(
        [
            *parts,
            1.0,
            float(gpus > 1),
            *group,
            *(g * accounted / MEMORY_SCALE for g in group),
            *_one_hot(gpu_type, GPU_TYPES),
        ]
    )


_PROBES: dict[str, Features] = {
    "training": TrainingFeatures(
        variant="full",
        params_b=1,
        layers=1,
        hidden_size=64,
        seq_len=1,
        dataset_tokens_m=1,
        epochs=1,
        global_batch=1,
        micro_batch=1,
    ),
    "quantization": QuantizationFeatures(params_b=1, algorithm="awq", bits=4),
}


TOLERANCE = 0.15  # over a GPU's memory: a forecast peak this close may still fit (the forecast's error)
KNEE = 0.02  # of a GPU's memory: a doubling of the GPUs that lowers the forecast peak by less barely helps


OOM_PEAK = 1.05  # of a GPU's memory: the peak an out-of-memory failure is learned as
SANE = 1e4  # the largest magnitude a design value or target of a real job has (a 500 TB memory part)


def _sane(x: np.ndarray, y: float) -> bool:
    return bool(np.all(np.isfinite(x))) and math.isfinite(y) and float(np.max(np.abs(x))) <= SANE and abs(y) <= SANE


def _hours(base: Baseline[Any], f: Features, gpu_type: str, gpus: int) -> float:
    """The baseline's hours, at least a microsecond's worth (a log of them is taken)."""
    return max(base.hours(f, gpu_type, gpus), 1e-9)


def _choose(
    counts: list[int], peak: Callable[[int], float], baseline_fits: Callable[[int], bool], memory_gb: float
) -> int | None:
    """Of `counts` (ascending powers of two): the smallest whose forecast peak fits a GPU, else
    whose baseline fits (a correction learned from other jobs may overreach), else the smallest
    whose peak is within TOLERANCE of fitting, doubled while a doubling lowers the peak by at
    least KNEE of the GPU's memory. Past that knee the peak barely falls (what is left is not
    sharded), so more GPUs would not make the job fit, only keep them from others. None: no
    count comes within TOLERANCE."""
    for rule in (lambda n: peak(n) <= memory_gb, baseline_fits):
        n = next((n for n in counts if rule(n)), None)
        if n is not None:
            return n
    near = [i for i, n in enumerate(counts) if peak(n) <= memory_gb * (1 + TOLERANCE)]
    if not near:
        return None
    i = near[0]
    while i + 1 < len(counts) and peak(counts[i]) - peak(counts[i + 1]) >= KNEE * memory_gb:
        i += 1
    return counts[i]


class SizeError(ValueError):
    """A job no count of the pool's GPUs holds: the message names the feature and the rule."""


@dataclass
class JobForecaster:
    models: dict[str, KindModel] = field(default_factory=lambda: {kind: _fresh(kind) for kind in BASELINES})

    def forecast(
        self,
        kind: str,
        f: Features,
        hw: Hardware,
        quantile: float,
        coverage: float,
        gpus: int | None = None,
        duration: int | None = None,
        share: float = ForecastSettings().max_pool_share,
    ) -> JobForecast:
        """The job's GPUs (given, else forecast within `share` of the pool) and duration (given,
        else the `quantile`)."""
        model, base = self.models[kind], BASELINES[kind]
        n = gpus if gpus is not None else self._count(kind, f, hw, share)
        hours, memory = _hours(base, f, hw.gpu_type, n), base.memory(f, n)
        x = np.array(base.design(f, hw.gpu_type, n, hours, memory))
        centre = math.log(hours * 60.0 / hw.step_minutes) + model.duration.predict(x)

        def at(p: float) -> float:  # pool steps at quantile p
            return math.exp(centre + model.errors.quantile(p))

        tail = (1.0 - coverage) / 2
        planned = duration if duration is not None else min(LIMITS.duration, max(1, math.ceil(at(quantile) - 1e-9)))
        made = tuple(name for name, given in (("gpus", gpus), ("duration", duration)) if given is None)
        return JobForecast(
            n,
            planned,
            at(0.5),
            at(tail),
            at(1.0 - tail),
            coverage,
            quantile,
            made,
            self._peak(kind, f, hw.gpu_type, n, memory),
        )

    def learn(
        self, kind: str, f: Features, hw: Hardware, gpus: int, steps: int, peak_memory_gb: float | None = None
    ) -> None:
        """A finished job ran `steps` pool steps on `gpus` GPUs (peaking at `peak_memory_gb` a GPU).
        A job beyond anything a GPU holds (`_sane`) teaches nothing: one such example would
        outweigh every real one."""
        model, base = self.models[kind], BASELINES[kind]
        hours, memory = _hours(base, f, hw.gpu_type, gpus), base.memory(f, gpus)
        x = np.array(base.design(f, hw.gpu_type, gpus, hours, memory))
        y = math.log(steps * hw.step_minutes / 60.0 / hours)
        if _sane(x, y):
            model.errors.add(y - model.duration.predict(x))
            model.duration.learn(x, y)
        if peak_memory_gb is not None:
            accounted = memory / physics.HEADROOM
            row, target = _memory_row(kind, f, hw.gpu_type, gpus, accounted), peak_memory_gb - accounted
            if _sane(row, target):
                model.memory.learn(row, target)

    def learn_out_of_memory(self, kind: str, f: Features, hw: Hardware, gpus: int) -> None:
        """A job's peak at `gpus` GPUs passed the GPU's memory: learned as a peak of OOM_PEAK of
        it (a lower bound taken as the value, so the count it is sized at next time grows)."""
        model, memory = self.models[kind], BASELINES[kind].memory(f, gpus)
        accounted = memory / physics.HEADROOM
        row, target = _memory_row(kind, f, hw.gpu_type, gpus, accounted), OOM_PEAK * hw.memory_gb - accounted
        if _sane(row, target):
            model.memory.learn(row, target)

    def _peak(self, kind: str, f: Features, gpu_type: str, n: int, memory: float) -> float:
        """Forecast peak GB a GPU at `n` GPUs (the baseline over its headroom, corrected)."""
        accounted = memory / physics.HEADROOM
        return accounted + self.models[kind].memory.predict(_memory_row(kind, f, gpu_type, n, accounted))

    def _count(self, kind: str, f: Features, hw: Hardware, share: float) -> int:
        """`_choose` over the powers of two from the layout's floor to the pool's size; a count
        above `share` of the pool (the layout's floor always allowed) is refused, so no forecast
        gives one job the pool: a job that needs that much says so with `gpus`."""
        base, floor = BASELINES[kind], BASELINES[kind].smallest(f)
        if floor > hw.max_gpus:
            raise SizeError(
                f"features.tensor_parallel, features.pipeline_parallel: the layout needs {floor} GPUs, "
                f"the pool has {hw.max_gpus}"
            )
        cap = max(floor, 1 << int(math.log2(max(1.0, share * hw.max_gpus))))
        counts = [floor << i for i in range(int(math.log2(hw.max_gpus // floor)) + 1)]
        peaks: dict[int, float] = {}

        def peak(n: int) -> float:
            if n not in peaks:
                peaks[n] = self._peak(kind, f, hw.gpu_type, n, base.memory(f, n))
            return peaks[n]

        n = _choose(counts, peak, lambda n: base.memory(f, n) <= hw.memory_gb * physics.HEADROOM, hw.memory_gb)
        if n is None:
            least, at = min((peak(n), n) for n in counts)
            raise SizeError(
                f"features: no count of the pool's {hw.max_gpus} GPUs holds the job (it needs about "
                f"{least:.0f} GB a GPU at best, at {at}; a {hw.gpu_type} has {hw.memory_gb:g} GB)"
            )
        if n > cap:
            raise SizeError(
                f"features: the forecast sizes the job at {n} GPUs, more than forecast.max_pool_share "
                f"({share:g}) of the pool's {hw.max_gpus} allows ({cap}); give gpus to run it at a count "
                f"of your own"
            )
        return n

    def dump(self) -> dict[str, Any]:
        return {kind: model.dump() for kind, model in self.models.items()}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "JobForecaster":
        return cls({kind: KindModel.load(m) for kind, m in data.items()})
