"""Ground truth from a model catalogue: a four-pool trace whose every job and app has a known truth.

An independent generator (docs/ground-truth.md): it imports only the contract (`gpualloc.schemas`)
and builds its world from published sources, not from anything the forecasters were built beside.

The world
---------
Four pools of 64 GPUs, on GPU types the other generators leave alone:

- ``cat-a10``: NVIDIA A10 24 GB, 4 a node (PCIe only), hourly, horizon 48. Three real-time apps
  and small fine-tunes and quantizations.
- ``cat-v100``: NVIDIA V100 SXM2 32 GB, 8 a node (NVLink 2), hourly. fp16 (no bf16 on Volta) and no
  FlashAttention (it needs Ampere or later): small and 7B models.
- ``cat-a100``: NVIDIA A100 40 GB, 8 a node (NVLink 3), 30-minute steps. 7B-14B full and DPO runs
  under ZeRO, adapters on models up to 40B, quantization.
- ``cat-mi300x``: AMD Instinct MI300X 192 GB, 8 a node (Infinity Fabric), 30-minute steps. Large
  models: full, continued pre-training and DPO of 34B-67B models, quantization of big ones.

The catalogue: real architectures (params, layers, hidden size, heads, KV heads, MLP width,
vocabulary, context) from their published configs: Mistral-7B-v0.1 (Jiang et al. 2023,
arXiv:2310.06825), Phi-3-mini-4k and Phi-3-medium-4k (Abdin et al. 2024, arXiv:2404.14219;
huggingface.co/microsoft/Phi-3-medium-4k-instruct config.json), Falcon-7B and Falcon-40B
(Almazrouei et al. 2023, arXiv:2311.16867; huggingface.co/tiiuae/falcon-7b), OLMo-7B (Groeneveld
et al. 2024, arXiv:2402.00838), DeepSeek-LLM-7B and 67B (DeepSeek-AI 2024, arXiv:2401.02954; the
67B base config: 95 layers, hidden 8192, 64 heads, 8 KV heads, vocabulary 102,400), Yi-34B (01.AI
2024, arXiv:2403.04652; config: 60 layers, hidden 7168, 56 heads, 8 KV heads), StableLM-2-1.6B and
StableLM-3B-4E1T (Stability AI model cards).

GPUs (datasheets): V100 SXM2 125 TFLOPS fp16 tensor, 15.7 fp32, 900 GB/s; A10 125 TFLOPS bf16/fp16
dense, 62.5 tf32, 31.2 fp32, 600 GB/s, PCIe Gen4; A100 312 TFLOPS bf16, 156 tf32, 19.5 fp32,
1.555 TB/s; MI300X 1,307 TFLOPS bf16 dense, 2,615 fp8, 653 tf32, 163 fp32, 5.3 TB/s, 192 GB HBM3.
H200 (989 TFLOPS bf16 dense, 67 fp32, 4.8 TB/s, 141 GB) has no pool: it is the GPU of the real
runs the model is checked against.

The memory model (per GPU, the peak of a step):

- Model states after ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054): mixed precision keeps 2-byte
  weights and gradients and an fp32 master copy with the optimizer's state (Adam: 4 + 4 + 4 = 12
  bytes a parameter, "16 bytes a parameter" in all); stage 1 shards the optimizer state over the
  data-parallel ranks, stage 2 the gradients too, stage 3 the weights too. 8-bit Adam keeps 2 bytes
  of state (Dettmers et al. 2022, arXiv:2110.02861), Lion one momentum (Chen et al. 2023,
  arXiv:2302.06675), SGD one momentum, Adafactor a factored second moment (Shazeer and Stern 2018);
  PyTorch's AdamW, SGD and Lion hold 1.5 bytes a parameter of temporaries in their step.
  Tensor and pipeline parallelism divide the model states by t x p.
- Activations (after Korthikanti et al. 2022, arXiv:2205.05198, counted for the gated MLPs and the
  fp32 residual stream of mixed-precision fine-tuning, and checked against real H200 runs:
  docs/ground-truth.md, "Realism against real runs"): s b (26 h + 2.7 m f) bytes a layer for m
  MLP matrices of width f (twice that in fp32), divided by t with sequence parallelism; without
  FlashAttention (Dao et al. 2022) the scores add 6 a s^2 b bytes (bf16 and their fp32 softmax);
  full recomputation keeps 3.5 s b h a layer (the fp32 residual) plus one layer's working set; the
  1F1B pipeline's first stage holds as much as all layers of one micro-batch. Logits add s b V x 12
  bytes (bf16 logits, their fp32 copy and log-softmax for the loss, the gradient).
- Adapters: LoRA (Hu et al. 2021, arXiv:2106.09685) trains r (d_in + d_out) a targeted matrix over a
  frozen 2-byte base; QLoRA (Dettmers et al. 2023, arXiv:2305.14314) stores the base in NF4 with
  double quantization, 4.127 bits a parameter (embeddings and head upcast to fp32), with paged 8-bit Adam;
  DoRA (Liu et al. 2024, arXiv:2402.09353) adds a magnitude vector and the column norms of the
  adapted weight, which cost activations and time.
- DPO (Rafailov et al. 2023, arXiv:2305.18290): a policy and a frozen reference model, each sample a
  pair of sequences (chosen, rejected), so twice the sequences a micro-batch.
- Quantization: GPTQ (Frantar et al. 2022, arXiv:2210.17323) goes block by block over 128 calibration
  segments of 2,048 tokens, keeping the block's inputs for every sample and a Hessian (d_in^2 fp32)
  a linear layer; it quantizes a 175B model in about 4 GPU hours on an A100. AWQ (Lin et al. 2023,
  arXiv:2306.00978) searches per-channel scales on 128 samples of 512 tokens, faster than GPTQ.
  SmoothQuant (Xiao et al. 2022, arXiv:2211.10438) needs only activation statistics from 512
  samples. LLM.int8() and NF4 through bitsandbytes (Dettmers et al. 2022, arXiv:2208.07339) need no
  calibration. FP8 calibrates per-tensor scales. GGUF k-quants (llama.cpp) compute an importance
  matrix with a forward pass. Here the fp16 model is spread over the job's GPUs (one node), and
  the calibration state sits beside it.
- A CUDA context and communication buffers (about 1.3 GB, +0.6 GB with NCCL), allocator
  fragmentation (+8%), and a per-job memory noise (lognormal, sigma 0.03).

The true GPU count: the smallest power of two (a multiple of tensor x pipeline, at most the pool's
size; one node for quantization) whose per-GPU peak is at most 90% of the GPU's memory. A job no
count holds is drawn again (its user reconfigures it), three draws at most, then not emitted.

The throughput model: training FLOPs a token ~ 6 N for full training (Kaplan et al. 2020,
arXiv:2001.08361), 4 N when the base is frozen (no weight gradients), + 2 N with recomputation,
+ 2 N for DPO's reference forward, plus the attention term (k L s h); QLoRA x1.3 (dequantization),
DoRA x1.25. Model FLOPs utilization by GPU from published runs: V100 30% (Megatron-LM, Shoeybi et
al. 2019: 39 TFLOPS of 125 on one V100), A100 45% (Narayanan et al. 2021: 52% at scale, less for
fine-tuning), A10 35%, MI300X 28% (lower than its datasheet suggests in published training
comparisons); lower for small micro-batches and without FlashAttention. Communication: a penalty
growing with log2 of the GPU count, larger across nodes, for ZeRO-3 (1.5x the traffic of data
parallelism, Rajbhandari et al.) and on PCIe, and small for adapters (only their gradients move);
the 1F1B pipeline bubble (p - 1) / (m + p - 1). Plus start-up (loading, checkpointing) minutes.
Duration noise: lognormal (sigma 0.10-0.20 by method), 3% stragglers x1.5-3.

Arrivals: a Poisson process per pool (about 150 jobs a week), thinned by a working-hours pattern
(07-19 UTC weekdays x1.6, nights x0.45, weekends x0.3); a job starts at a step boundary after an
exponential queueing delay and completes `actual_duration` steps' worth later; completions after
the trace's end are not emitted (the truth still covers the job).

Traffic (pool ``cat-a10``, hourly): three apps with two daily peaks (an APAC peak near 03 UTC and a
European one near 13 UTC, in app-specific proportions), their own weekend dip, weekly growth 0%,
+2% and +4% (compounded), a launch (a step up of 30-60% from 08 UTC of a weekday in week 2 or 3)
for one app, a holiday-like weekday (demand x0.5-0.6 for all apps) in weeks 2-4, lognormal
observation noise (sigma 0.06), about 2% of hours missing plus one outage of 3-6 hours, and about
0.6% glitch spikes (x2.5-5). `demand` is the noise-free curve in GPUs (before rounding).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gpualloc.schemas.events import envelope

NAME = "truth_catalogue"
T0 = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
GB = 1e9
SAFETY = 0.90  # a count fits when its peak is at most this share of the GPU's memory
REDRAWS = 3


@dataclass(frozen=True)
class Model:
    name: str
    params_b: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    context: int
    mlp_mats: int = 3  # SwiGLU: gate, up, down; GELU MLPs: 2
    tied: bool = False  # the output layer shares the input embedding


CATALOGUE: dict[str, Model] = {
    m.name: m
    for m in (
        Model("stablelm-2-1.6b", 1.64, 24, 2048, 32, 32, 5632, 100352, 4096),
        Model("stablelm-3b-4e1t", 2.80, 32, 2560, 32, 32, 6912, 50304, 4096),
        Model("phi-3-mini-4k", 3.82, 32, 3072, 32, 32, 8192, 32064, 4096),
        Model("mistral-7b-v0.1", 7.24, 32, 4096, 32, 8, 14336, 32000, 8192),
        Model("falcon-7b", 7.22, 32, 4544, 71, 1, 18176, 65024, 2048, mlp_mats=2),
        Model("olmo-7b", 6.89, 32, 4096, 32, 32, 11008, 50304, 2048),
        Model("deepseek-llm-7b", 6.91, 30, 4096, 32, 32, 11008, 102400, 4096),
        Model("phi-3-medium-4k", 13.96, 40, 5120, 40, 10, 17920, 32064, 4096),
        Model("yi-34b", 34.39, 60, 7168, 56, 8, 20480, 64000, 4096),
        Model("falcon-40b", 41.8, 60, 8192, 128, 8, 32768, 65024, 2048, mlp_mats=2),
        Model("deepseek-llm-67b", 67.4, 95, 8192, 64, 8, 22016, 102400, 4096),
    )
}


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gb: float
    tflops: dict[str, float]  # dense peak by precision
    bandwidth_tbs: float
    mfu: float
    c_intra: float  # communication penalty a doubling inside a node
    c_inter: float  # ... and across nodes
    flash: bool  # FlashAttention kernels exist for it


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        Gpu("v100-32gb", 32, {"fp16": 125, "fp32": 15.7, "tf32": 15.7}, 0.9, 0.30, 0.035, 0.09, False),
        Gpu("a10-24gb", 24, {"bf16": 125, "fp16": 125, "tf32": 62.5, "fp32": 31.2}, 0.6, 0.35, 0.08, 0.12, True),
        Gpu("a100-40gb", 40, {"bf16": 312, "fp16": 312, "tf32": 156, "fp32": 19.5}, 1.555, 0.45, 0.02, 0.05, True),
        Gpu(
            "mi300x-192gb",
            192,
            {"bf16": 1307, "fp16": 1307, "fp8": 2615, "tf32": 653, "fp32": 163},
            5.3,
            0.28,
            0.025,
            0.06,
            True,
        ),
        Gpu(
            "h200-141gb",
            141,
            {"bf16": 989, "fp16": 989, "fp8": 1979, "tf32": 494, "fp32": 67},
            4.8,
            0.40,
            0.02,
            0.05,
            True,
        ),
    )
}


@dataclass(frozen=True)
class PoolSpec:
    name: str
    gpu: str
    gpus: int
    per_node: int
    step_minutes: int
    jobs_a_week: float
    models: dict[str, float]  # model -> weight
    methods: dict[str, float]  # training variant or quantization algorithm -> weight
    precisions: dict[str, float]
    token_scale: float = 1.0  # this pool's users' data sets, relative to the common draw


QUANT = ("awq", "gptq", "smoothquant", "bnb_nf4", "bnb_int8", "fp8", "gguf_k")

POOLS: tuple[PoolSpec, ...] = (
    PoolSpec(
        "cat-a10",
        "a10-24gb",
        64,
        4,
        60,
        150,
        {"stablelm-2-1.6b": 2, "stablelm-3b-4e1t": 1, "phi-3-mini-4k": 3, "mistral-7b-v0.1": 3, "olmo-7b": 1},
        {"qlora": 4, "lora": 3, "ia3": 1, "prompt": 1, "awq": 2, "gptq": 2, "bnb_nf4": 1, "gguf_k": 1},
        {"bf16": 1},
        1.5,
    ),
    PoolSpec(
        "cat-v100",
        "v100-32gb",
        64,
        8,
        60,
        150,
        {
            "stablelm-2-1.6b": 2,
            "stablelm-3b-4e1t": 2,
            "phi-3-mini-4k": 3,
            "falcon-7b": 2,
            "olmo-7b": 2,
            "deepseek-llm-7b": 1,
        },
        {"full": 3, "lora": 4, "adapter": 2, "prefix": 1, "gptq": 2, "bnb_int8": 1},
        {"fp16": 9, "fp32": 1},
    ),
    PoolSpec(
        "cat-a100",
        "a100-40gb",
        64,
        8,
        30,
        150,
        {"mistral-7b-v0.1": 3, "deepseek-llm-7b": 2, "phi-3-medium-4k": 3, "yi-34b": 1, "falcon-40b": 1},
        {"full": 2, "lora": 3, "dora": 2, "dpo": 2, "qlora": 1, "awq": 2, "gptq": 1, "smoothquant": 1},
        {"bf16": 9, "tf32": 1},
        3.0,
    ),
    PoolSpec(
        "cat-mi300x",
        "mi300x-192gb",
        64,
        8,
        30,
        150,
        {"phi-3-medium-4k": 1, "mistral-7b-v0.1": 1, "yi-34b": 3, "falcon-40b": 1, "deepseek-llm-67b": 3},
        {"full": 2, "cpt": 1, "dpo": 2, "lora": 2, "fp8": 2, "gptq": 1, "awq": 1},
        {"bf16": 8, "fp8": 2},
        1.2,
    ),
)

# Duration noise (lognormal sigma) by method
SIGMA = {
    "full": 0.10,
    "cpt": 0.10,
    "lora": 0.12,
    "qlora": 0.15,
    "dora": 0.14,
    "adapter": 0.12,
    "prefix": 0.15,
    "prompt": 0.15,
    "ia3": 0.15,
    "dpo": 0.20,
}
QUANT_SIGMA = 0.18
STRAGGLERS = 0.03


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


# ---- the memory model ---------------------------------------------------------------------------


def _optimizer_bytes(optimizer: str, mixed: bool) -> float:
    """Optimizer state bytes a trained parameter, with the fp32 master copy when `mixed`."""
    # PyTorch's AdamW, SGD and Lion also hold 1.5 bytes of temporaries a parameter in their step
    state = {"adamw": 9.5, "adamw_8bit": 2.0, "adafactor": 0.1, "sgd": 5.5, "lion": 5.5}[optimizer]
    return state + (4.0 if mixed else 0.0)


def _adapter_params(f: dict[str, Any], m: Model) -> float:
    """Trainable parameters of a parameter-efficient method."""
    variant = f["variant"]
    kvd = m.kv_heads * (m.hidden // m.heads)
    if variant in ("lora", "qlora", "dora"):
        r = f["lora_rank"]
        per_layer = r * (6 * m.hidden + 2 * kvd)
        if f["lora_targets"] != "attention":
            per_layer += r * m.mlp_mats * (m.hidden + m.ffn)
        if variant == "dora":
            per_layer += 4 * m.hidden + m.mlp_mats * m.ffn  # magnitude vectors
        return float(per_layer * m.layers)
    if variant == "adapter":  # two bottlenecks of 64 a layer (Houlsby et al. 2019)
        return float(m.layers * 2 * 2 * m.hidden * 64)
    if variant == "prefix":  # 64 virtual tokens of keys and values a layer, through a reparametrization MLP
        return float(m.layers * 2 * 64 * m.hidden + 512 * m.hidden * 2)
    if variant == "prompt":
        return float(64 * m.hidden)
    return float(m.layers * (2 * kvd + m.ffn))  # ia3: three scaling vectors a layer


def training_peak_gb(f: dict[str, Any], m: Model, gpu: Gpu, n: int) -> float:
    """Noise-free peak memory a GPU (GB) of training job `f` on `n` GPUs."""
    variant = f["variant"]
    t, p = f.get("tensor_parallel", 1), f.get("pipeline_parallel", 1)
    d = n // (t * p)
    z = f.get("zero_stage", 0)
    precision = f.get("precision", "bf16")
    mixed = precision not in ("fp32", "tf32")
    wb = 2.0 if mixed else 4.0
    shard = m.params_b * 1e9 / (t * p)
    frozen_base = variant not in ("full", "cpt", "dpo")
    if frozen_base:
        if variant == "qlora":  # NF4 linears; the embeddings (and untied head) upcast to fp32
            embed = (1 if m.tied else 2) * m.vocab * m.hidden / (t * p)
            states = (shard - embed) * 4.127 / 8 + embed * 4
        else:
            states = shard * wb
        if z == 3:
            states /= d
        trainable = _adapter_params(f, m) / (t * p)
        states += trainable * (wb + wb + _optimizer_bytes(f.get("optimizer", "adamw"), mixed))
    else:
        weights = shard * wb * (2 if variant == "dpo" else 1)  # DPO: a frozen reference copy too
        grads = shard * wb
        opt = shard * _optimizer_bytes(f.get("optimizer", "adamw"), mixed)
        states = weights / (d if z >= 3 else 1) + grads / (d if z >= 2 else 1) + opt / (d if z >= 1 else 1)
    s = f["seq_len"] + (64 if variant == "prefix" else 0)
    b = f["micro_batch"] * (2 if variant == "dpo" else 1)
    h, layers = m.hidden, m.layers
    # a layer's saved tensors a token: the residual stream and norms (fp32 under autocast), attention's
    # inputs and outputs, and the MLP's (gate, up, their product: 2.7 bytes a unit a matrix)
    per_layer = s * b * (26.0 * h + 2.7 * m.mlp_mats * m.ffn) / t * (1.0 if mixed else 2.0)
    if not f.get("flash_attention", True):  # bf16 scores and their fp32 softmax
        per_layer += 6.0 * m.heads * s * s * b / t
    factor = {"lora": 1.0, "qlora": 1.2, "dora": 1.05, "adapter": 0.8, "prefix": 0.8, "prompt": 0.8, "ia3": 0.8}
    per_layer *= factor.get(variant, 1.0)
    if f.get("gradient_checkpointing", False):  # the fp32 residual a layer, and one layer recomputed
        activations = layers * 3.5 * s * b * h / t + per_layer
    else:
        activations = layers * per_layer
    # bf16 logits, their fp32 copy and log-softmax for the loss, and the gradient
    logits = s * b * m.vocab * 12.0 / t
    overhead = 1.3 * GB + (0.6 * GB if n > 1 else 0.0)
    return float(1.08 * (states + activations + logits) + overhead) / GB


def quant_peak_gb(f: dict[str, Any], m: Model, n: int) -> float:
    """Noise-free peak memory a GPU (GB) of quantization job `f` on `n` GPUs of one node."""
    algorithm = f["algorithm"]
    weights = 2.0 * m.params_b * 1e9
    samples, s, h = f["calibration_samples"], f["seq_len"], m.hidden
    if algorithm in ("bnb_nf4", "bnb_int8"):  # quantized on load, one fp16 layer at a time, then evaluated
        model = m.params_b * 1e9 * (0.55 if algorithm == "bnb_nf4" else 1.05)
        layer = weights / m.layers
        work = 8 * 2048 * m.vocab * 4.0 + 8 * 2048 * h * 34.0
        return (1.05 * (model / n + layer + work) + 1.3 * GB + (0.6 * GB if n > 1 else 0)) / GB
    inputs = samples * s * h * 2.0 * 2  # the block's inputs and outputs for every sample (fp16)
    if algorithm == "gptq":
        extra = (3 * h * h + m.ffn * m.ffn) * 4.0  # the Hessians of one block's linear layers
    elif algorithm == "awq":
        extra = inputs  # the scale search's re-computed block outputs
    elif algorithm == "smoothquant":
        inputs = samples * h * 4.0 * 2 + s * h * 34.0 * 4  # per-channel maxima, one sample's activations
        extra = 0.0
    elif algorithm == "fp8":
        inputs = 16 * s * h * 34.0  # a batch of calibration forwards
        extra = 0.0
    else:  # gguf_k: importance matrix from a forward pass
        inputs = 8 * s * h * 34.0
        extra = (m.layers * 4 * h + m.layers * m.ffn) * 4.0
    return float(1.05 * (weights / n + inputs + extra) + 1.3 * GB + (0.6 * GB if n > 1 else 0)) / GB


# ---- the throughput model -----------------------------------------------------------------------


def _comm_efficiency(n: int, per_node: int, gpu: Gpu, c_scale: float) -> float:
    inside = math.log2(min(n, per_node))
    across = math.log2(n / per_node) if n > per_node else 0.0
    return 1.0 / (1.0 + c_scale * (gpu.c_intra * inside + gpu.c_inter * across))


def training_seconds(f: dict[str, Any], m: Model, gpu: Gpu, n: int, per_node: int) -> float:
    variant = f["variant"]
    ckpt = f.get("gradient_checkpointing", False)
    frozen_base = variant not in ("full", "cpt", "dpo")
    k = (4.0 if frozen_base else 6.0) + (2.0 if ckpt else 0.0) + (2.0 if variant == "dpo" else 0.0)
    s = f["seq_len"] + (64 if variant == "prefix" else 0)
    flops_a_token = k * m.params_b * 1e9 + k * m.layers * s * m.hidden
    tokens = f["dataset_tokens_m"] * 1e6 * f["epochs"]
    flops = flops_a_token * tokens * {"qlora": 1.3, "dora": 1.25}.get(variant, 1.0)
    precision = f.get("precision", "bf16")
    peak = gpu.tflops.get(precision, gpu.tflops["fp32"]) * 1e12
    mfu = gpu.mfu * (0.85 if precision == "fp8" else 1.0)
    tokens_a_micro = f["micro_batch"] * s
    mfu *= 1.0 - 0.35 * math.exp(-tokens_a_micro / 4096)
    if not f.get("flash_attention", True):
        mfu *= 0.85
    if frozen_base:
        mfu *= 0.9
    t, p = f.get("tensor_parallel", 1), f.get("pipeline_parallel", 1)
    d = n // (t * p)
    c_scale = (0.3 if frozen_base else 1.0) * (1.5 if f.get("zero_stage", 0) == 3 else 1.0)
    c_scale *= 1.0 + 0.5 * math.log2(t)  # tensor parallelism talks every layer
    eff = _comm_efficiency(n, per_node, gpu, c_scale)
    micro = max(1, math.ceil(f["global_batch"] / (f["micro_batch"] * d)))
    bubble = (p - 1) / (micro + p - 1)
    compute = flops / (n * peak * mfu * eff) * (1 + bubble)
    startup = 60 * ((5 + 0.15 * m.params_b) if not frozen_base else (4 + 0.05 * m.params_b))
    return float(compute * 1.03 + startup)  # + 3% evaluation


def quant_seconds(f: dict[str, Any], m: Model, gpu: Gpu, n: int) -> float:
    """Calibration time scaled from the A100 (memory-bound: by bandwidth), plus load, save, evaluation."""
    minutes_a_b = {"gptq": 1.5, "awq": 1.1, "smoothquant": 0.35, "fp8": 0.25, "gguf_k": 0.9, "bnb_nf4": 0.1}
    per_b = minutes_a_b.get(f["algorithm"], 0.1)
    work = f["calibration_samples"] * f["seq_len"] / (128 * 2048)
    if f["algorithm"] in ("bnb_nf4", "bnb_int8"):
        work = 1.0
    calib = per_b * m.params_b * (0.4 + 0.6 * work) * (1.555 / gpu.bandwidth_tbs) * (1 + 0.05 * math.log2(n))
    fixed = 10 + 0.5 * m.params_b  # load, save, perplexity and task checks
    return float(60 * (calib + fixed))


# ---- the jobs -----------------------------------------------------------------------------------


def _training_features(rng: random.Random, pool: PoolSpec, m: Model, variant: str) -> dict[str, Any]:
    gpu = GPUS[pool.gpu]
    big = m.params_b >= 30
    if variant == "cpt":
        seq = min(m.context, 4096)
        tokens = _log_uniform(rng, 100, 1000)
        epochs = 1.0
        global_batch = rng.choice([512, 1024])
    elif variant == "dpo":
        seq = min(m.context, rng.choice([1024, 2048]))
        tokens = _log_uniform(rng, 8, 80)
        epochs = float(rng.choice([1, 1, 2]))
        global_batch = rng.choice([32, 64, 128])
    else:
        seq = min(m.context, rng.choice([512, 1024, 2048, 2048, 4096]))
        tokens = _log_uniform(rng, 5, 150) * (0.6 if big else 1.0)
        epochs = float(rng.choice([1, 2, 2, 3]))
        global_batch = rng.choice([32, 64, 128, 256])
    tokens *= pool.token_scale * (2.0 if m.params_b < 3 else 1.0)
    micro = min(global_batch, rng.choice([1, 2, 4, 8] if seq <= 2048 else [1, 2]))
    precision = _pick(rng, pool.precisions)
    f: dict[str, Any] = {
        "variant": variant,
        "params_b": m.params_b,
        "layers": m.layers,
        "hidden_size": m.hidden,
        "seq_len": seq,
        "dataset_tokens_m": round(tokens, 1),
        "epochs": epochs,
        "global_batch": global_batch,
        "micro_batch": micro,
        "precision": precision,
    }
    if variant in ("lora", "qlora", "dora"):
        f["lora_rank"] = rng.choice([8, 16, 16, 32, 64, 128])
        f["lora_targets"] = rng.choice(["attention", "attention_mlp", "all_linear", "all_linear"])
        if variant == "qlora":
            f["optimizer"] = "adamw_8bit"
    full = variant in ("full", "cpt", "dpo")
    if full:
        f["optimizer"] = _pick(rng, {"adamw": 8, "adamw_8bit": 1, "adafactor": 1, "lion": 1})
        f["zero_stage"] = rng.choice([1, 2, 3, 3]) if m.params_b > 3 else rng.choice([0, 1, 2])
        if big and gpu.memory_gb < 100 or (big and rng.random() < 0.3):
            f["tensor_parallel"] = rng.choice([4, 8])
            f["pipeline_parallel"] = rng.choice([1, 2, 4]) if m.params_b > 50 else rng.choice([1, 2])
            f["zero_stage"] = 1
    elif big and rng.random() < 0.4:
        f["zero_stage"] = 3  # FSDP over the frozen base
    small_gpu = gpu.memory_gb <= 32
    f["gradient_checkpointing"] = rng.random() < (0.85 if small_gpu or full else 0.5)
    f["flash_attention"] = gpu.flash and rng.random() < 0.95
    if variant == "dpo":
        f["reference_model"] = True
    if rng.random() < 0.15 and "optimizer" not in f:
        f["optimizer"] = rng.choice(["adamw_8bit", "lion", "sgd"])
    return f


def _quant_features(rng: random.Random, m: Model, algorithm: str) -> dict[str, Any]:
    bits = {
        "awq": [4, 4, 3],
        "gptq": [4, 4, 3, 8, 2],
        "smoothquant": [8],
        "bnb_nf4": [4],
        "bnb_int8": [8],
        "fp8": [8],
        "gguf_k": [4, 5, 6, 3, 8, 2],
    }[algorithm]
    samples = {"smoothquant": 512, "bnb_nf4": 0, "bnb_int8": 0}.get(algorithm, rng.choice([128, 128, 256, 512]))
    seq = {"awq": 512, "smoothquant": 512}.get(algorithm, rng.choice([2048, 2048, 4096]))
    f: dict[str, Any] = {
        "params_b": m.params_b,
        "algorithm": algorithm,
        "bits": rng.choice(bits),
        "calibration_samples": samples,
        "seq_len": min(seq, m.context),
    }
    if algorithm in ("awq", "gptq"):
        f["group_size"] = rng.choice([32, 64, 128, 128, 128])
    return f


def _counts(pool: PoolSpec, layout: int, limit: int) -> list[int]:
    return [c for c in (1 << k for k in range(limit.bit_length())) if c >= layout and c <= limit]


@dataclass(frozen=True)
class Sized:
    kind: str
    group: str
    model: str
    features: dict[str, Any]
    gpus: int
    peak_gb: float
    median_steps: float
    train_steps: int
    noise_free_gpus: int  # the count without the job's memory noise


def _first(counts: list[int], fits: Callable[[int], bool]) -> int:
    """The smallest of `counts` that fits, else the largest."""
    return next((c for c in counts if fits(c)), counts[-1])


def _size(rng: random.Random, pool: PoolSpec) -> Sized | None:
    """One job of `pool`, at its true count (None: no count holds it after the redraws)."""
    gpu = GPUS[pool.gpu]
    for _ in range(REDRAWS):
        m = CATALOGUE[_pick(rng, pool.models)]
        method = _pick(rng, pool.methods)
        noise = math.exp(rng.gauss(0.0, 0.03))
        if method in QUANT:
            f = _quant_features(rng, m, method)
            counts = _counts(pool, 1, pool.per_node)
            for n in counts:
                peak = quant_peak_gb(f, m, n) * noise
                if peak <= SAFETY * gpu.memory_gb:
                    steps = quant_seconds(f, m, gpu, n) / (60 * pool.step_minutes)
                    clean = _first(counts, lambda c: quant_peak_gb(f, m, c) <= SAFETY * gpu.memory_gb)
                    return Sized("quantization", method, m.name, f, n, peak, steps, f["calibration_samples"], clean)
            continue
        f = _training_features(rng, pool, m, method)
        layout = f.get("tensor_parallel", 1) * f.get("pipeline_parallel", 1)
        counts = _counts(pool, layout, pool.gpus)
        for n in counts:
            peak = training_peak_gb(f, m, gpu, n) * noise
            if peak <= SAFETY * gpu.memory_gb:
                steps = training_seconds(f, m, gpu, n, pool.per_node) / (60 * pool.step_minutes)
                optimizer_steps = math.ceil(
                    f["dataset_tokens_m"] * 1e6 * f["epochs"] / (f["global_batch"] * f["seq_len"])
                )
                clean = _first(counts, lambda c: training_peak_gb(f, m, gpu, c) <= SAFETY * gpu.memory_gb)
                return Sized("training", method, m.name, f, n, peak, steps, optimizer_steps, clean)
    return None


def _arrival_weight(t_hours: float) -> float:
    """The working-hours pattern (UTC): relative arrival rate at `t_hours` after T0."""
    day, hour = divmod(t_hours, 24.0)
    if int(day) % 7 >= 5:
        return 0.3
    return 1.6 if 7 <= hour < 19 else 0.45


PATTERN_MAX = 1.6
PATTERN_MEAN = (5 * (12 * 1.6 + 12 * 0.45) + 2 * 24 * 0.3) / (7 * 24)


def _arrivals(rng: random.Random, hours: float, jobs_a_week: float) -> list[float]:
    """Arrival times (hours from T0) of a Poisson process with the working-hours pattern, by thinning."""
    rate_max = jobs_a_week / 168.0 / PATTERN_MEAN * PATTERN_MAX
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate_max)
        if t >= hours:
            return times
        if rng.random() < _arrival_weight(t) / PATTERN_MAX:
            times.append(t)


# ---- the traffic --------------------------------------------------------------------------------


@dataclass(frozen=True)
class App:
    id: str
    priority: float
    rps_per_gpu: float
    peak_gpus: float  # demand at the shape's top, week 0
    apac: float  # the weight of the APAC peak (near 03 UTC) ...
    eu: float  # ... and of the European one (near 13 UTC)
    floor: float  # the night's share
    weekend: float
    growth: float  # a week, compounded


APPS = (
    App("cat-chat", 6.0, 3.5, 11.0, 0.55, 1.0, 0.25, 0.62, 0.0),
    App("cat-code-assist", 5.0, 12.0, 7.0, 1.0, 0.7, 0.18, 0.40, 0.02),
    App("cat-doc-search", 4.0, 40.0, 4.5, 0.8, 0.9, 0.30, 0.75, 0.04),
)
TRAFFIC_POOL = "cat-a10"


def _bump(hour: float, centre: float, kappa: float) -> float:
    return math.exp(kappa * (math.cos(2 * math.pi * (hour - centre) / 24.0) - 1.0))


def _demand(app: App, step: int, launch: tuple[str, int, float], holiday: tuple[int, float]) -> float:
    day, hour = divmod(step, 24)
    shape = app.floor + (1 - app.floor) * max(app.apac * _bump(hour, 3.0, 4.0), app.eu * _bump(hour, 13.0, 3.0))
    level = app.peak_gpus * shape * (1 + app.growth) ** (step / 168.0)
    if day % 7 >= 5:
        level *= app.weekend
    if day == holiday[0]:
        level *= holiday[1]
    if app.id == launch[0] and step >= launch[1]:
        level *= 1 + launch[2]
    return float(level)


# ---- the trace ----------------------------------------------------------------------------------


def _at(hours: float) -> datetime:
    return T0 + timedelta(seconds=round(hours * 3600))


def trace(seed: int = 0, weeks: int = 4) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(events, truth) for `seed`: the same arguments give the same result, byte for byte."""
    rng = random.Random(seed)
    hours = 168.0 * weeks
    end = _at(hours)
    timed: list[tuple[float, dict[str, Any]]] = []
    truth_jobs: dict[str, Any] = {}
    for pool in POOLS:
        gpu = GPUS[pool.gpu]
        config = {
            "gpus": pool.gpus,
            "gpus_per_node": pool.per_node,
            "horizon": 48,
            "step_minutes": pool.step_minutes,
            "gpu_type": gpu.name,
            "gpu_memory_gb": gpu.memory_gb,
        }
        timed.append((0.0, envelope("pool.configured", config, T0, f"{pool.name}:config:0", pool.name, False)))
    for pool in POOLS:
        prng = random.Random(rng.getrandbits(64))
        gpu = GPUS[pool.gpu]
        step_h = pool.step_minutes / 60.0
        for k, t in enumerate(_arrivals(prng, hours, pool.jobs_a_week * prng.uniform(0.9, 1.1))):
            job = _size(prng, pool)
            if job is None:
                continue
            job_id = f"{pool.name}-{k:05d}"
            sigma = SIGMA.get(job.group, QUANT_SIGMA)
            draw = job.median_steps * math.exp(prng.gauss(0.0, sigma))
            if prng.random() < STRAGGLERS:
                draw *= prng.uniform(1.5, 3.0)
            actual = max(1, math.ceil(draw))
            priority = prng.choice([1.0, 2.0, 2.0, 3.0, 5.0] if job.kind == "training" else [2.0, 3.0])
            submitted = {
                "id": job_id,
                "kind": job.kind,
                "priority": priority,
                "features": job.features,
                "actual_duration": actual,
            }
            timed.append((t, envelope("job.submitted", submitted, _at(t), f"{job_id}:submitted", pool.name, False)))
            wait = prng.expovariate(1.0 / (0.5 + 0.15 * job.gpus))
            start = (math.floor(t / step_h) + 1 + math.floor(wait)) * step_h
            done = start + max(draw, 0.2) * step_h
            if done < hours:
                used = {
                    "gpus": job.gpus,
                    "peak_memory_gb": round(job.peak_gb, 2),
                    "steps": job.train_steps,
                    "duration": actual,
                }
                payload = {"id": job_id, "detail": "finished", "used": used}
                event = envelope("job.completed", payload, _at(done), f"{job_id}:completed", pool.name, False)
                timed.append((done, event))
            truth_jobs[job_id] = {
                "pool": pool.name,
                "kind": job.kind,
                "group": job.group,
                "model": job.model,
                "gpu_type": gpu.name,
                "median_steps": round(job.median_steps, 4),
                "gpus": job.gpus,
                "noise_free_gpus": job.noise_free_gpus,
                "peak_memory_gb": round(job.peak_gb, 2),
            }
    truth_apps = _traffic(random.Random(rng.getrandbits(64)), weeks, timed)
    order = sorted(range(len(timed)), key=lambda i: timed[i][0])
    events = [timed[i][1] for i in order if _at(timed[i][0]) <= end]
    truth = {"generator": NAME, "seed": seed, "jobs": truth_jobs, "apps": truth_apps}
    return events, truth


