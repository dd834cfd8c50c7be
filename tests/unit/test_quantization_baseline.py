"""The quantization baseline: the model fits the GPUs counted, and time follows the calibration
work, the method's passes and the model's size."""

from __future__ import annotations

import pytest

from gpualloc.forecasting.physics_v1 import GPU_MEMORY_GB, HEADROOM
from gpualloc.forecasting.quantization import memory_gb, memory_per_gpu_gb, size_quantization
from gpualloc.schemas.features import QuantizationFeatures


def features(**change) -> QuantizationFeatures:
    return QuantizationFeatures.model_validate({"params_b": 70, "algorithm": "gptq", "bits": 4, **change})


def test_the_count_is_the_smallest_power_of_two_that_holds_the_model():
    f = features()
    sizing = size_quantization(f, "a100-80gb")
    limit = GPU_MEMORY_GB["a100-80gb"] * HEADROOM
    assert sizing.fits and memory_per_gpu_gb(f, sizing.gpus) <= limit < memory_per_gpu_gb(f, sizing.gpus // 2)
    assert sizing.gpus == 4  # 65 GB of 16-bit weights a GPU at two, plus calibration inputs and the Hessian
    assert size_quantization(features(algorithm="bnb_int8", bits=8), "a100-80gb").gpus == 1  # 65 GB of int8


def test_calibration_inputs_and_the_hessian_are_held_on_every_gpu():
    f, more = features(), features(calibration_samples=1024)
    assert memory_per_gpu_gb(more, 8) > memory_per_gpu_gb(f, 8)
    assert memory_per_gpu_gb(f, 8) - memory_gb(f) / 8 == pytest.approx(memory_per_gpu_gb(f, 2) - memory_gb(f) / 2)
    assert memory_per_gpu_gb(features(algorithm="awq"), 2) < memory_per_gpu_gb(f, 2)  # no Hessian


def test_methods_that_quantize_on_load_or_layer_by_layer_need_fewer_gpus():
    assert size_quantization(features(algorithm="bnb_nf4"), "a100-80gb").gpus == 1
    assert size_quantization(features(algorithm="gguf_k"), "a100-80gb").gpus == 1
    assert size_quantization(features(params_b=7, algorithm="awq"), "a100-80gb").gpus == 1


@pytest.mark.parametrize("change", [{"calibration_samples": 512}, {"seq_len": 8192}, {"algorithm": "awq", "bits": 4}])
def test_more_calibration_work_takes_longer(change):
    assert size_quantization(features(**change), "h100-80gb").hours > size_quantization(features(), "h100-80gb").hours


def test_bigger_models_take_longer_and_faster_gpus_less_long():
    assert (
        size_quantization(features(params_b=140), "h100-80gb").hours > size_quantization(features(), "h100-80gb").hours
    )
    assert size_quantization(features(), "h100-80gb").hours < size_quantization(features(), "a100-80gb").hours
