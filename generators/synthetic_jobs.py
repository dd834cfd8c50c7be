"""Ground-truth training and quantization jobs for testing forecasters (docs/synthetic-data.md).

Features are drawn at random; the GPU count, peak memory and duration follow from them by a
model of our own (per-GPU-type and per-variant efficiencies, start-up time, communication that
grows with the GPU count, CUDA context, fragmentation) plus per-job noise of known size, so a
test can tell how close to the truth a forecaster gets and how close any forecaster could get.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from gpualloc.generators.synthetic_traffic import Record, pool_record, to_events
from gpualloc.generators.traces import T0
from gpualloc.schemas.features import (
    ADAPTER_VARIANTS,
    QUANT_BITS,
    QuantizationFeatures,
    TrainingFeatures,
)
from gpualloc.schemas.limits import LIMITS

K = TypeVar("K")  # a weighted table's keys

DURATION_SIGMA = 0.15  # actual_hours = expected_hours x exp(N(0, sigma^2)), per job
MEMORY_SIGMA = 0.05  # model memory (all but the CUDA context) x exp(N(0, sigma^2)), per job
HOURS = (0.75, 100.0)  # expected hours kept; jobs outside are drawn again
GB = 1e9


@dataclass(frozen=True)
class GpuSpec:
    memory_gb: float
    tflops: float  # dense bf16 peak
    context_gb: float  # CUDA context, cuBLAS/cuDNN workspaces
    efficiency: float  # share of peak a well-shaped large job reaches
    fp8: bool  # fp8 tensor cores (else fp8 runs at bf16 speed)
    fp32_ratio: float  # fp32 (no tensor cores) peak / bf16 peak
    link: float  # slowdown per doubling of the GPU count inside a node
    bandwidth_tbs: float = 2.0  # HBM, TB/s: what an optimizer step's passes over the states take


GPUS = {
    "a100-80gb": GpuSpec(80, 312, 1.6, 0.52, False, 0.0625, 0.035, 2.0),
    "h100-80gb": GpuSpec(80, 989, 2.1, 0.44, True, 0.068, 0.030, 3.35),
    "l40s-48gb": GpuSpec(48, 362, 1.3, 0.40, True, 0.25, 0.070, 0.864),
    # no pool of its own: the GPU of the real runs (benchmarks/real), its measured CUDA context
    "h200-141gb": GpuSpec(141, 989, 0.65, 0.55, True, 0.068, 0.030, 4.8),
}
NODE_GPUS = 8  # beyond this the job crosses nodes: a further slowdown per doubling
CROSS_NODE = 0.09
NCCL_GB = 0.6  # communication buffers when n > 1

# params_b, layers, hidden_size, active_params_b (MoE), weight of the draw
MODELS = (
    (0.5, 24, 896, None, 3),
    (1.5, 28, 1536, None, 4),
    (3.0, 36, 2048, None, 4),
    (7.0, 32, 4096, None, 6),
    (8.0, 32, 4096, None, 5),
    (13.0, 40, 5120, None, 3),
    (34.0, 48, 8192, None, 2),
    (46.7, 32, 4096, 12.9, 1),
    (70.0, 80, 8192, None, 2),
)
VOCAB = 64_000  # words, when the features give no vocabulary_size
MLP_RATIO = 3.5  # the MLP's width / hidden_size, when the features give no intermediate_size
HEAD_DIM = 128  # units an attention head, when the features give no attention_heads
# bf16 logits (2), their fp32 copy for the loss (4), its log-softmax (4) and the gradient (2), per
# vocabulary entry and token
LOGIT_BYTES = 12

WEIGHT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
ACT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1.5}  # fp8 keeps some in bf16
OPT_BYTES = {  # per trainable parameter, with the fp32 master copy under mixed precision; PyTorch's
    # optimizers (not bitsandbytes' 8-bit AdamW, not Adafactor's factored moments) add 1.5 bytes of
    # temporaries in their step
    "mixed": {"adamw": 13.5, "adamw_8bit": 6, "adafactor": 4.5, "sgd": 9.5, "lion": 9.5},
    "fp32": {"adamw": 9.5, "adamw_8bit": 2, "adafactor": 0.5, "sgd": 5.5, "lion": 5.5},
}
QLORA_BASE_BYTES = 0.53  # NF4 linear weights and their quantization constants
QLORA_EMBED_BYTES = 4  # the embeddings and output layer, upcast to fp32 by the k-bit preparation
# activation values stored per token and layer, at the activation's bytes: per hidden unit (the
# residual stream and norms in fp32, attention's inputs and outputs) and per MLP unit (gate, up,
# their product, the activation's input)
ACT_VALUES = 13
ACT_MLP_VALUES = 4
EAGER_VALUES = 3  # attention scores (bf16) and their fp32 softmax, per head and key, without flash attention
CHECKPOINT_BYTES = 3.5  # kept a layer and token per hidden unit under checkpointing (the fp32 residual)
ACT_FACTOR = {
    "full": 1.0,
    "cpt": 1.0,
    "dpo": 1.0,
    "lora": 0.95,
    "qlora": 1.20,
    "dora": 1.05,
    "adapter": 1.05,
    "prefix": 0.95,
    "prompt": 0.95,
    "ia3": 0.90,
}
LORA_MATRICES = {"attention": 8, "attention_mlp": 19, "all_linear": 21}  # x hidden x rank, a layer
LORA_DEFAULT = (16, "attention")  # rank and targets when the job leaves them out
VIRTUAL_TOKENS = {"prefix": 32, "prompt": 100}
FLOPS = {
    "full": 6,
    "cpt": 6,
    "dpo": 6,
    "lora": 4,
    "qlora": 4,
    "dora": 4.6,
    "adapter": 4.2,
    "prefix": 4,
    "prompt": 4,
    "ia3": 4,
}  # per token, per (active) parameter
VARIANT_EFF = {
    "full": 1.0,
    "cpt": 1.05,
    "dpo": 0.9,
    "lora": 0.85,
    "qlora": 0.7,
    "dora": 0.75,
    "adapter": 0.8,
    "prefix": 0.8,
    "prompt": 0.75,
    "ia3": 0.8,
}


FP32_EFF = 1.8  # fp32 on CUDA cores reaches a larger share of its (16x lower) peak than bf16 of its
# without flash attention, the scores (heads x seq_len a token and layer) are written, read and
# softmaxed in memory: a slowdown of this x heads x seq_len / hidden_size
EAGER_COST = 0.035
STEP_S = 0.005  # an optimizer step's launches and synchronisation
# bytes an optimizer step moves a trained parameter: PyTorch's AdamW reads and writes the fp32
# weight, gradient and moments in several passes (memory-bound: HBM bandwidth sets its time)
OPT_STEP_BYTES = 170


def _mixed(precision: str) -> str:
    return "fp32" if precision in ("fp32", "tf32") else "mixed"


def trainable_b(f: TrainingFeatures) -> float:
    """Trained parameters, billions."""
    if f.variant in ("full", "cpt", "dpo"):
        return f.params_b
    h, layers = f.hidden_size, f.layers
    if f.variant in ADAPTER_VARIANTS:
        rank = f.lora_rank or LORA_DEFAULT[0]
        targets = f.lora_targets or LORA_DEFAULT[1]
        matrices = LORA_MATRICES[targets] if isinstance(targets, str) else 2 * len(targets)  # A and B a module
        per_layer: float = matrices * h * rank + (2 * h if f.variant == "dora" else 0)
    else:
        per_layer = {
            "adapter": 4 * 64 * h,
            "prefix": 2 * VIRTUAL_TOKENS["prefix"] * h,
            "ia3": 3 * h,
            "prompt": VIRTUAL_TOKENS["prompt"] * h / layers,
        }[f.variant]
    return layers * per_layer / 1e9


def _tokens_a_pass(f: TrainingFeatures) -> int:
    """Tokens a GPU holds a forward pass: DPO runs pairs, prefix and prompt add virtual tokens."""
    seq = f.seq_len + VIRTUAL_TOKENS.get(f.variant, 0)
    return f.micro_batch * seq * (2 if f.variant == "dpo" else 1)


def _shape(f: TrainingFeatures) -> tuple[int, int, int, bool]:
    """Vocabulary, MLP width, attention heads and tied embeddings: the features' where they give
    them (the contract's model shape, when the schema has it), else the defaults."""
    vocab = getattr(f, "vocab_size", None) or VOCAB
    mlp = getattr(f, "intermediate_size", None) or round(MLP_RATIO * f.hidden_size)
    heads = getattr(f, "attention_heads", None) or max(1, f.hidden_size // HEAD_DIM)
    return int(vocab), int(mlp), int(heads), bool(getattr(f, "tied_embeddings", None))


def training_peak_gb(f: TrainingFeatures, gpu: GpuSpec, n: int, noise: float = 1.0) -> float:
    """Peak memory a GPU, GB (1e9 bytes), when the job runs on n GPUs."""
    mp = f.tensor_parallel * f.pipeline_parallel
    dp = max(1, n // mp)
    z = f.zero_stage
    full = f.variant in ("full", "cpt", "dpo")
    p, t = f.params_b * GB, trainable_b(f) * GB
    wb = WEIGHT_BYTES[f.precision]
    vocab, mlp, heads, tied = _shape(f)
    if f.variant == "qlora":
        embed = min(p, vocab * f.hidden_size * (1 if tied else 2))
        base = (p - embed) * QLORA_BASE_BYTES + embed * QLORA_EMBED_BYTES
    else:
        base = p * wb
    if full:
        weights, grads = base, p * max(2, wb)
    else:  # frozen base, trainable parameters and their gradients in fp32
        weights, grads = base + 4 * t, 4 * t
    opt = t * OPT_BYTES[_mixed(f.precision)][f.optimizer]
    ref = p * wb if f.reference_model else 0.0
    states = (
        (weights + ref) / (dp if z == 3 else 1) + grads / (dp if z >= 2 else 1) + opt / (dp if z >= 1 else 1)
    ) / mp
    tokens = _tokens_a_pass(f)
    h = f.hidden_size
    per_token = ACT_VALUES * h + ACT_MLP_VALUES * mlp + (0 if f.flash_attention else EAGER_VALUES * heads * f.seq_len)
    layer_full = tokens * per_token * ACT_BYTES[f.precision] / f.tensor_parallel
    layer_kept = tokens * h * CHECKPOINT_BYTES / f.tensor_parallel if f.gradient_checkpointing else layer_full
    gas = max(1.0, f.global_batch / (f.micro_batch * dp))
    in_flight = min(f.pipeline_parallel, math.ceil(gas))
    acts = ACT_FACTOR[f.variant] * (
        layer_kept * math.ceil(f.layers / f.pipeline_parallel) * in_flight
        + (layer_full if f.gradient_checkpointing else 0)
    )
    logits = tokens * vocab * LOGIT_BYTES / f.tensor_parallel
    frag = 1.08 + 0.05 * (z == 3) + 0.04 * (f.variant == "qlora") + 0.03 * (not f.flash_attention)
    return (states + acts + logits) * frag * noise / GB + gpu.context_gb + (NCCL_GB if n > 1 else 0)


def _comm(gpu: GpuSpec, n: int, zero3: bool = False) -> float:
    """Slowdown from communication: grows with each doubling, more across nodes and under ZeRO-3."""
    d = math.log2(n)
    return 1 + gpu.link * d + CROSS_NODE * max(0.0, d - math.log2(NODE_GPUS)) + (0.04 * d if zero3 else 0)


def training_hours(f: TrainingFeatures, gpu: GpuSpec, n: int) -> float:
    """Noise-free hours on n GPUs: start-up, compute at an efficiency of its own, optimizer steps."""
    active = f.active_params_b or f.params_b
    dp = max(1, n // (f.tensor_parallel * f.pipeline_parallel))
    seq = f.seq_len + VIRTUAL_TOKENS.get(f.variant, 0)
    tokens = f.dataset_tokens_m * 1e6 * f.epochs * seq / f.seq_len
    passes = FLOPS[f.variant] + 2 * (f.variant == "dpo" and f.reference_model) + 2 * f.gradient_checkpointing
    flops = tokens * passes * (active * GB + f.layers * f.seq_len * f.hidden_size)
    rate = {"fp32": gpu.fp32_ratio, "tf32": 0.5, "fp8": 2.0 if gpu.fp8 else 1.0}.get(f.precision, 1.0)
    eff = (
        gpu.efficiency
        * VARIANT_EFF[f.variant]
        * math.sqrt(active / (active + 1.5))
        * (1 - 0.4 * math.exp(-_tokens_a_pass(f) / 4096))
        * {"fp8": 0.72 if gpu.fp8 else 0.95, "fp16": 0.97, "fp32": FP32_EFF}.get(f.precision, 1.0)
        * (1 if f.flash_attention else 1 / (1 + EAGER_COST * _shape(f)[2] * f.seq_len / f.hidden_size))
        * (1 - 0.06 * math.log2(f.tensor_parallel))
    )
    gas = max(1.0, f.global_batch / (f.micro_batch * dp))
    bubble = gas / (gas + f.pipeline_parallel - 1)
    compute_s = flops / (n * gpu.tflops * 1e12 * rate * eff * bubble) * _comm(gpu, n, f.zero_stage == 3)
    shard = n if f.zero_stage >= 1 else f.tensor_parallel * f.pipeline_parallel
    steps = tokens / (f.global_batch * f.seq_len)
    step_s = STEP_S + OPT_STEP_BYTES * trainable_b(f) * GB / (gpu.bandwidth_tbs * 1e12 * shard)
    startup_min = 5 + 1.8 * math.sqrt(f.params_b) + (2 if n > NODE_GPUS else 0)
    return (compute_s + steps * step_s) / 3600 + startup_min / 60


def _shape_of(params_b: float) -> tuple[int, int]:
    """Layers and hidden size of the catalogue model nearest in size."""
    _, layers, hidden, _, _ = min(MODELS, key=lambda m: abs(m[0] - params_b))
    return layers, hidden


def quant_peak_gb(f: QuantizationFeatures, gpu: GpuSpec, n: int, noise: float = 1.0) -> float:
    """Peak memory a GPU, GB: the fp16 model spread over n GPUs, the calibration set, the solver."""
    layers, h = _shape_of(f.params_b)
    p = f.params_b * GB
    samples = f.calibration_samples * f.seq_len * h * 2
    if f.algorithm == "gguf_k":  # one GPU: llama.cpp offloads as many layers as fit, up to 95%
        return min(0.95 * gpu.memory_gb, (2.0 + 0.5 * f.params_b) * 1.05 * noise + gpu.context_gb)
    if f.algorithm in ("bnb_nf4", "bnb_int8"):  # quantized on load, one fp16 layer at a time
        model = p * f.bits / 8 * 1.1 / n + 2 * p / layers
    else:
        copies = {"awq": 3, "gptq": 2, "smoothquant": 1, "fp8": 1}[f.algorithm]
        hessian = 4 * (3.5 * h) ** 2 if f.algorithm == "gptq" else 0
        model = 2 * p / n + copies * samples + hessian
    return model * 1.05 * noise / GB + gpu.context_gb + (NCCL_GB if n > 1 else 0)


QUANT_EFF = 0.12  # calibration runs layer by layer, a sample at a time
EVAL_TOKENS = 5e6  # every job ends with a perplexity check of the quantized model
IO_GBPS = 0.8  # checkpoint read and write


def quant_hours(f: QuantizationFeatures, gpu: GpuSpec, n: int) -> float:
    """Noise-free hours: start-up, checkpoint I/O, calibration by algorithm, evaluation."""
    layers, h = _shape_of(f.params_b)
    p = f.params_b * GB
    speed = gpu.tflops * 1e12 * gpu.efficiency
    forward_s = 2 * p * f.calibration_samples * f.seq_len / (speed * QUANT_EFF)
    groups = 1 + 32 / (f.group_size or 128)
    cols = (3.5 * h / 4096) ** 3 * math.sqrt(312 / gpu.tflops)
    work_s = {
        "awq": 6 * forward_s * groups,
        "gptq": 1.5 * forward_s + layers * 7 * cols * 0.06 * (1.3 if f.bits <= 3 else 1.0) * groups,
        "smoothquant": 1.2 * forward_s + 3 * layers,
        "fp8": forward_s + 60,
        "bnb_nf4": 0.6 * f.params_b,
        "bnb_int8": 0.6 * f.params_b,
        "gguf_k": forward_s + 40 * f.params_b * (1.4 if f.bits <= 4 else 1.0),
    }[f.algorithm]
    eval_s = 2 * p * EVAL_TOKENS / (speed * 0.3)
    io_s = (2 * p + p * f.bits / 8) / (IO_GBPS * GB)
    startup_min = 4 + 1.5 * math.sqrt(f.params_b)
    return ((work_s + eval_s) * (1 + 0.05 * math.log2(n)) + io_s) / 3600 + startup_min / 60


def peak_memory_gb(
    kind: str, f: TrainingFeatures | QuantizationFeatures, gpu_type: str, n: int, noise: float = 1.0
) -> float:
    """The true peak a GPU at n GPUs (noise: the job's `memory_noise` from the truth)."""
    if kind == "training":
        return training_peak_gb(cast(TrainingFeatures, f), GPUS[gpu_type], n, noise)
    return quant_peak_gb(cast(QuantizationFeatures, f), GPUS[gpu_type], n, noise)


def expected_hours(kind: str, f: TrainingFeatures | QuantizationFeatures, gpu_type: str, n: int) -> float:
    """The noise-free duration in hours at n GPUs."""
    if kind == "training":
        return training_hours(cast(TrainingFeatures, f), GPUS[gpu_type], n)
    return quant_hours(cast(QuantizationFeatures, f), GPUS[gpu_type], n)


def fitting_gpus(
    kind: str, f: TrainingFeatures | QuantizationFeatures, gpu_type: str, noise: float, limit: int
) -> int | None:
    """The smallest power of two >= tp x pp at which the peak fits the GPU, None above `limit`."""
    if kind == "quantization" and cast(QuantizationFeatures, f).algorithm == "gguf_k":
        return 1 if peak_memory_gb(kind, f, gpu_type, 1, noise) <= GPUS[gpu_type].memory_gb else None
    t = cast(TrainingFeatures, f)  # read only when kind is training
    n = t.tensor_parallel * t.pipeline_parallel if kind == "training" else 1
    while n <= limit:
        if peak_memory_gb(kind, f, gpu_type, n, noise) <= GPUS[gpu_type].memory_gb:
            return n
        n *= 2
    return None


@dataclass(frozen=True)
class SampledJob:
    kind: str
    priority: int
    features: dict[str, Any]
    gpus: int
    peak_memory_gb: float
    memory_noise: float
    expected_steps: float
    actual_duration: int
    label: tuple[str, str]  # ("variant" | "algorithm", its value)

    def truth(self, gpu_type: str) -> dict[str, Any]:
        return {
            "expected_steps": self.expected_steps,
            "gpus": self.gpus,
            "peak_memory_gb": self.peak_memory_gb,
            self.label[0]: self.label[1],
            "gpu_type": gpu_type,
            "memory_noise": self.memory_noise,
        }

    def used(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "peak_memory_gb": self.peak_memory_gb, "duration": self.actual_duration}


def _pick(rng: random.Random, table: dict[K, float]) -> K:
    return rng.choices(list(table), weights=list(table.values()))[0]


def _training_features(rng: random.Random, gpu_type: str) -> dict[str, Any]:
    variant = _pick(
        rng,
        {
            "full": 1.2,
            "lora": 1.5,
            "qlora": 1.2,
            "dora": 0.8,
            "adapter": 0.6,
            "prefix": 0.5,
            "prompt": 0.5,
            "ia3": 0.5,
            "dpo": 0.8,
            "cpt": 0.6,
        },
    )
    params, layers, hidden, active, _ = rng.choices(MODELS, weights=[m[4] for m in MODELS])[0]
    seq = (
        rng.choice((2048, 4096, 8192))
        if variant == "cpt"
        else _pick(rng, {512: 1, 1024: 2, 2048: 3, 4096: 2.5, 8192: 1})
    )
    micro = rng.choice([b for b in (1, 2, 4, 8, 16) if b * seq <= 32768])
    full = variant in ("full", "cpt", "dpo")
    lo, hi = {"full": (20, 1500), "cpt": (300, 20000), "dpo": (5, 300)}.get(variant, (10, 800))
    scale = (7 / (active or params)) ** 0.7
    f = {
        "variant": variant,
        "params_b": params,
        "layers": layers,
        "hidden_size": hidden,
        "seq_len": seq,
        "dataset_tokens_m": round(math.exp(rng.uniform(math.log(lo), math.log(hi))) * scale, 1) or 0.1,
        "epochs": 1.0 if variant == "cpt" else rng.choice((0.5, 1.0, 1.0, 2.0, 3.0)),
        "micro_batch": micro,
        "global_batch": micro * rng.choice((8, 16, 32, 64, 128, 256)),
        "precision": _pick(
            rng,
            {"bf16": 0.8, "fp16": 0.2}
            if variant == "qlora"
            else {"bf16": 0.6, "fp16": 0.12, "fp8": 0.12, "tf32": 0.1, "fp32": 0.06},
        ),
        "optimizer": _pick(rng, {"adamw": 0.45, "adamw_8bit": 0.2, "adafactor": 0.1, "sgd": 0.1, "lion": 0.15}),
        "gradient_checkpointing": rng.random() < 0.45,
        "flash_attention": rng.random() < 0.85,
        "zero_stage": _pick(rng, {0: 0.1, 1: 0.15, 2: 0.3, 3: 0.45} if full else {0: 0.6, 2: 0.25, 3: 0.15}),
        "tensor_parallel": _pick(rng, {1: 0.4, 2: 0.3, 4: 0.2, 8: 0.1})
        if params >= 13
        else _pick(rng, {1: 0.8, 2: 0.2})
        if params >= 7
        else 1,
        "pipeline_parallel": _pick(rng, {1: 0.5, 2: 0.3, 4: 0.2}) if params >= 34 else 1,
    }
    if active:
        f["active_params_b"] = active
    if variant in ADAPTER_VARIANTS and rng.random() < 0.9:
        f["lora_rank"] = rng.choice((8, 16, 32, 64, 128, 256))
        f["lora_targets"] = rng.choice(tuple(LORA_MATRICES))
    if variant == "dpo" and rng.random() < 0.85 or variant == "full" and rng.random() < 0.05:
        f["reference_model"] = True
    if rng.random() < 0.04:
        f["gpu_type"] = gpu_type
    return f


# the algorithms this generator draws: those it has a model of (AutoRound, added to the contract
# later, is not drawn, so every seed's trace is as it was)
GENERATED_ALGORITHMS = ("awq", "gptq", "smoothquant", "bnb_nf4", "bnb_int8", "fp8", "gguf_k")


def _quant_features(rng: random.Random) -> dict[str, Any]:
    algorithm = rng.choice(GENERATED_ALGORITHMS)
    params = rng.choices(MODELS, weights=[m[4] for m in MODELS])[0][0]
    f = {
        "params_b": params,
        "algorithm": algorithm,
        "bits": rng.choice(QUANT_BITS[algorithm]),
        "calibration_samples": 0
        if algorithm.startswith("bnb")
        else rng.choice((0, 128, 512))
        if algorithm == "gguf_k"
        else rng.choice((128, 256, 512, 1024, 2048)),
        "seq_len": rng.choice((512, 1024, 2048, 4096)),
    }
    if algorithm in ("awq", "gptq"):
        group = rng.choice((32, 64, 128, None))
        if group:
            f["group_size"] = group
    return f


def sample_job(
    rng: random.Random, gpu_type: str, step_minutes: int, max_gpus: int, quant_share: float = 0.25
) -> SampledJob:
    """One job whose truth is inside the kept ranges (drawn again until it is)."""
    kind = "quantization" if rng.random() < quant_share else "training"
    while True:
        raw = _quant_features(rng) if kind == "quantization" else _training_features(rng, gpu_type)
        f = (QuantizationFeatures if kind == "quantization" else TrainingFeatures).model_validate(raw)
        memory_noise = math.exp(rng.gauss(0, MEMORY_SIGMA))
        duration_noise = math.exp(rng.gauss(0, DURATION_SIGMA))
        n = fitting_gpus(kind, f, gpu_type, memory_noise, max_gpus)
        if n is None:
            continue
        hours = expected_hours(kind, f, gpu_type, n)
        actual = max(1, math.ceil(hours * duration_noise * 60 / step_minutes))
        lo, hi = HOURS
        if lo <= hours <= hi and actual <= LIMITS.duration:
            label = (
                ("algorithm", cast(QuantizationFeatures, f).algorithm)
                if kind == "quantization"
                else ("variant", cast(TrainingFeatures, f).variant)
            )
            peak = round(peak_memory_gb(kind, f, gpu_type, n, memory_noise), 3)
            return SampledJob(
                kind, rng.randint(1, 10), raw, n, peak, memory_noise, hours * 60 / step_minutes, actual, label
            )


POOLS = (("pool-a100", "a100-80gb"), ("pool-h100", "h100-80gb"), ("pool-l40s", "l40s-48gb"))
POOL_GPUS = 64
JOB_WEEKS = 3
QUEUE_MEAN_MIN = 90  # mean of the exponential delay between submission and start


def job_trace(
    seed: int = 0, jobs: int = 600, step_minutes: int = 30
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Three pools of 64 GPUs of different types; jobs arriving over three weeks, each submitted
    with features only and completed with what it used. Also the truth by job id."""
    rng = random.Random(seed)
    records: list[Record] = [
        pool_record(POOL_GPUS, step_minutes, 48, pool, gpu_type=gpu_type, gpu_memory_gb=float(GPUS[gpu_type].memory_gb))
        for pool, gpu_type in POOLS
    ]
    truth: dict[str, dict[str, Any]] = {}
    gap_s = JOB_WEEKS * 7 * 86400 / jobs
    at: datetime = T0
    for i in range(jobs):
        at += timedelta(seconds=max(1, round(rng.expovariate(1 / gap_s))))
        pool, gpu_type = rng.choice(POOLS)
        job = sample_job(rng, gpu_type, step_minutes, POOL_GPUS)
        job_id = f"job-{i}"
        records.append(
            (
                at,
                "job.submitted",
                {
                    "id": job_id,
                    "kind": job.kind,
                    "priority": job.priority,
                    "features": job.features,
                    "actual_duration": job.actual_duration,
                },
                pool,
            )
        )
        ends = at + timedelta(
            seconds=round(rng.expovariate(1 / (QUEUE_MEAN_MIN * 60))), minutes=job.actual_duration * step_minutes
        )
        records.append((ends, "job.completed", {"id": job_id, "used": job.used()}, pool))
        truth[job_id] = job.truth(gpu_type)
    return to_events(records, f"j{seed}"), truth


def _errors(events: list[dict[str, Any]], truth: dict[str, dict[str, Any]]) -> list[tuple[str, float]]:
    """(submission time, |expected - actual| / actual) per job, in submission order."""
    out = []
    for e in events:
        if e["type"] == "job.submitted":
            p = e["payload"]
            actual = p["actual_duration"]
            out.append((e["occurred_at"], abs(truth[p["id"]]["expected_steps"] - actual) / actual))
    return out


def duration_noise_floor(events: list[dict[str, Any]], truth: dict[str, dict[str, Any]]) -> float:
    """Median absolute percentage error of the noise-free truth: no forecaster does better."""
    return statistics.median(err for _, err in _errors(events, truth))


def noise_floor_last(events: list[dict[str, Any]], truth: dict[str, dict[str, Any]], share: float = 0.2) -> float:
    """The same over the last `share` of jobs by submission (where forecasters are scored)."""
    errors = _errors(events, truth)
    return statistics.median(err for _, err in errors[-max(1, round(share * len(errors))) :])
