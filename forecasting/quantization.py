"""The physics-informed baseline for quantization jobs: GPUs to hold the model while it is
quantized, and the time the calibration passes and the model's loading and saving take.

- memory: methods that calibrate in full precision (AWQ, GPTQ, SmoothQuant, FP8) hold the
  16-bit model across the GPUs; bitsandbytes quantizes as it loads, so it holds the quantized
  weights; GGUF k-quants run layer by layer, one GPU at most;
- time: forward passes over the calibration set (2 FLOPs a parameter and token), times the passes
  the method makes (AWQ searches scales, GPTQ solves per layer), plus reading the 16-bit
  checkpoint and writing the result at storage speed.

Public figures, not fitted ones: the learned correction fits what this misses.
"""

from __future__ import annotations

from gpualloc.forecasting.physics import ACHIEVED, GIB, GPU_MEMORY_GB, HEADROOM, Sizing, peak_flops
from gpualloc.schemas.features import QuantizationFeatures

CALIBRATION_PASSES = {"awq": 3.0, "gptq": 2.0, "smoothquant": 1.0, "fp8": 1.0, "bnb_nf4": 0.0, "bnb_int8": 0.0,
                      "gguf_k": 0.0}
STORAGE_GB_S = 1.0  # checkpoint read and write speed
GGUF_S_PER_B = 60.0  # CPU k-quant conversion, seconds a billion parameters


def memory_gb(f: QuantizationFeatures) -> float:
    """GB the model needs while it is quantized, over all GPUs."""
    params = f.params_b * 1e9
    if f.algorithm in ("bnb_nf4", "bnb_int8"):
        return params * f.bits / 8 / GIB
    if f.algorithm == "gguf_k":
        return 0.0  # layer by layer, on the CPU
    return params * 2 / GIB


def quantization_hours(f: QuantizationFeatures, gpu_type: str, gpus: int) -> float:
    """Calibration passes on `gpus` GPUs of `gpu_type`, then the checkpoint's I/O."""
    params = f.params_b * 1e9
    calibration = 2 * params * f.calibration_samples * f.seq_len * CALIBRATION_PASSES[f.algorithm]
    seconds = calibration / (gpus * peak_flops(gpu_type, "bf16") * ACHIEVED)
    seconds += (params * 2 + params * f.bits / 8) / (STORAGE_GB_S * 1e9)
    if f.algorithm == "gguf_k":
        seconds += GGUF_S_PER_B * f.params_b
    return seconds / 3600.0


def size_quantization(f: QuantizationFeatures, gpu_type: str, gpu_memory_gb: float | None = None,
                      max_gpus: int = 4096) -> Sizing:
    """The smallest power-of-two GPU count that holds the model, and the time."""
    per_gpu = (gpu_memory_gb or GPU_MEMORY_GB[gpu_type]) * HEADROOM
    need, n = memory_gb(f), 1
    while n < max_gpus and need / n > per_gpu:
        n *= 2
    return Sizing(n, need / n, need / n <= per_gpu, quantization_hours(f, gpu_type, n))
