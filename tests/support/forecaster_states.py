"""A pool's job forecasters at their largest: every group of every kind on every GPU type with
full error windows, the most model corrections a kind keeps, full kind windows."""

from __future__ import annotations

import random

import numpy as np

from gpualloc.forecasting.designs import PROBES, group_memory_row
from gpualloc.forecasting.groups import GROUP_ERRORS, MODELS, GroupModel, Offset, Refinement
from gpualloc.forecasting.jobs import RAN_OUT, UTILIZATION, JobForecaster
from gpualloc.forecasting.ridge import OnlineRidge
from gpualloc.schemas.features import GPU_TYPES, QUANT_ALGORITHMS, TRAINING_VARIANTS


def _ridge(rng: random.Random, dims: int) -> OnlineRidge:
    x = np.array([[rng.uniform(-50, 50) for _ in range(dims)] for _ in range(dims + 2)])
    return OnlineRidge(
        dims, 4.0, x.T @ x, x.T @ np.array([rng.uniform(-9, 9) for _ in range(dims + 2)]), dims + 2, True
    )


def largest_job_forecaster(seed: int = 0) -> JobForecaster:
    rng, fc = random.Random(seed), JobForecaster()
    for kind, groups in (("training", TRAINING_VARIANTS), ("quantization", QUANT_ALGORITHMS)):
        model = fc.models[kind]
        duration_dims, memory_dims = len(model.duration.xty), len(group_memory_row(kind, PROBES[kind], 1))
        model.errors.errors = [rng.uniform(-1, 1) for _ in range(model.errors.size)]
        model.memory_errors.errors = [rng.uniform(-1, 1) for _ in range(model.memory_errors.size)]
        for group in groups:
            for gpu_type in GPU_TYPES:
                g = GroupModel(
                    Refinement(_ridge(rng, memory_dims), rng.uniform(-1, 1)),
                    Offset(
                        rng.randint(1, 999), rng.uniform(-99, 99), [rng.uniform(-99, 99) for _ in range(duration_dims)]
                    ),
                )
                g.errors.errors = [rng.uniform(-1, 1) for _ in range(GROUP_ERRORS)]
                g.memory_errors.errors = [rng.uniform(-1, 1) for _ in range(GROUP_ERRORS)]
                model.groups[f"{group}/{gpu_type}"] = g
        for k in range(MODELS):
            model.architectures[f"{rng.uniform(0.1, 999):.6g}/{rng.randint(1, 200)}/{k}"] = Refinement(
                _ridge(rng, memory_dims), rng.uniform(-1, 1)
            )
    fc.utilization = [rng.uniform(0.1, 1) for _ in range(UTILIZATION)]
    fc.ran_out = {f"{rng.getrandbits(256):064x}": 1 << rng.randint(0, 12) for _ in range(RAN_OUT)}
    return fc