def _traffic(rng: random.Random, weeks: int, timed: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """Register the apps, observe them every hour; their noise-free demand by step."""
    steps = 168 * weeks
    launch_day = rng.choice([d for d in range(7, 21) if d % 7 < 5])
    launch = (rng.choice(APPS).id, launch_day * 24 + 8, rng.uniform(0.3, 0.6))
    holiday = (rng.choice([d for d in range(7, 28) if d % 7 < 5]), rng.uniform(0.5, 0.6))
    outage_start = rng.randrange(24, max(25, steps - 24))
    outage = range(outage_start, outage_start + rng.randint(3, 6))
    truth: dict[str, Any] = {}
    for app in APPS:
        registered = {
            "id": app.id,
            "priority": app.priority,
            "min_gpus": 1,
            "max_gpus": 32,
            "swap_cap": 4,
            "rps_per_gpu": app.rps_per_gpu,
        }
        event = envelope("app.registered", registered, T0, f"{app.id}:registered", TRAFFIC_POOL, False)
        timed.append((0.0, event))
        demand: dict[str, float] = {}
        for step in range(steps):
            need = _demand(app, step, launch, holiday)
            demand[str(step)] = round(need, 4)
            at = step + rng.uniform(2, 58) / 60.0
            glitch = rng.random() < 0.006
            if rng.random() < 0.02 or step in outage:
                continue
            rps = need * app.rps_per_gpu * math.exp(rng.gauss(0.0, 0.06))
            if glitch:
                rps *= rng.uniform(2.5, 5.0)
            observed = {"app": app.id, "requests_per_s": round(rps, 3)}
            timed.append(
                (at, envelope("traffic.observed", observed, _at(at), f"{app.id}:obs:{step}", TRAFFIC_POOL, False))
            )
        truth[app.id] = {
            "pool": TRAFFIC_POOL,
            "launch": {"step": launch[1], "uplift": round(launch[2], 3)} if app.id == launch[0] else None,
            "holiday_day": holiday[0],
            "demand": demand,
        }
    return truth
