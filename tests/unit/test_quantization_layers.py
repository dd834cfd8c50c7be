"""Version 3 of the quantization physics: AWQ, GPTQ and AutoRound layer by layer on one GPU, by
the work their implementations do."""

from __future__ import annotations

import pytest

from gpualloc.forecasting import physics, quantization
from gpualloc.forecasting import quantization_layers as ql
from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.job_forecast import Hardware
from gpualloc.schemas.features import QuantizationFeatures
from gpualloc.schemas.settings import ForecastSettings

OPT_175B = {"params_b": 175, "layers": 96, "hidden_size": 12288, "intermediate_size": 49152}
LLAMA_70B = {"params_b": 70.6, "layers": 80, "hidden_size": 8192, "intermediate_size": 28672}


def q(algorithm: str, **fields) -> QuantizationFeatures:
    return QuantizationFeatures(**{"algorithm": algorithm, "bits": 4, **LLAMA_70B, **fields})


def test_the_shape_is_as_given_or_estimated_with_the_mlps_matrices_from_the_parameters():
    assert ql.shape(q("gptq", **OPT_175B)) == (96, 12288, 49152, 2)  # OPT: two MLP matrices
    assert ql.shape(q("gptq")) == (80, 8192, 28672, 3)  # Llama: gated, three
    layers, hidden, mlp, _ = ql.shape(QuantizationFeatures(params_b=7, algorithm="awq", bits=4))
    assert 12 * layers * hidden**2 == pytest.approx(7e9, rel=0.15) and mlp >= hidden


def test_a_layerwise_method_runs_as_long_on_any_count_and_autoround_holds_one_layer():
    hw = Hardware("h100-80gb", 80.0, 64, 5, nominal=True)
    for algorithm in ("awq", "gptq", "autoround"):
        f = q(algorithm)
        assert ql.quantization_hours(f, "h100-80gb", 1) == ql.quantization_hours(f, "h100-80gb", 8)
    tuned = q("autoround")
    assert ql.memory_per_gpu_gb(tuned, 1) == ql.memory_per_gpu_gb(tuned, 8) < 80  # the model stays on the host
    assert Forecasters(ForecastSettings()).size("quantization", tuned, hw, None, None).gpus == 1
    for algorithm in ("awq", "gptq"):  # sized for the whole 16-bit model on the GPUs, as transformers loads it
        f = q(algorithm)
        assert ql.memory_parts_gb(f, 2) == quantization.memory_parts_gb(f, 2)
        assert Forecasters(ForecastSettings()).size("quantization", f, hw, None, None).gpus >= 2
        hosted = q(algorithm, model_on_host=True)  # the methods' own scripts: a layer at a time
        assert ql.memory_per_gpu_gb(hosted, 1) == ql.memory_per_gpu_gb(hosted, 8) < 80
        assert Forecasters(ForecastSettings()).size("quantization", hosted, hw, None, None).gpus == 1
    gptq = ql.memory_parts_gb(q("gptq", model_on_host=True), 1)
    assert gptq["hessian"] * 2**30 == pytest.approx(4 * (6 * 8192**2 + 28672**2))
    with pytest.raises(ValueError, match="model_on_host: only for algorithms awq, gptq, autoround"):
        q("fp8", bits=8, model_on_host=True)


def test_gptqs_work_is_its_hessians_inverses_and_column_updates_in_fp32():
    f = q("gptq", calibration_samples=128, seq_len=2048)
    more = q("gptq", calibration_samples=256, seq_len=2048)
    assert ql.quantization_hours(more, "a100-80gb", 1) > ql.quantization_hours(f, "a100-80gb", 1)
    assert [(i, o) for _, i, o in ql.linears(f)] == [(8192, 8192)] * 4 + [(8192, 28672)] * 2 + [(28672, 8192)]
    # the Hessians' accumulation is the largest part at 128 x 2048 tokens: fp32 multiplies at the measured share
    hessians = (
        sum(2.0 * i * i * 128 * 2048 for _, i, _ in ql.linears(f)) * 80 / (19.5e12 * physics.MEASURED.achieved_fp32)
    )
    assert hessians < ql.quantization_hours(f, "a100-80gb", 1) * 3600 < 2 * hessians


def test_awq_searches_scales_and_clipping_and_autoround_tunes_each_layer():
    awq = q("awq", calibration_samples=128, seq_len=512)
    fewer = q("awq", calibration_samples=64, seq_len=512)
    assert ql.quantization_hours(awq, "h100-80gb", 1) > ql.quantization_hours(fewer, "h100-80gb", 1)
    tuned = q("autoround", calibration_samples=128, seq_len=2048)
    assert ql.quantization_hours(tuned, "h100-80gb", 1) > ql.quantization_hours(
        q("gptq", calibration_samples=128, seq_len=2048), "h100-80gb", 1
    )


def test_the_other_methods_are_counted_as_before():
    for algorithm, bits in (("smoothquant", 8), ("fp8", 8), ("bnb_nf4", 4), ("gguf_k", 4)):
        f = q(algorithm, bits=bits)
        assert ql.memory_parts_gb(f, 4) == quantization.memory_parts_gb(f, 4)
        assert ql.quantization_hours(f, "h100-80gb", 4) == quantization.quantization_hours(f, "h100-80gb", 4)
