"""The training baseline's physics: GPU counts are the smallest power of two whose memory fits,
and memory, FLOPs and time move the way the accounting says they must."""

from __future__ import annotations

import pytest

from gpualloc.forecasting.physics_v1 import (
    GPU_MEMORY_GB,
    HEADROOM,
    memory_per_gpu_gb,
    size_training,
    steps_of,
    trainable_params,
    training_flops,
)
from gpualloc.schemas.features import TrainingFeatures

BASE = {
    "variant": "full",
    "params_b": 7,
    "layers": 32,
    "hidden_size": 4096,
    "seq_len": 4096,
    "dataset_tokens_m": 200,
    "epochs": 1,
    "global_batch": 256,
    "micro_batch": 1,
    "gradient_checkpointing": True,
}


def features(**change) -> TrainingFeatures:
    return TrainingFeatures.model_validate({**BASE, **change})


def test_the_count_is_the_smallest_power_of_two_that_fits():
    f = features(zero_stage=3)
    sizing = size_training(f, "h100-80gb")
    limit = GPU_MEMORY_GB["h100-80gb"] * HEADROOM
    assert sizing.fits and sizing.gpus & (sizing.gpus - 1) == 0
    assert memory_per_gpu_gb(f, sizing.gpus) <= limit < memory_per_gpu_gb(f, sizing.gpus // 2)


def test_a_7b_full_fine_tune_needs_sharding_and_a_lora_fits_one_gpu():
    assert not size_training(features(), "h100-80gb").fits  # weights, grads and Adam state: 112 GB a GPU
    assert size_training(features(zero_stage=3), "h100-80gb").gpus in (2, 4)
    lora = size_training(features(variant="lora", lora_rank=16), "h100-80gb")
    assert lora.gpus == 1 and lora.fits
    assert trainable_params(features(variant="lora", lora_rank=16)) < 0.01 * 7e9


def test_qlora_holds_a_70b_base_where_lora_cannot():
    big = dict(params_b=70, layers=80, hidden_size=8192)
    assert size_training(features(variant="qlora", lora_rank=16, **big), "a100-80gb").gpus == 1
    lora = features(variant="lora", lora_rank=16, **big)
    assert memory_per_gpu_gb(lora, 1) > GPU_MEMORY_GB["a100-80gb"] * HEADROOM  # 140 GB of bf16 weights
    assert not size_training(lora, "a100-80gb").fits  # unsharded weights: no count helps
    assert size_training(features(variant="lora", lora_rank=16, zero_stage=3, **big), "a100-80gb").fits


def test_tensor_and_pipeline_parallelism_set_the_floor():
    assert (
        size_training(features(variant="lora", lora_rank=8, tensor_parallel=2, pipeline_parallel=2), "h100-80gb").gpus
        >= 4
    )


@pytest.mark.parametrize(
    "change",
    [
        {"params_b": 14},
        {"micro_batch": 4},
        {"gradient_checkpointing": False},
        {"optimizer": "adamw"},
        {"reference_model": True},
    ],
)
def test_memory_never_falls_when_the_job_grows(change):
    base = {"zero_stage": 1, "optimizer": "adamw_8bit"}
    assert memory_per_gpu_gb(features(**{**base, **change}), 8) >= memory_per_gpu_gb(features(**base), 8)


def test_time_follows_the_flops_and_the_hardware():
    f = features(zero_stage=3)
    assert training_flops(features(zero_stage=3, epochs=2)) == pytest.approx(2 * training_flops(f))
    assert training_flops(features(variant="lora", lora_rank=16)) < training_flops(f)  # no weight gradients
    h100, a100 = size_training(f, "h100-80gb"), size_training(f, "a100-80gb")
    assert h100.hours * h100.gpus < a100.hours * a100.gpus  # more FLOPs a second
    fp8 = size_training(features(zero_stage=3, precision="fp8"), "h100-80gb")
    assert fp8.hours < h100.hours
    assert (steps_of(2.5, 60), steps_of(2.5, 30), steps_of(0.01, 60)) == (3, 5, 1)
