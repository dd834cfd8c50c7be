"""Version 3 of the quantization physics: AWQ, GPTQ and AutoRound timed by the work their reference
implementations do, one decoder layer at a time (AutoAWQ, AutoGPTQ and GPTQModel, the GPTQ
authors' code, Intel's auto-round); the other methods as `quantization` counts them.

Memory: where the features say the model stays on the host (`model_on_host`, AutoRound's default:
auto-round keeps it there), a GPU holds one layer, the calibration set's inputs and outputs of it
and the method's own working set. Otherwise AWQ and GPTQ are sized as before, the 16-bit model
across the job's GPUs with the calibration inputs and GPTQ's Hessian (`quantization`):
transformers' integration of both loads the whole model onto the GPUs before quantizing it layer
by layer (`device_map="auto"`), and a job sized for that also fits a layer-by-layer run; the other
way round, a job sized for one layer runs out of memory where the whole model is loaded.

Time, a layer at a time (more GPUs do not run it faster: the layers go in turn):
- both run the layer over the whole calibration set (`FORWARDS` times: for its linear layers'
  inputs, then for its outputs, the next layer's inputs), holding those inputs and outputs in
  16 bits;
- AWQ searches `AWQ_GRID` scales for each group of linear layers that shares an input (query, key
  and value with the attention they feed; the output projection; the MLP's input projections with
  the MLP; its output projection), running what the group feeds over the calibration set for each;
  then searches `CLIP_GRID` clipping ranges for every linear layer but the query and key,
  comparing outputs on `CLIP_TOKENS` tokens by an elementwise product of inputs and weights
  (written and read in fp16: memory-bound);
- AutoRound tunes each layer's rounding offsets and clipping by signed gradient descent,
  `ROUND_ITERS` steps of `ROUND_BATCH` calibration samples, each a forward and a backward pass
  through the layer (three times a forward's multiplies) and a pass over its weights;
- GPTQ accumulates each linear layer's Hessian (2 X X^T over the calibration tokens) in fp32 with
  TF32 off, as its code sets, inverts it by Cholesky factorizations (about in^3 multiply-adds),
  and quantizes column by column, updating the columns not yet quantized (about out x in^2), each
  column a handful of small kernels whose launches cost more than their work.

Constants are the implementations' defaults (AutoAWQ's `n_grid`, `n_sample_token`, GPTQ's kernels
a column, auto-round's `iters` and `batch_size`) and the physics' own measured figures
(`physics.MEASURED`: fp32 multiplies' share of peak and a kernel launch, on the real runs);
nothing here is fitted to a published quantization time.
"""

from __future__ import annotations

from gpualloc.forecasting import quantization
from gpualloc.forecasting.hardware import GIB, HBM_TB_S, peak_flops
from gpualloc.forecasting.memo import by_identity
from gpualloc.forecasting.physics import MEASURED
from gpualloc.forecasting.physics_v1 import ACHIEVED
from gpualloc.schemas.features import QuantizationFeatures

LAYERWISE = ("awq", "gptq", "autoround")  # timed by their work a layer
AWQ_GRID = 20  # AutoAWQ's `n_grid`: scales tried for each group of linear layers
CLIP_GRID = 20  # AutoAWQ's `auto_clip` `n_grid`: clipping ranges tried for each linear layer
CLIP_TOKENS = 512  # `auto_clip`'s `n_sample_token`
CLIP_BYTES = 4  # an element of the clip search's fp16 product, written then read
CLIP_CHANNELS = 64  # output channels a batch of the clip search (`oc_batch_size`)
COLUMN_LAUNCHES = 16  # kernels GPTQ launches a column: quantize (6), loss, error, update, stores
# passes of a layer over the calibration set: AWQ's for its linear layers' inputs, then its outputs;
# GPTQ's once for each of the four groups quantized in turn (`true_sequential`), then its outputs
FORWARDS = {"awq": 2, "gptq": 5, "autoround": 2}
ROUND_ITERS = 200  # AutoRound's `iters`: signed-gradient steps a layer
ROUND_BATCH = 8  # AutoRound's `batch_size`: calibration samples a step
ROUND_BYTES = 24  # a weight a step: quantized with its fp32 offset, their gradients, the update
ACTIVATION_BYTES = 34  # a token and unit of a layer's activations for its backward (Korthikanti et al. 2022)


@by_identity
def shape(f: QuantizationFeatures) -> tuple[int, int, int, int]:
    """Layers, width, the MLP's width and its matrices (2, or 3 gated) of the model: as given, else
    estimated from the parameters (`quantization.hidden_size`, 12 x width^2 a layer)."""
    params = f.params_b * 1e9
    hidden = f.hidden_size or max(64, round(quantization.hidden_size(f.params_b)))
    layers = f.layers or max(1, round(params / (12 * hidden**2)))
    per_layer = params / layers - 4 * hidden**2  # the MLP's share of a layer (attention: 4 x width^2)
    mlp = f.intermediate_size or max(hidden, round(per_layer / (3 * hidden)))
    matrices = min(3, max(2, round(per_layer / (hidden * mlp))))
    return layers, hidden, mlp, matrices


