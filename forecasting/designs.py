"""What the job corrections are linear in: each kind's physics baseline and its design rows.

The duration correction's row (`Baseline.design`) holds log features and the baseline's own
answers; the memory correction's (`memory_row`) holds the baseline's accounting part by part, so
a part it under- or over-counts is corrected in proportion. Group rows (`group_memory_row`) are the
few terms a group's or a model's own memory correction adds on top of its kind's (`groups`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar, cast

import numpy as np

from gpualloc.forecasting import physics, physics_v1, quantization, quantization_layers
from gpualloc.schemas.features import (
    GPU_TYPES,
    OPTIMIZERS,
    PRECISIONS,
    TRAINING_VARIANTS,
    Features,
    Interconnect,
    QuantizationFeatures,
    TrainingFeatures,
)

F = TypeVar("F", TrainingFeatures, QuantizationFeatures)
# the algorithms with a term of their own in the design rows; one the contract added later has none,
# so rows keep their length and learned models load (it is learned through its group instead)
DESIGN_ALGORITHMS = (
    "awq",
    "gptq",
    "smoothquant",
    "bnb_nf4",
    "bnb_int8",
    "fp8",
    "gguf_k",
)  # a baseline's own kind of features


@dataclass(frozen=True)
class Baseline(Generic[F]):
    """A kind's physics: memory a GPU and hours at a count, the fewest GPUs, and the design row;
    the share of a GPU its memory may fill (below 1 where the accounting leaves out what a runtime
    adds: slack standing in for a measured error), the log spread of its memory errors measured
    before any completion is seen, and how far over a GPU a forecast may be and still be tried."""

    memory: Callable[[F, int], float]
    parts: Callable[[F, int], dict[str, float]]  # the same by what holds it ("runtime" last, if any)
    hours: Callable[[F, str, int, Interconnect | None], float]  # on a GPU type, a count, the pool's links
    smallest: Callable[[F], int]
    design: Callable[[F, str, int, float, float], list[float]]
    headroom: float = 1.0
    prior: float = 0.0
    tolerance: float = 0.0
    by_parts: bool = False  # its pooled memory correction scales each part (`jobs.KindModel.parts`)
    components: Callable[[F, int], dict[str, float]] | None = None  # the parts that correction scales


def _without_links(hours: Callable[[F, str, int], float]) -> Callable[[F, str, int, Interconnect | None], float]:
    """The hours of a physics whose time does not depend on the links between GPUs."""
    return lambda f, gpu_type, gpus, interconnect: hours(f, gpu_type, gpus)


def one_hot(value: str, choices: tuple[str, ...]) -> list[float]:
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
        *one_hot(gpu_type, GPU_TYPES),
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
        *one_hot(f.variant, TRAINING_VARIANTS),
        *one_hot(f.precision, PRECISIONS),
        *one_hot(f.optimizer, OPTIMIZERS),
    ]


def _quantization_design(f: QuantizationFeatures, gpu_type: str, gpus: int, hours: float, memory: float) -> list[float]:
    return [
        *_common(gpu_type, gpus, hours, memory),
        math.log(f.params_b),
        math.log(f.bits),
        math.log1p(f.calibration_samples),
        math.log(f.seq_len),
        math.log(f.group_size or 1),
        *one_hot(f.algorithm, DESIGN_ALGORITHMS),
    ]


def _with_runtime(parts: Callable[[F, int], dict[str, float]]) -> Callable[[F, int], dict[str, float]]:
    """A baseline's parts with an empty runtime part: every version's rows have the same terms."""
    return lambda f, gpus: {**parts(f, gpus), "runtime": 0.0}


def _v1_components(f: TrainingFeatures, gpus: int) -> dict[str, float]:
    """Version 1's parts as version 2's components: what it does not account for is empty."""
    return {**physics_v1.memory_parts_gb(f, gpus), "runtime": 0.0, "copies": 0.0, "temporary": 0.0}


_QUANTIZATION: Baseline[Any] = Baseline(
    quantization.memory_per_gpu_gb,
    _with_runtime(quantization.memory_parts_gb),
    _without_links(quantization.quantization_hours),
    lambda f: 1,
    _quantization_design,
    headroom=physics_v1.HEADROOM,
    tolerance=0.15,
)
_LAYERWISE_QUANTIZATION: Baseline[Any] = dataclasses.replace(
    _QUANTIZATION,
    memory=quantization_layers.memory_per_gpu_gb,
    parts=_with_runtime(quantization_layers.memory_parts_gb),
    hours=_without_links(quantization_layers.quantization_hours),
)


def _training(k: physics.Measured) -> Baseline[Any]:
    """The stack's own accounting with constants `k`, fitted to real runs: what a GPU must hold, so
    no headroom, and its leave-one-model-out error as the spread of memory errors before any
    completion."""
    return Baseline(
        functools.partial(physics.memory_per_gpu_gb, k=k),
        functools.partial(physics.memory_parts_gb, k=k),
        lambda f, gpu_type, gpus, interconnect: physics.training_hours(f, gpu_type, gpus, k, interconnect),
        physics.smallest_count,
        _training_design,
        prior=physics.MEASURED_SPREAD[k.version],
        by_parts=True,
        components=functools.partial(physics.memory_components_gb, k=k),
    )


# Each version of the physics, as the ledger's run settings name it (`ForecastSettings.physics`), so
# a replay forecasts as the agent that decided did. Any: the kind picks the baseline, and the
# features are of that kind.
PHYSICS: dict[int, dict[str, Baseline[Any]]] = {
    # the textbook accounting (6521d26): headroom and a 15% allowance over a GPU for what it leaves out
    1: {
        "training": Baseline(
            physics_v1.memory_per_gpu_gb,
            _with_runtime(physics_v1.memory_parts_gb),
            _without_links(physics_v1.training_hours),
            physics_v1.smallest_count,
            _training_design,
            headroom=physics_v1.HEADROOM,
            tolerance=0.15,
            components=_v1_components,
        ),
        "quantization": _QUANTIZATION,
    },
    # the stack's own accounting, fitted to real runs (5c29552)
    2: {"training": _training(physics.MEASURED_V2), "quantization": _QUANTIZATION},
    # the same, with the stack's settings, gradients held beside activations, data-parallel and
    # sharding buffers and collectives' time; AWQ and GPTQ layer by layer, by their implementations' work
    3: {"training": _training(physics.MEASURED), "quantization": _LAYERWISE_QUANTIZATION},
}
PHYSICS_VERSION = max(PHYSICS)
BASELINES = PHYSICS[PHYSICS_VERSION]


MEMORY_SCALE = 50.0  # GB: keeps the proportional terms of the memory row near the others' magnitude


def memory_row(
    kind: str, f: Features, gpu_type: str, gpus: int, accounted: float, base: Baseline[Any] | None = None
) -> np.ndarray:
    """What the memory correction is linear in: each part of the baseline's accounting (so a part
    it under- or over-counts is corrected in proportion), fixed GB (the runtime's, by GPU type;
    buffers once there are peers) and GB by variant or algorithm (each holds memory its own way);
    the runtime's part last (a row learned without it extends with a zero)."""
    group = (
        one_hot(cast(TrainingFeatures, f).variant, TRAINING_VARIANTS)
        if kind == "training"
        else one_hot(cast(QuantizationFeatures, f).algorithm, DESIGN_ALGORITHMS)
    )
    split = dict((base or BASELINES[kind]).parts(f, gpus))
    runtime = split.pop("runtime")
    parts = [gb / MEMORY_SCALE for gb in split.values()]
    # the model's states in proportion, by precision (how many bytes a platform's fp8 or fp32
    # training really keeps a parameter); last, so a row learned without them extends with zeros
    states = (split.get("weights", 0.0) + split.get("gradients", 0.0) + split.get("optimizer", 0.0)) / MEMORY_SCALE
    by_precision = (
        [p * states for p in one_hot(cast(TrainingFeatures, f).precision, PRECISIONS)] if kind == "training" else []
    )
    return np.array(
        [
            *parts,
            1.0,
            float(gpus > 1),
            *group,
            *(g * accounted / MEMORY_SCALE for g in group),
            *one_hot(gpu_type, GPU_TYPES),
            *by_precision,
            runtime / MEMORY_SCALE,
        ]
    )


PROBES: dict[str, Features] = {
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


def group_memory_row(kind: str, f: Features, gpus: int, base: Baseline[Any] | None = None) -> np.ndarray:
    """A group's own memory terms: fixed GB, GB with peers, and GB in proportion to each part of
    the baseline's accounting (in GB, so the penalty weighs a part by its size; a model's shape,
    where the features do not give it, shows as a part it holds more of), each part whether or not
    it peaks where it has components; the terms added since a row was learned last."""
    level = base or BASELINES[kind]
    return np.array([1.0, float(gpus > 1), *(level.components or level.parts)(f, gpus).values()])


def architecture(kind: str, f: Features) -> str:
    """The model a job trains or quantizes, as its features tell it apart."""
    if kind == "training":
        t = cast(TrainingFeatures, f)
        return f"{t.params_b:g}/{t.layers}/{t.hidden_size}"
    return f"{f.params_b:g}"
