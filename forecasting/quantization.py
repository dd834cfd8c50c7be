"""The physics-informed baseline for quantization jobs: GPUs to hold the model while it is
quantized, and the time the calibration passes and the model's loading and saving take.

- memory: methods that calibrate in full precision (AWQ, GPTQ, SmoothQuant, FP8) hold the
  16-bit model across the GPUs. GPTQ and AWQ go block by block and keep, on each GPU, the whole
  calibration set's inputs to the block (samples x sequence x hidden, 16-bit; the width estimated
  from the parameter count at a usual depth-to-width ratio), GPTQ also its layer's Hessian (the
  MLP's input width squared, fp32); SmoothQuant and FP8 gather their statistics (per-channel
  maxima, per-tensor scales) batch by batch, so they hold one batch's activations of a layer
  whatever the calibration set's size; bitsandbytes quantizes as it loads, so it holds the
  quantized weights; GGUF k-quants run layer by layer, one GPU at most;
- time: forward passes over the calibration set (2 FLOPs a parameter and token), times the passes
  the method makes (AWQ searches scales, GPTQ solves per layer), plus reading the 16-bit
  checkpoint and writing the result at storage speed.

Public figures, not fitted ones: the learned correction fits what this misses.
"""

from __future__ import annotations

from gpualloc.forecasting.physics_v1 import ACHIEVED, GIB, GPU_MEMORY_GB, HEADROOM, Sizing, peak_flops
from gpualloc.schemas.features import QuantizationFeatures

CALIBRATION_PASSES = {
    "awq": 3.0,
    "gptq": 2.0,
    "smoothquant": 1.0,
    "fp8": 1.0,
    "bnb_nf4": 0.0,
    "bnb_int8": 0.0,
    "gguf_k": 0.0,
    "autoround": 2.0,  # version 3 counts its tuning (`quantization_layers`)
}
STORAGE_GB_S = 1.0  # checkpoint read and write speed
GGUF_S_PER_B = 60.0  # CPU k-quant conversion, seconds a billion parameters
CALIBRATING = ("awq", "gptq", "smoothquant", "fp8", "autoround")
STREAMING = ("smoothquant", "fp8")  # statistics gathered batch by batch
STREAM_BATCH = 16  # samples a calibration batch of a streaming method
ACTIVATION_BYTES = 34  # a token a hidden unit of one layer's activations (Korthikanti et al. 2022)
LAYERS_PER_WIDTH = 1 / 128  # a usual depth-to-width ratio: 32 layers at 4096, 80 at about 10,000
MLP_WIDTH = 4  # the MLP's inner width over the model's


def memory_gb(f: QuantizationFeatures) -> float:
    """GB the model needs while it is quantized, over all GPUs."""
    params = f.params_b * 1e9
    if f.algorithm in ("bnb_nf4", "bnb_int8"):
        return params * f.bits / 8 / GIB
    if f.algorithm == "gguf_k":
        return 0.0  # layer by layer, on the CPU
    return params * 2 / GIB


def hidden_size(params_b: float) -> float:
    """A transformer's width from its parameters: 12 x layers x width^2 at the usual ratio."""
    width: float = (params_b * 1e9 / (12 * LAYERS_PER_WIDTH)) ** (1 / 3)  # float ** float is Any to typeshed
    return width


def memory_parts_gb(f: QuantizationFeatures, gpus: int) -> dict[str, float]:
    """GB a GPU holds: its share of the model, the calibration inputs, the Hessian."""
    calibrating = f.algorithm in CALIBRATING
    width = hidden_size(f.params_b)
    if f.algorithm in STREAMING:
        inputs = min(f.calibration_samples, STREAM_BATCH) * f.seq_len * width * ACTIVATION_BYTES
    else:
        inputs = f.calibration_samples * f.seq_len * width * 2 if calibrating else 0.0
    hessian = (MLP_WIDTH * width) ** 2 * 4 if f.algorithm == "gptq" else 0.0
    return {"model": memory_gb(f) / gpus, "calibration": inputs / GIB, "hessian": hessian / GIB}


def memory_per_gpu_gb(f: QuantizationFeatures, gpus: int) -> float:
    return sum(memory_parts_gb(f, gpus).values())


def quantization_hours(f: QuantizationFeatures, gpu_type: str, gpus: int) -> float:
    """Calibration passes on `gpus` GPUs of `gpu_type`, then the checkpoint's I/O."""
    params = f.params_b * 1e9
    calibration = 2 * params * f.calibration_samples * f.seq_len * CALIBRATION_PASSES[f.algorithm]
    seconds = calibration / (gpus * peak_flops(gpu_type, "bf16") * ACHIEVED)
    seconds += (params * 2 + params * f.bits / 8) / (STORAGE_GB_S * 1e9)
    if f.algorithm == "gguf_k":
        seconds += GGUF_S_PER_B * f.params_b
    return seconds / 3600.0


def size_quantization(
    f: QuantizationFeatures, gpu_type: str, gpu_memory_gb: float | None = None, max_gpus: int = 4096
) -> Sizing:
    """The smallest power-of-two GPU count that holds the model, and the time."""
    per_gpu = (gpu_memory_gb or GPU_MEMORY_GB[gpu_type]) * HEADROOM
    n = 1
    while n < max_gpus and memory_per_gpu_gb(f, n) > per_gpu:
        n *= 2
    need = memory_per_gpu_gb(f, n)
    return Sizing(n, need, need <= per_gpu, quantization_hours(f, gpu_type, n))