@by_identity
def linears(f: QuantizationFeatures) -> tuple[tuple[str, int, int], ...]:
    """Each linear layer of a decoder layer: (name, inputs, outputs)."""
    _, h, m, matrices = shape(f)
    mlp_in = [("gate", h, m), ("up", h, m)] if matrices == 3 else [("up", h, m)]
    return (("q", h, h), ("k", h, h), ("v", h, h), ("o", h, h), *mlp_in, ("down", m, h))


def _layer_params(f: QuantizationFeatures) -> int:
    return sum(i * o for _, i, o in linears(f))


def on_the_host(f: QuantizationFeatures) -> bool:
    """The model stays in host memory and a layer at a time goes to the GPU."""
    return f.model_on_host if f.model_on_host is not None else f.algorithm == "autoround"


def memory_parts_gb(f: QuantizationFeatures, gpus: int) -> dict[str, float]:
    """GiB a GPU holds: with the model on the host, a layer (AutoRound's with its fp32 rounding
    offsets and their gradients), its inputs and outputs over the calibration set, and the
    method's working set (AWQ: what the searched group feeds and a clip batch; GPTQ: the layer's
    Hessians; AutoRound: a step's activations); otherwise as `quantization` counts it."""
    if not on_the_host(f):
        return quantization.memory_parts_gb(f, gpus)
    return dict(_layer_parts(f))


@by_identity
def _layer_parts(f: QuantizationFeatures) -> dict[str, float]:
    """`memory_parts_gb` of a run with the model on the host: the same at every count."""
    _, h, m, _ = shape(f)
    tokens = f.calibration_samples * f.seq_len
    calibration = 2 * tokens * h * 2.0  # the layer's inputs and outputs, 16-bit
    hessian = 0.0
    weight_bytes = 2.0  # the layer's 16-bit weights
    if f.algorithm == "awq":
        calibration += tokens * m * 2.0 * 3 + CLIP_CHANNELS * CLIP_TOKENS * max(h, m) * 2.0
    elif f.algorithm == "autoround":
        weight_bytes += 8.0
        calibration += min(ROUND_BATCH, f.calibration_samples) * f.seq_len * h * ACTIVATION_BYTES
    else:
        hessian = sum(i * i * 4.0 for _, i, _ in linears(f))
    return {"model": _layer_params(f) * weight_bytes / GIB, "calibration": calibration / GIB, "hessian": hessian / GIB}


def memory_per_gpu_gb(f: QuantizationFeatures, gpus: int) -> float:
    return sum(memory_parts_gb(f, gpus).values())


def quantization_hours(f: QuantizationFeatures, gpu_type: str, gpus: int) -> float:
    """AWQ's, GPTQ's and AutoRound's layers in turn on one GPU, then the checkpoint's I/O; the others as
    `quantization` counts them."""
    if f.algorithm not in LAYERWISE:
        return quantization.quantization_hours(f, gpu_type, gpus)
    layers = shape(f)[0]
    tokens = f.calibration_samples * f.seq_len
    half = peak_flops(gpu_type, "bf16") * ACHIEVED
    fp32 = peak_flops(gpu_type, "fp32") * MEASURED.achieved_fp32
    bandwidth = HBM_TB_S[gpu_type] * 1e12
    parts = {name: (i, o) for name, i, o in linears(f)}
    seconds = FORWARDS[f.algorithm] * 2.0 * _layer_params(f) * tokens / half
    if f.algorithm == "awq":
        attention = sum(i * o for name, (i, o) in parts.items() if name in ("q", "k", "v", "o"))
        mlp = sum(i * o for name, (i, o) in parts.items() if name in ("gate", "up", "down"))
        inspected = attention + parts["o"][0] * parts["o"][1] + mlp + parts["down"][0] * parts["down"][1]
        seconds += AWQ_GRID * 2.0 * tokens * inspected / half
        clipped = sum(i * o for name, (i, o) in parts.items() if name not in ("q", "k"))
        seconds += CLIP_GRID * CLIP_TOKENS * clipped * CLIP_BYTES / bandwidth
    elif f.algorithm == "autoround":
        batch = min(ROUND_BATCH, f.calibration_samples) * f.seq_len
        seconds += ROUND_ITERS * (
            3 * 2.0 * _layer_params(f) * batch / half + _layer_params(f) * ROUND_BYTES / bandwidth
        )
    else:
        flops = sum(2.0 * i * i * tokens + i**3 + o * i * i for i, o in parts.values())
        seconds += flops / fp32 + sum(i for i, _ in parts.values()) * COLUMN_LAUNCHES * MEASURED.launch_seconds
    params = f.params_b * 1e9
    seconds *= layers
    seconds += (params * 2 + params * f.bits / 8) / (quantization.STORAGE_GB_S * 1e9)
    return seconds / 3600.0
