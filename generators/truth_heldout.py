"""Held-out ground truth: a world of four pools, its jobs and its real-time traffic, built from
published sources of its own (docs/ground-truth.md is the interface).

Sources (numbers taken from them; what is not in them is this module's own assumption):

- Model shapes: the Hugging Face `config.json` / model cards of Qwen2.5-0.5B, Qwen2.5-1.5B,
  Qwen2.5-32B, Qwen2.5-72B, SmolLM2-1.7B, Gemma-2-2B, Gemma-2-9B, Phi-3-mini-4k, Mistral-7B-v0.3,
  Mistral-Nemo-12B, OLMo-2-1124-13B, Falcon-40B, Qwen1.5-MoE-A2.7B (14.3B total, 2.7B active,
  24 layers, hidden 2048, 60 experts top-4), DeepSeek-V2-Lite (15.7B total, 2.4B active, 27
  layers, hidden 2048) and Mixtral-8x7B (46.7B total, 12.9B active, 32 layers, hidden 4096).
- Memory: Rajbhandari et al., "ZeRO" (SC 2020): 2 + 2 + 12 bytes a parameter for mixed-precision
  Adam, and what stages 1-3 shard; Korthikanti et al., "Reducing Activation Recomputation in
  Large Transformer Models" (2022): activations a layer, sequence parallelism, the 1F1B pipeline
  keeping p micro-batches in flight (the bytes a layer counted for gated MLPs and the fp32 residual
  of mixed precision, s*b*(26*h + 8*ffn), logits at 12 bytes a vocabulary entry and token, checked
  against real H200 runs: docs/ground-truth.md, "Realism against real runs"); Dettmers et al.,
  "QLoRA" (2023): NF4 with double quantization, about 4.127 bits a parameter, embeddings upcast to
  fp32; Hu et al., "LoRA" (2021);
  Liu et al., "DoRA" (2024); Dettmers et al., "8-bit Optimizers" (2022).
- Throughput: Chowdhery et al., "PaLM" (2022): model FLOPs 6N + 12*L*h*s a token and MFU;
  vendor data sheets for dense peaks (A10 125, L40S 362, H200 989, MI300X 1307 BF16 TFLOPS;
  FP8 twice that on L40S, H200 and MI300X); SemiAnalysis, "MI300X vs H100 vs H200 Benchmark
  Part 1: Training" (Dec 2024) and the reported ~45% of peak reached by MI300X in practice;
  Gale et al., "MegaBlocks" (2023) for the cost of expert routing.
- Quantization: Frantar et al., "GPTQ" (ICLR 2023): a 175B model in about four GPU hours on one
  A100 with 128 x 2048-token C4 samples, layer by layer; Lin et al., "AWQ" (2023); Xiao et al.,
  "SmoothQuant" (2022).
- Durations and stragglers: Weng et al., "MLaaS in the Wild" (NSDI 2022) and Hu et al.,
  "Characterization of LLM Development in the Datacenter" (NSDI 2024): heavy-tailed durations,
  failures and restarts; Lin et al., "Understanding Stragglers in Large Model Training Using
  What-if Analysis" (2025): slow workers stretching synchronous jobs.
- Arrivals: Hu et al., "Characterization and Prediction of Deep Learning Workloads in
  Large-Scale GPU Datacenters" (SC 2021): submissions follow the working day and week.
- Traffic: Wang et al., "BurstGPT" (2024) and Patel et al., "Splitwise" (ISCA 2024): LLM serving
  load with diurnal and weekly periodicity per region; national holidays of 2026 (Japan's Coming
  of Age Day on 12 January, the US Martin Luther King Jr. Day on 19 January).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

from gpualloc.schemas.events import parse_event

GENERATOR = "truth_heldout"
T0 = datetime(2026, 1, 5, tzinfo=timezone.utc)
GB = 1e9


# ---- the models ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    name: str
    params_b: float
    active_b: float | None  # mixture of experts: parameters a token
    layers: int
    hidden: int
    heads: int
    vocab: int
    ffn: int = 0  # the MLP's width a token (mixture of experts: of the experts a token visits); 0: 3.5 x hidden
    tied: bool = False  # the output layer shares the input embedding


MODELS = {
    m.name: m
    for m in (
        Model("qwen2.5-0.5b", 0.49, None, 24, 896, 14, 151936, 4864, True),
        Model("qwen2.5-1.5b", 1.54, None, 28, 1536, 12, 151936, 8960, True),
        Model("smollm2-1.7b", 1.71, None, 24, 2048, 32, 49152, 8192, True),
        Model("gemma-2-2b", 2.61, None, 26, 2304, 8, 256000, 9216, True),
        Model("phi-3-mini", 3.82, None, 32, 3072, 32, 32064, 8192),
        Model("mistral-7b", 7.25, None, 32, 4096, 32, 32768, 14336),
        Model("gemma-2-9b", 9.24, None, 42, 3584, 16, 256000, 14336, True),
        Model("mistral-nemo-12b", 12.2, None, 40, 5120, 32, 131072, 14336),
        Model("olmo-2-13b", 13.7, None, 40, 5120, 40, 100352, 13824),
        Model("qwen1.5-moe-a2.7b", 14.3, 2.7, 24, 2048, 16, 151936, 4 * 1408 + 5632),  # top-4 + shared
        Model("deepseek-v2-lite", 15.7, 2.4, 27, 2048, 16, 102400, 8 * 1408),  # 6 routed + 2 shared
        Model("qwen2.5-32b", 32.5, None, 64, 5120, 40, 152064, 27648),
        Model("falcon-40b", 41.8, None, 60, 8192, 128, 65024, 32768),
        Model("mixtral-8x7b", 46.7, 12.9, 32, 4096, 32, 32000, 2 * 14336),  # top-2
        Model("qwen2.5-72b", 72.7, None, 80, 8192, 64, 152064, 29568),
    )
}


# ---- the hardware -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    type: str
    memory_gb: float
    bf16_tflops: float
    fp8_tflops: float  # the bf16 rate where there is no fp8
    fp32_tflops: float
    tf32_tflops: float
    mfu: float  # model FLOPs utilisation reached by a well-sized dense job
    intra_gbps: float  # GB/s a GPU inside a node (PCIe or the vendor's fabric)
    inter_gbps: float  # GB/s a GPU across nodes
    tp_cost: float  # slowdown per doubling of tensor parallelism
    context_gb: float  # runtime context and libraries
    quant_speed: float  # layer-wise quantization speed relative to an A100


GPUS = {
    g.type: g
    for g in (
        Gpu("a10-24gb", 24.0, 125.0, 125.0, 31.2, 62.5, 0.33, 20.0, 9.0, 0.30, 1.1, 0.45),
        Gpu("l40s-48gb", 48.0, 362.0, 733.0, 91.6, 183.0, 0.29, 22.0, 10.0, 0.28, 1.2, 0.85),
        Gpu("mi300x-192gb", 192.0, 1307.0, 2615.0, 163.4, 653.7, 0.23, 260.0, 40.0, 0.09, 2.1, 1.6),
        Gpu("h200-141gb", 141.0, 989.0, 1979.0, 67.0, 494.0, 0.40, 330.0, 45.0, 0.07, 1.4, 2.2),
    )
}


@dataclass(frozen=True)
class PoolSpec:
    name: str
    gpu: str
    per_node: int
    step_minutes: int
    tz: int  # the submitting team's UTC offset in January, hours
    weekly_jobs: float
    mix: tuple[tuple[float, str, str, tuple[str, ...]], ...]  # (weight, kind, group, models)


SMALL = ("qwen2.5-0.5b", "qwen2.5-1.5b", "smollm2-1.7b", "gemma-2-2b", "phi-3-mini")
MID = ("mistral-7b", "gemma-2-9b", "mistral-nemo-12b", "olmo-2-13b")
MOE = ("qwen1.5-moe-a2.7b", "deepseek-v2-lite", "mixtral-8x7b")
BIG = ("qwen2.5-32b", "falcon-40b", "qwen2.5-72b")

POOLS = (
    PoolSpec(
        "tallinn-a10",
        "a10-24gb",
        4,
        30,
        2,
        160.0,
        (
            (30, "training", "qlora", SMALL + MID + ("qwen1.5-moe-a2.7b",)),
            (20, "training", "lora", SMALL + ("mistral-7b",)),
            (8, "training", "ia3", SMALL + ("mistral-7b",)),
            (7, "training", "prompt", SMALL + ("mistral-7b",)),
            (8, "training", "full", ("qwen2.5-0.5b", "qwen2.5-1.5b", "smollm2-1.7b")),
            (15, "quantization", "gptq", SMALL + MID),
            (12, "quantization", "bnb_nf4", SMALL + MID),
        ),
    ),
    PoolSpec(
        "osaka-l40s",
        "l40s-48gb",
        4,
        30,
        9,
        140.0,
        (
            (22, "training", "lora", SMALL + MID + MOE[:2]),
            (16, "training", "dora", SMALL + MID),
            (18, "training", "full", SMALL + ("mistral-7b",)),
            (8, "training", "adapter", SMALL + MID),
            (6, "training", "prefix", SMALL + MID),
            (16, "quantization", "awq", SMALL + MID + MOE[:2]),
            (14, "quantization", "gguf_k", SMALL + MID + MOE),
        ),
    ),
    PoolSpec(
        "quebec-mi300x",
        "mi300x-192gb",
        8,
        60,
        -5,
        135.0,
        (
            (24, "training", "full", MID + MOE + ("qwen2.5-32b",)),
            (14, "training", "cpt", MID + MOE + BIG),
            (22, "training", "dpo", MID + MOE + BIG),
            (14, "training", "lora", MID + MOE + BIG),
            (12, "quantization", "fp8", MID + MOE + BIG),
            (10, "quantization", "smoothquant", MID + MOE + BIG),
        ),
    ),
    PoolSpec(
        "frankfurt-h200",
        "h200-141gb",
        8,
        60,
        1,
        125.0,
        (
            (20, "training", "dpo", MID + MOE),
            (16, "training", "qlora", MID + MOE + BIG),
            (20, "quantization", "fp8", MID + MOE + BIG),
            (22, "quantization", "awq", MID + MOE + BIG),
            (14, "quantization", "gptq", MID + MOE + BIG),
        ),
    ),
)
POOL_GPUS = 64
HORIZON = 48
MARGIN = 0.94  # a count fits when its peak stays under this share of the GPU's memory


# ---- memory -------------------------------------------------------------------------------------


def _weight_bytes(precision: str) -> float:
    return 4.0 if precision in ("fp32", "tf32") else 2.0


def _optimizer_bytes(optimizer: str, mixed: bool) -> float:
    """State a trainable parameter keeps beside its weight and gradient (ZeRO; 8-bit optimizers)."""
    master = 4.0 if mixed else 0.0
    # PyTorch's AdamW, SGD and Lion hold 1.5 bytes of temporaries a parameter in their step
    state = {"adamw": 9.5, "adamw_8bit": 2.0, "adafactor": 0.3, "sgd": 5.5, "lion": 5.5}[optimizer]
    return master + state


def _trainable(f: dict[str, Any], m: Model) -> float:
    """Trainable parameters of a method (absolute count)."""
    v, h, layers = f["variant"], m.hidden, m.layers
    if v in ("full", "cpt", "dpo"):
        return m.params_b * 1e9
    if v in ("lora", "qlora", "dora"):
        experts = m.params_b / m.active_b if m.active_b else 1.0
        per_layer = {"attention": 6.5 * h, "attention_mlp": 6.5 * h + 13.5 * h * experts}
        targets = f.get("lora_targets") or "attention"
        width = per_layer.get(targets, 6.5 * h + 13.5 * h * experts)
        extra = (h + m.vocab) * f["lora_rank"] if targets == "all_linear" else 0.0
        magnitude = layers * 7 * h if v == "dora" else 0.0
        return float(layers * width * f["lora_rank"] + extra + magnitude)
    if v == "adapter":
        return float(layers * 2 * 2 * h * 64)
    if v == "prefix":
        return float(layers * 2 * 30 * h + 30 * h * h // 8)
    if v == "prompt":
        return float(20 * h)
    return float(layers * 6 * h)  # ia3


def _train_peak_gb(f: dict[str, Any], m: Model, g: Gpu, n: int, act_noise: float) -> float:
    tp, pp = f.get("tensor_parallel", 1), f.get("pipeline_parallel", 1)
    mp = tp * pp
    d = n // mp
    zero = f.get("zero_stage", 0)
    prec = f.get("precision", "bf16")
    mixed = prec not in ("fp32", "tf32")
    p = m.params_b * 1e9
    v = f["variant"]
    wb = _weight_bytes(prec)
    train = _trainable(f, m)
    if v in ("full", "cpt", "dpo"):
        weights, grads = p * wb / mp, p * wb / mp
        opt = p * _optimizer_bytes(f.get("optimizer", "adamw"), mixed) / mp
        if zero >= 1:
            opt /= d
        if zero >= 2:
            grads /= d
        if zero >= 3:
            weights = weights / d + 2 * p / m.layers * wb / tp  # plus two gathered layers
        ref = (p * 2.0 / mp / (d if zero >= 3 else 1)) if f.get("reference_model") else 0.0
        static = weights + grads + opt + ref
    else:
        if v == "qlora":  # NF4 linears; the embeddings (and an untied head) upcast to fp32
            embed = min(p, (1 if m.tied else 2) * m.vocab * m.hidden)
            frozen = ((p - embed) * 0.516 + embed * 4.0) / mp
        else:
            frozen = p * wb / mp
        if zero >= 3:
            frozen = frozen / d + 2 * p / m.layers * 2.0 / tp
        dequant = 2 * p / m.layers * 2.0 / tp if v == "qlora" else 0.0
        static = frozen + dequant + train * (wb + wb + _optimizer_bytes(f.get("optimizer", "adamw"), mixed)) / mp
    s = f["seq_len"] + (20 if v == "prompt" else 30 if v == "prefix" else 0)
    b = f["micro_batch"]
    h = m.hidden
    # saved a token and layer: the residual stream and norms (fp32 under autocast), attention's inputs
    # and outputs (26 bytes a hidden unit), the MLP's gate, up and product (8 bytes a unit)
    per_layer = s * b * (26.0 * h + 8.0 * (m.ffn or 3.5 * h))
    if not f.get("flash_attention", True):  # bf16 scores and their fp32 softmax
        per_layer += 6.0 * m.heads * s * s * b
    if prec in ("fp32", "tf32"):
        per_layer *= 2.0
    elif prec == "fp8":
        per_layer *= 0.8
    if m.active_b:
        per_layer *= 1.4  # routing buffers, top-k copies of tokens
    if v == "qlora":
        per_layer *= 1.2  # fp32 norms and residual after the k-bit preparation, dequantized weights
    elif v == "dora":
        per_layer *= 1.05
    elif v not in ("full", "cpt", "dpo", "lora"):
        per_layer *= 0.9
    if v == "dpo":
        per_layer *= 2.0  # chosen and rejected side by side
    stage_layers = m.layers / pp
    in_flight = min(pp, max(1, f["global_batch"] // (b * d))) if pp > 1 else 1
    if f.get("gradient_checkpointing"):
        pairs = 2.0 if v == "dpo" else 1.0
        act = (stage_layers * in_flight * 3.5 * s * b * pairs * h + per_layer) / tp  # the fp32 residual a layer
    else:
        act = stage_layers * in_flight * per_layer / tp
    # bf16 logits, their fp32 copy and log-softmax for the loss, the gradient (DPO: both sequences)
    logits = s * b * m.vocab * 12.0 * (2.0 if v == "dpo" else 1.0) / tp
    dynamic = (act + logits) * act_noise
    return float((static * 1.02 + dynamic) * 1.07 / GB + g.context_gb)


def _quant_peak_gb(f: dict[str, Any], m: Model, g: Gpu, n: int, act_noise: float) -> float:
    p = m.params_b * 1e9
    h = m.hidden
    algo = f["algorithm"]
    tokens = f.get("calibration_samples", 128) * f.get("seq_len", 2048)
    layer = p / m.layers * 2.0
    inter = 3.5 * h * (m.params_b / m.active_b if m.active_b else 1.0)
    if algo in ("gptq", "awq"):  # layer by layer, the rest of the model in host memory
        hessians = 4.0 * (h * h + inter * inter / max(1.0, inter / h)) if algo == "gptq" else 0.0
        cache = tokens * h * 2.0 * (2.0 if algo == "gptq" else 3.0)
        static = layer * 2 + hessians
        dynamic = cache + f.get("seq_len", 2048) * inter * 2.0 * 8
        split = float(n)
    elif algo in ("bnb_nf4", "bnb_int8"):
        static = p * f["bits"] / 8.0 + layer
        dynamic = 4096 * h * 34.0
        split = float(n)
    else:  # fp8, smoothquant, gguf_k: the whole model in bf16 across the GPUs
        static = p * 2.0 + layer * n
        dynamic = min(tokens, 8 * f.get("seq_len", 2048)) * h * 34.0 * (1.4 if m.active_b else 1.0)
        split = float(n)
    return float(((static / split) * 1.02 + dynamic * act_noise) * 1.06 / GB + g.context_gb)


# ---- time ---------------------------------------------------------------------------------------


def _peak_flops(g: Gpu, precision: str) -> float:
    return 1e12 * {"fp8": g.fp8_tflops, "fp32": g.fp32_tflops, "tf32": g.tf32_tflops}.get(precision, g.bf16_tflops)


def _train_seconds(f: dict[str, Any], m: Model, g: Gpu, pool: PoolSpec, n: int) -> float:
    v = f["variant"]
    tp, pp = f.get("tensor_parallel", 1), f.get("pipeline_parallel", 1)
    d = n // (tp * pp)
    prec = f.get("precision", "bf16")
    n_act = (m.active_b or m.params_b) * 1e9
    s = f["seq_len"]
    tokens = f["dataset_tokens_m"] * 1e6 * f["epochs"]
    full = v in ("full", "cpt", "dpo")
    k = 6.0 if full else 4.0
    attn = 12.0 * m.layers * m.hidden * s * (1.0 if full else 2.0 / 3.0)
    if f.get("gradient_checkpointing"):
        k += 2.0
        attn *= 4.0 / 3.0
    if v == "dpo" and f.get("reference_model"):
        k += 2.0
    if v in ("prompt", "prefix"):
        tokens *= 1.0 + 25.0 / s
    per_token = k * n_act + attn
    eff = g.mfu * min(1.0, (m.hidden / 4096.0) ** 0.35)
    if prec == "fp8":
        eff *= 0.7
    elif prec in ("fp32", "tf32"):
        eff *= 1.3
    if not f.get("flash_attention", True):
        eff *= 0.85
    eff *= {"qlora": 0.68, "dora": 0.8, "ia3": 0.9}.get(v, 1.0)
    if m.active_b:
        eff *= 0.7
    rate = _peak_flops(g, prec) * eff
    b = f["micro_batch"]
    usable = min(d, max(1, f["global_batch"] // b))  # replicas the global batch can feed
    compute = tokens * per_token / (usable * tp * pp * rate)
    compute *= 1.0 + g.tp_cost * math.log2(tp)
    micro = max(1, f["global_batch"] // (b * usable))
    if pp > 1:
        compute *= 1.0 + (pp - 1) / micro
    steps = max(1.0, tokens / (f["global_batch"] * s))
    comm = 0.0
    if d > 1:
        grad_bytes = _trainable(f, m) * 2.0 / (tp * pp)
        bw = (g.intra_gbps if n <= pool.per_node else g.inter_gbps) * GB
        comm = steps * 2.0 * (d - 1) / d * grad_bytes / bw * (1.5 if f.get("zero_stage", 0) >= 3 else 1.0)
    exposed = max(0.3 * comm, comm - compute)
    load = 300.0 + m.params_b * 2.0 / 1.5  # image, then the weights at 1.5 GB/s
    saves = math.ceil(f["epochs"]) + 1
    ckpt = saves * m.params_b * (14.0 if full else 2.0) / (1.2 * max(1, n // pool.per_node))
    evaluation = 240.0 + 2.0 * n_act * 2e6 / (n * rate)
    return float(compute + exposed + load + ckpt + evaluation)


def _quant_seconds(f: dict[str, Any], m: Model, g: Gpu, n: int) -> float:
    algo = f["algorithm"]
    tokens = f.get("calibration_samples", 128) * f.get("seq_len", 2048)
    ratio = tokens / 262144.0
    gptq_a100 = 82.0 * m.params_b * (0.35 + 0.65 * ratio**0.8)  # GPTQ: 175B in ~4 GPU hours
    if f.get("group_size") is not None and f["group_size"] <= 64:
        gptq_a100 *= 1.15
    if m.active_b:
        gptq_a100 *= 1.25
    base = {
        "gptq": gptq_a100,
        "awq": 0.6 * gptq_a100,
        "smoothquant": 0.15 * gptq_a100,
        "fp8": 0.1 * gptq_a100,
        "bnb_nf4": 0.03 * gptq_a100,
        "bnb_int8": 0.03 * gptq_a100,
        "gguf_k": 0.25 * gptq_a100 + 40.0 * m.params_b * (1.0 + 0.1 * (8 - f["bits"])),  # k-quants on the CPU
    }[algo]
    speed = g.quant_speed * (min(n, 4) ** 0.5 if algo in ("fp8", "smoothquant", "gguf_k") else 1.0)
    io = 420.0 + m.params_b * 2.0 / 1.0 + m.params_b * f["bits"] / 8.0 / 0.8  # download, load, save
    n_act = (m.active_b or m.params_b) * 1e9
    # the quantized model's evaluation: perplexity and a task suite, decoding-heavy
    evaluation = 900.0 + 2.0 * n_act * 2.5e7 / (n * _peak_flops(g, "bf16") * g.mfu * 0.5)
    return float(base / speed + io + evaluation)


# ---- noise --------------------------------------------------------------------------------------

_UNIFORM = [(i + 0.5) / 32 for i in range(32)]
_PARETO_Q = [(i + 0.5) / 64 for i in range(64)]
STRAGGLE = (math.log(1.25), math.log(2.4))
RESTART_ALPHA = 1.3


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@lru_cache(maxsize=None)
def _log_median(sigma: float, p_straggle: float, p_restart: float) -> float:
    """Median of log(duration multiplier): body lognormal, stragglers, restarts (a mixture)."""
    lo, hi = STRAGGLE
    shifts = [lo + (hi - lo) * u for u in _UNIFORM]
    restarts = [math.log(1.0 + 0.25 * q ** (-1.0 / RESTART_ALPHA)) for q in _PARETO_Q]

    def cdf(x: float) -> float:
        body = _phi(x / sigma)
        slow = sum(_phi((x - u) / sigma) for u in shifts) / len(shifts)
        rest = sum(_phi((x - u) / sigma) for u in restarts) / len(restarts)
        return (1.0 - p_straggle - p_restart) * body + p_straggle * slow + p_restart * rest

    a, b = -3.0, 3.0
    for _ in range(60):
        mid = (a + b) / 2
        if cdf(mid) < 0.5:
            a = mid
        else:
            b = mid
    return (a + b) / 2


def _draw_log_multiplier(rng: random.Random, sigma: float, p_straggle: float, p_restart: float) -> float:
    x = rng.gauss(0.0, sigma)
    u = rng.random()
    if u < p_straggle:
        x += rng.uniform(*STRAGGLE)
    elif u < p_straggle + p_restart:
        x += math.log(1.0 + 0.25 * (1.0 - rng.random()) ** (-1.0 / RESTART_ALPHA))
    return x


# ---- features -----------------------------------------------------------------------------------


def _pick(rng: random.Random, options: tuple[Any, ...], weights: tuple[float, ...] | None = None) -> Any:
    return rng.choices(options, weights=weights)[0]


def _training_features(rng: random.Random, variant: str, m: Model, g: Gpu) -> dict[str, Any]:
    big = m.params_b > 20
    fp8_ok = g.fp8_tflops > g.bf16_tflops
    f: dict[str, Any] = {"variant": variant, "params_b": m.params_b}
    if m.active_b:
        f["active_params_b"] = m.active_b
    f["layers"], f["hidden_size"] = m.layers, m.hidden
    if variant == "cpt":
        f["seq_len"] = _pick(rng, (4096, 8192), (0.6, 0.4))
        f["dataset_tokens_m"] = round(
            math.exp(rng.uniform(math.log(300), math.log(4000))) / max(1.0, m.params_b / 10), 1
        )
        f["epochs"] = 1.0
        f["global_batch"] = _pick(rng, (128, 256, 512))
    elif variant == "dpo":
        f["seq_len"] = _pick(rng, (1024, 2048, 4096), (0.35, 0.5, 0.15))
        f["dataset_tokens_m"] = round(math.exp(rng.uniform(math.log(8), math.log(120))), 2)
        f["epochs"] = _pick(rng, (1.0, 2.0, 3.0), (0.5, 0.35, 0.15))
        f["global_batch"] = _pick(rng, (32, 64, 128))
    elif variant == "full":
        f["seq_len"] = _pick(rng, (1024, 2048, 4096), (0.3, 0.5, 0.2))
        f["dataset_tokens_m"] = round(math.exp(rng.uniform(math.log(20), math.log(600))) / max(1.0, m.params_b / 3), 2)
        f["epochs"] = _pick(rng, (1.0, 2.0, 3.0, 4.0), (0.3, 0.35, 0.25, 0.1))
        f["global_batch"] = _pick(rng, (32, 64, 128, 256))
    elif variant in ("lora", "qlora", "dora"):
        f["seq_len"] = _pick(rng, (512, 1024, 2048, 4096), (0.15, 0.4, 0.35, 0.1))
        f["dataset_tokens_m"] = round(math.exp(rng.uniform(math.log(4), math.log(160))) / max(1.0, m.params_b / 8), 2)
        f["epochs"] = _pick(rng, (1.0, 2.0, 3.0, 5.0), (0.25, 0.35, 0.3, 0.1))
        f["global_batch"] = _pick(rng, (16, 32, 64, 128))
    else:  # ia3, prompt, prefix, adapter
        f["seq_len"] = _pick(rng, (512, 1024, 2048), (0.3, 0.5, 0.2))
        f["dataset_tokens_m"] = round(math.exp(rng.uniform(math.log(3), math.log(60))), 2)
        f["epochs"] = _pick(rng, (2.0, 3.0, 5.0, 10.0), (0.3, 0.35, 0.25, 0.1))
        f["global_batch"] = _pick(rng, (16, 32, 64))
    f["micro_batch"] = min(f["global_batch"], _pick(rng, (1, 2, 4, 8), (0.3, 0.35, 0.25, 0.1)))
    if f["seq_len"] >= 4096:
        f["micro_batch"] = min(f["micro_batch"], 2)
    if variant != "qlora":
        precs: tuple[str, ...] = ("bf16", "fp16", "fp8") if fp8_ok and variant in ("full", "cpt") else ("bf16", "fp16")
        weights: tuple[float, ...] = (0.75, 0.1, 0.15) if len(precs) == 3 else (0.88, 0.12)
        if m.params_b < 2 and variant in ("full", "lora") and rng.random() < 0.08:
            precs, weights = ("tf32",), (1.0,)
        f["precision"] = _pick(rng, precs, weights)
    if variant in ("full", "cpt", "dpo"):
        f["optimizer"] = _pick(rng, ("adamw", "adamw_8bit", "adafactor", "lion"), (0.7, 0.15, 0.1, 0.05))
        f["zero_stage"] = _pick(rng, (0, 1, 2, 3), (0.1, 0.15, 0.35, 0.4) if m.params_b > 3 else (0.4, 0.2, 0.3, 0.1))
        if variant == "dpo":
            f["reference_model"] = rng.random() < 0.85
    else:
        f["optimizer"] = _pick(rng, ("adamw", "adamw_8bit"), (0.75, 0.25))
        if m.params_b > 9 and variant != "qlora" and rng.random() < 0.5:
            f["zero_stage"] = 3
    if variant in ("lora", "qlora", "dora"):
        f["lora_rank"] = _pick(rng, (8, 16, 32, 64, 128), (0.15, 0.3, 0.25, 0.2, 0.1))
        f["lora_targets"] = _pick(rng, ("attention", "attention_mlp", "all_linear"), (0.3, 0.35, 0.35))
    f["gradient_checkpointing"] = rng.random() < (0.75 if (big or variant in ("cpt", "dpo")) else 0.45)
    if rng.random() < 0.06:
        f["flash_attention"] = False
    if big and variant in ("full", "cpt") and rng.random() < 0.6:
        f["tensor_parallel"] = _pick(rng, (2, 4, 8), (0.3, 0.4, 0.3))
        f["zero_stage"] = min(f.get("zero_stage", 1), 1)
        if rng.random() < 0.4:
            f["pipeline_parallel"] = 2
    elif m.active_b and variant == "cpt" and rng.random() < 0.5:
        f["tensor_parallel"] = 2
    return f


def _quant_features(rng: random.Random, algo: str, m: Model) -> dict[str, Any]:
    bits = {
        "gptq": _pick(rng, (2, 3, 4, 8), (0.05, 0.15, 0.65, 0.15)),
        "awq": _pick(rng, (3, 4), (0.15, 0.85)),
        "gguf_k": _pick(rng, (2, 3, 4, 5, 6, 8), (0.08, 0.15, 0.35, 0.2, 0.12, 0.1)),
        "bnb_nf4": 4,
    }.get(algo, 8)
    f: dict[str, Any] = {"params_b": m.params_b, "algorithm": algo, "bits": bits}
    if algo in ("gptq", "awq", "smoothquant", "fp8"):
        f["calibration_samples"] = _pick(rng, (128, 256, 512, 1024), (0.45, 0.25, 0.2, 0.1))
        f["seq_len"] = _pick(rng, (512, 2048, 4096), (0.2, 0.6, 0.2))
    elif algo == "gguf_k":
        f["calibration_samples"] = _pick(rng, (0, 128, 512), (0.3, 0.4, 0.3))
        f["seq_len"] = 512
    else:
        f["calibration_samples"] = 0
    if algo in ("gptq", "awq", "gguf_k") and rng.random() < 0.8:
        f["group_size"] = _pick(rng, (32, 64, 128), (0.15, 0.25, 0.6))
    return f


# ---- jobs ---------------------------------------------------------------------------------------


def _arrival_shape(tz: int) -> list[float]:
    """Relative submission rate for each hour of the week (UTC, from Monday 00:00)."""
    rates = []
    for hour in range(168):
        local = hour + tz
        day, clock = (local // 24) % 7, local % 24
        day_factor = (1.0, 1.05, 1.05, 1.0, 0.8, 0.2, 0.15)[day]
        if 9 <= clock < 12 or 13 <= clock < 18:
            clock_factor = 2.6
        elif 12 <= clock < 13 or 18 <= clock < 22:
            clock_factor = 1.3
        else:
            clock_factor = 0.35
        rates.append(day_factor * clock_factor)
    total = sum(rates)
    return [r / total for r in rates]


def _smallest_fit(peak: Any, start: int, memory: float) -> tuple[int, float] | None:
    n = start
    while n <= POOL_GPUS // 2 or n == start:
        value = float(peak(n))
        if value <= memory * MARGIN:
            return n, value
        n *= 2
    return None


def _fit_training(f: dict[str, Any], m: Model, g: Gpu, act_noise: float) -> tuple[int, float] | None:
    """The smallest count that holds the job; a submitter whose job holds at none first turns on
    checkpointing, then halves the micro-batch, then shards with ZeRO-3 (the features change)."""
    start = f.get("tensor_parallel", 1) * f.get("pipeline_parallel", 1)
    for _ in range(6):
        fit = _smallest_fit(lambda n: _train_peak_gb(f, m, g, n, act_noise), start, g.memory_gb)
        if fit is not None:
            return fit
        if not f.get("gradient_checkpointing"):
            f["gradient_checkpointing"] = True
        elif f["micro_batch"] > 1:
            f["micro_batch"] //= 2
        elif f.get("zero_stage", 0) < 3 and start == 1:
            f["zero_stage"] = 3
        else:
            return None
    return None


def _jobs(
    seed: int, weeks: int, pool: PoolSpec, events: list[tuple[datetime, int, dict[str, Any]]], truth: dict[str, Any]
) -> None:
    rng = random.Random(f"{GENERATOR}:{seed}:{pool.name}")
    g = GPUS[pool.gpu]
    step_s = pool.step_minutes * 60.0
    shape = _arrival_shape(pool.tz)
    weights = tuple(w for w, _, _, _ in pool.mix)
    count = 0
    for hour in range(weeks * 168):
        lam = pool.weekly_jobs * shape[hour % 168]
        arrivals = _poisson(rng, lam)
        for at in sorted(rng.random() * 3600.0 for _ in range(arrivals)):
            _, kind, group, models = pool.mix[rng.choices(range(len(pool.mix)), weights=weights)[0]]
            m = MODELS[_pick(rng, models)]
            act_noise = math.exp(rng.gauss(0.0, 0.05))
            if kind == "training":
                f = _training_features(rng, group, m, g)
                fit = _fit_training(f, m, g, act_noise)
            else:
                f = _quant_features(rng, group, m)
                fit = _smallest_fit(lambda n: _quant_peak_gb(f, m, g, n, act_noise), 1, g.memory_gb)
            if fit is None:
                continue  # no count of this pool holds it: never submitted
            gpus, peak = fit
            if kind == "training":
                seconds = _train_seconds(f, m, g, pool, gpus)
                sigma = 0.2 if group in ("cpt", "dpo") else 0.16
                p_straggle = min(0.25, 0.03 + 0.025 * math.log2(gpus))
                p_restart = 0.03 if seconds > 6 * 3600 else 0.015
            else:
                seconds = _quant_seconds(f, m, g, gpus)
                sigma, p_straggle, p_restart = 0.11, 0.02, 0.01
            log_x = _draw_log_multiplier(rng, sigma, p_straggle, p_restart)
            median_steps = seconds * math.exp(_log_median(sigma, p_straggle, p_restart)) / step_s
            actual = max(1, math.ceil(seconds * math.exp(log_x) / step_s))
            if actual > 100_000:
                continue
            count += 1
            job_id = f"{pool.name}-{count:05d}"
            submitted = T0 + timedelta(seconds=int(hour * 3600 + at))
            queued = timedelta(seconds=int(60 * math.exp(rng.gauss(math.log(35.0), 1.1))))
            finished = submitted + queued + timedelta(seconds=actual * step_s)
            peak_gb = round(peak, 2)
            priority = round(rng.choice((1.0, 2.0, 3.0, 5.0)) if kind == "training" else 2.0, 1)
            events.append(
                (
                    submitted,
                    1,
                    _envelope(
                        f"{job_id}:submitted",
                        "job.submitted",
                        submitted,
                        pool.name,
                        {
                            "id": job_id,
                            "kind": kind,
                            "priority": priority,
                            "features": f,
                            "actual_duration": actual,
                        },
                    ),
                )
            )
            used: dict[str, Any] = {"gpus": gpus, "peak_memory_gb": peak_gb, "duration": actual}
            if kind == "training":
                used["steps"] = max(
                    1, math.ceil(f["dataset_tokens_m"] * 1e6 * f["epochs"] / (f["global_batch"] * f["seq_len"]))
                )
            else:
                used["steps"] = f.get("calibration_samples", 128)
            events.append(
                (
                    finished,
                    1,
                    _envelope(
                        f"{job_id}:completed",
                        "job.completed",
                        finished,
                        pool.name,
                        {"id": job_id, "detail": "exited 0", "used": used},
                    ),
                )
            )
            truth["jobs"][job_id] = {
                "pool": pool.name,
                "kind": kind,
                "group": group,
                "gpu_type": g.type,
                "median_steps": round(median_steps, 4),
                "gpus": gpus,
                "peak_memory_gb": peak_gb,
            }


def _poisson(rng: random.Random, lam: float) -> int:
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p < limit:
            return k
        k += 1


# ---- traffic ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class App:
    id: str
    tz: int
    base: float  # GPUs at the daily mean of a weekday, week 0
    peaks: tuple[tuple[float, float, float], ...]  # (local hour, height, width in hours)
    night: float
    weekend: float
    weekly_growth: float
    rps_per_gpu: float | None  # observed as requests_per_s when set, else as gpus
    launch: tuple[int, float] | None  # (step, level after it)
    holiday: tuple[int, float] | None  # (local day index from T0, factor)
    gap: tuple[int, int] | None  # steps [from, to) with no observation
    priority: float
    min_gpus: int
    max_gpus: int
    swap_cap: int
    with_profile: bool


APPS = (
    App(
        "chat-eu",
        1,
        9.0,
        ((11.0, 0.9, 2.5), (20.5, 1.1, 2.0)),
        0.35,
        0.7,
        -0.008,
        3.2,
        None,
        None,
        (500, 506),
        40.0,
        3,
        24,
        3,
        True,
    ),
    App(
        "code-us",
        -8,
        6.5,
        ((10.0, 1.2, 2.0), (15.0, 1.0, 2.5)),
        0.2,
        0.3,
        0.03,
        None,
        None,
        (14, 0.45),
        (300, 314),
        30.0,
        2,
        20,
        3,
        False,
    ),
    App(
        "rerank-jp",
        9,
        3.0,
        ((12.5, 0.7, 1.5), (21.0, 1.0, 2.0)),
        0.3,
        1.1,
        0.0,
        45.0,
        (241, 1.5),
        (7, 0.8),
        None,
        25.0,
        1,
        12,
        2,
        True,
    ),
    App(
        "voice-br",
        -3,
        2.2,
        ((19.0, 1.0, 3.0),),
        0.45,
        0.9,
        0.0,
        None,
        None,
        None,
        None,
        20.0,
        1,
        8,
        2,
        False,
    ),
)
TRAFFIC_POOL = "frankfurt-h200"


def _demand(app: App, step: int) -> float:
    local = step + app.tz
    day, clock = local // 24, (local % 24) + 0.5
    shape = app.night
    for center, height, width in app.peaks:
        dist = min(abs(clock - center), 24 - abs(clock - center))
        shape += height * math.exp(-0.5 * (dist / width) ** 2)
    value = app.base * shape
    if day % 7 >= 5:
        value *= app.weekend
    value *= (1.0 + app.weekly_growth) ** (step / 168.0)
    if app.launch is not None and step >= app.launch[0]:
        value *= app.launch[1]
    if app.holiday is not None and day == app.holiday[0]:
        value *= app.holiday[1]
    return float(value)


def _traffic(seed: int, weeks: int, events: list[tuple[datetime, int, dict[str, Any]]], truth: dict[str, Any]) -> None:
    steps = weeks * 168
    for app in APPS:
        rng = random.Random(f"{GENERATOR}:{seed}:{app.id}")
        demand = [_demand(app, s) for s in range(steps)]
        payload: dict[str, Any] = {
            "id": app.id,
            "priority": app.priority,
            "min_gpus": app.min_gpus,
            "max_gpus": app.max_gpus,
            "swap_cap": app.swap_cap,
            "rps_per_gpu": app.rps_per_gpu if app.rps_per_gpu is not None else 1.0,
        }
        if app.with_profile:  # the owner's guess by UTC hour: a week-0 weekday, rounded up, generous
            payload["profile"] = [min(app.max_gpus, math.ceil(1.1 * _demand(app, 24 + h))) for h in range(24)]
        events.append(
            (T0, 0, _envelope(f"{TRAFFIC_POOL}:{app.id}:registered", "app.registered", T0, TRAFFIC_POOL, payload))
        )
        glitches = {rng.randrange(24, steps): rng.choice((0.0, 3.5, 4.0)) for _ in range(3)}
        for s in range(steps):
            noisy = demand[s] * math.exp(rng.gauss(0.0, 0.06))
            at = T0 + timedelta(hours=s, seconds=rng.randrange(60, 3540))
            if app.gap is not None and app.gap[0] <= s < app.gap[1]:
                continue
            noisy *= glitches.get(s, 1.0)
            obs: dict[str, Any] = {"app": app.id}
            if app.rps_per_gpu is not None:
                obs["requests_per_s"] = round(noisy * app.rps_per_gpu, 2)
            else:
                obs["gpus"] = math.ceil(noisy)
            events.append(
                (at, 2, _envelope(f"{TRAFFIC_POOL}:{app.id}:obs:{s}", "traffic.observed", at, TRAFFIC_POOL, obs))
            )
        truth["apps"][app.id] = {"pool": TRAFFIC_POOL, "demand": {str(s): round(demand[s], 4) for s in range(steps)}}


# ---- the trace ----------------------------------------------------------------------------------


def _stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _envelope(event_id: str, type_: str, at: datetime, pool: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "type": type_,
        "occurred_at": _stamp(at),
        "pool": pool,
        "schema_version": 1,
        "payload": payload,
    }


def trace(seed: int = 0, weeks: int = 4) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(events, truth) for `seed`: the same arguments give the same result, byte for byte."""
    events: list[tuple[datetime, int, dict[str, Any]]] = []
    truth: dict[str, Any] = {"generator": GENERATOR, "seed": seed, "jobs": {}, "apps": {}}
    for pool in POOLS:
        g = GPUS[pool.gpu]
        config = {
            "gpus": POOL_GPUS,
            "gpus_per_node": pool.per_node,
            "horizon": HORIZON,
            "step_minutes": pool.step_minutes,
            "gpu_type": g.type,
            "gpu_memory_gb": g.memory_gb,
        }
        events.append((T0, 0, _envelope(f"{pool.name}:configured", "pool.configured", T0, pool.name, config)))
    for pool in POOLS:
        _jobs(seed, weeks, pool, events, truth)
    _traffic(seed, weeks, events, truth)
    events.sort(key=lambda e: (e[0], e[1]))
    return [e for _, _, e in events], truth


def validate(events: list[dict[str, Any]]) -> None:
    """Every event against the contract (raises ValueError naming the field otherwise)."""
    for event in events:
        parse_event(event)
