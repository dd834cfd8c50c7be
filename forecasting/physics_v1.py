"""Version 1 of the training physics (`ForecastSettings.physics` 1): the textbook accounting that
ledgers recorded before version 2 (`physics`) were decided by, kept so their replays forecast as
the agent did. It reads none of the model's shape fields. How much memory a GPU needs, hence how
many GPUs, and how many FLOPs the job does, hence how long it runs on a given GPU type.

Pure functions of `TrainingFeatures` and the hardware, with the textbook accounting:
- memory a GPU = weights + gradients + optimizer state (the trainable part, sharded by the ZeRO
  stage over the data-parallel replicas) + a frozen reference model when the variant keeps one +
  activations (micro batch x sequence x hidden x layers, far less with checkpointing, which then
  rebuilds one layer's in full; a pipeline's first stage holds up to one micro-batch a stage in
  flight) + the logits of the output layer (tokens x vocabulary, 16-bit values and their fp32
  softmax), the model split by tensor and pipeline parallelism;
- FLOPs = 2 (forward) + 4 (backward) per active parameter and token; a backward pass that needs no
  weight gradients (adapters, frozen bases) costs 2, checkpointing adds a forward, a reference
  model adds a forward; DPO scores a chosen and a rejected sequence per sample;
- time = FLOPs / (GPUs x the type's peak at the precision x an achieved fraction).

The learned correction on top of it lives apart (it fits the baseline's errors); the constants
here are public figures (datasheet peaks, the usual bytes per parameter), not fitted ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpualloc.schemas.features import TrainingFeatures

GIB = 1024**3
# a weight or gradient, by compute precision: fp8 training (Transformer Engine) keeps its weights and
# gradients in bf16 and casts to fp8 for the matrix multiplies
BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
# the optimizer's state a trainable parameter: adamw 4 + 4; 8-bit Adam 1 + 1 (Dettmers et al. 2022);
# Adafactor's factored second moment and no first moment (Shazeer and Stern 2018), about nothing; one
# momentum for SGD and Lion
OPTIMIZER_BYTES = {"adamw": 8, "adamw_8bit": 2, "adafactor": 0, "sgd": 4, "lion": 4}
MASTER_BYTES = 4  # the fp32 master copy of a trainable parameter, under mixed precision (16-bit or fp8)
FROZEN_BACKWARD = ("lora", "qlora", "dora", "adapter", "prefix", "prompt", "ia3")  # no gradients of base weights
PEAK_TFLOPS = {  # dense tensor-core peak by GPU type: (16-bit, fp8, fp32/tf32)
    "v100-32gb": (125, 125, 15.7),
    "a10-24gb": (125, 125, 31),
    "l40s-48gb": (362, 733, 91.6),
    "a100-40gb": (312, 312, 156),
    "a100-80gb": (312, 312, 156),
    "h100-80gb": (989, 1979, 494),
    "h200-141gb": (989, 1979, 494),
    "b200-192gb": (2250, 4500, 1100),
    "mi300x-192gb": (1307, 2615, 654),
}
GPU_MEMORY_GB = {name: float(name.rsplit("-", 1)[1].removesuffix("gb")) for name in PEAK_TFLOPS}
ACHIEVED = 0.40  # the share of peak a well-tuned training job sustains (model FLOPs utilization)
HEADROOM = 0.90  # the share of a GPU's memory a plan may count on (allocator, kernels, fragmentation)
ADAPTER_MODULES = {"attention": 4, "attention_mlp": 7, "all_linear": 7}  # projection matrices a layer
VOCABULARY = 50_000  # tokens of a typical LLM vocabulary (GPT-2's 50,257; Llama's 32,000 to 128,000)
LOGIT_BYTES = 6  # a 16-bit logit and its fp32 softmax
HEAD_DIM = 128  # hidden units an attention head (Llama, Mistral, Qwen, Falcon-40B): heads = hidden / 128


@dataclass(frozen=True)
class Sizing:
    gpus: int  # the smallest power of two whose memory fits the job (at least TP x PP)
    memory_gb: float  # needed a GPU at that count
    fits: bool  # False when even the largest count tried does not fit
    hours: float  # wall time on `gpus` GPUs


def trainable_params(f: TrainingFeatures) -> float:
    """Parameters the optimizer updates."""
    full = f.params_b * 1e9
    if f.variant in ("full", "cpt", "dpo"):
        return full
    width, layers = f.hidden_size, f.layers
    if f.variant in ("lora", "qlora", "dora"):
        rank = f.lora_rank or 16
        targets = f.lora_targets or "attention"
        modules = ADAPTER_MODULES[targets] if isinstance(targets, str) else len(targets)  # a listed module: one
        per_layer = modules * 2 * rank * width
        return per_layer * layers + (width * layers if f.variant == "dora" else 0)  # DoRA: a magnitude a column
    if f.variant == "adapter":
        return layers * 2 * 2 * width * max(1, width // 16)  # two bottleneck adapters a layer
    if f.variant == "prefix":
        return layers * 2 * 64 * width  # keys and values of 64 virtual tokens a layer
    if f.variant == "prompt":
        return 64 * width
    return layers * 3 * width  # ia3: three scaling vectors a layer


def memory_parts_gb(f: TrainingFeatures, gpus: int) -> dict[str, float]:
    """GB a GPU holds when the job runs on `gpus` GPUs, by what holds it (the learned correction
    weighs each part on its own: a part the accounting gets wrong is off in proportion)."""
    model_split = f.tensor_parallel * f.pipeline_parallel
    replicas = max(1, gpus // model_split)
    weight_bytes = 0.5 if f.variant == "qlora" else BYTES[f.precision]
    weights = f.params_b * 1e9 * weight_bytes
    trainable = trainable_params(f)
    grads = trainable * BYTES[f.precision]
    state = trainable * (OPTIMIZER_BYTES[f.optimizer] + (MASTER_BYTES if BYTES[f.precision] < 4 else 0))
    if f.zero_stage >= 1:
        state /= replicas
    if f.zero_stage >= 2:
        grads /= replicas
    reference = f.params_b * 1e9 * BYTES[f.precision] if f.variant == "dpo" or f.reference_model else 0.0
    if f.zero_stage >= 3:  # the frozen reference is wrapped by the same engine, so sharded alike
        weights /= replicas
        reference /= replicas
    # bytes a token a hidden unit of a layer's activations (Korthikanti et al. 2022): 34, plus the
    # attention scores and their softmax and dropout, 5 a s / h, unless FlashAttention recomputes them
    full_layer = 34 + (0 if f.flash_attention else 5 * f.seq_len / HEAD_DIM)
    per_token_layer = 2 if f.gradient_checkpointing else full_layer
    tokens = f.micro_batch * (2 if f.variant == "dpo" else 1) * f.seq_len
    accumulation = math.ceil(f.global_batch / (f.micro_batch * replicas))
    in_flight = min(f.pipeline_parallel, accumulation)
    activations = tokens * f.hidden_size * per_token_layer * math.ceil(f.layers / f.pipeline_parallel) * in_flight
    if f.gradient_checkpointing:
        activations += tokens * f.hidden_size * full_layer  # the layer being recomputed
    logits = tokens * VOCABULARY * LOGIT_BYTES
    return {
        "weights": (weights + reference) / model_split / GIB,
        "gradients": grads / model_split / GIB,
        "optimizer": state / model_split / GIB,
        "activations": activations / f.tensor_parallel / GIB,
        "logits": logits / f.tensor_parallel / GIB,
    }


def memory_per_gpu_gb(f: TrainingFeatures, gpus: int) -> float:
    """GB a GPU needs when the job runs on `gpus` GPUs."""
    return sum(memory_parts_gb(f, gpus).values())


def training_flops(f: TrainingFeatures) -> float:
    """FLOPs of the whole job."""
    active = (f.active_params_b or f.params_b) * 1e9
    tokens = f.dataset_tokens_m * 1e6 * f.epochs * (2 if f.variant == "dpo" else 1)
    per_token = 2 + (2 if f.variant in FROZEN_BACKWARD else 4)  # forward, backward
    if f.gradient_checkpointing:
        per_token += 2  # the forward again
    if f.variant == "dpo" or f.reference_model:
        per_token += 2  # the reference model's forward
    return per_token * active * tokens


def peak_flops(gpu_type: str, precision: str) -> float:
    half, fp8, full = PEAK_TFLOPS[gpu_type]
    return 1e12 * (fp8 if precision == "fp8" else full if precision in ("fp32", "tf32") else half)


def training_hours(f: TrainingFeatures, gpu_type: str, gpus: int) -> float:
    """Wall time on `gpus` GPUs of `gpu_type`."""
    return training_flops(f) / (gpus * peak_flops(gpu_type, f.precision) * ACHIEVED) / 3600.0


def smallest_count(f: TrainingFeatures) -> int:
    """The fewest GPUs the layout runs on: the power of two at or above TP x PP."""
    n = 1
    while n < f.tensor_parallel * f.pipeline_parallel:
        n *= 2
    return n


def size_training(
    f: TrainingFeatures, gpu_type: str, gpu_memory_gb: float | None = None, max_gpus: int = 4096
) -> Sizing:
    """The smallest power-of-two GPU count (at least TP x PP) whose memory fits, and the time."""
    memory = (gpu_memory_gb or GPU_MEMORY_GB[gpu_type]) * HEADROOM
    n = smallest_count(f)
    while n < max_gpus and memory_per_gpu_gb(f, n) > memory:
        n *= 2
    need = memory_per_gpu_gb(f, n)
    return Sizing(n, need, need <= memory, training_hours(f, gpu_type, n))


def steps_of(hours: float, step_minutes: int) -> int:
    """Pool steps a run of `hours` takes (at least one)."""
    return max(1, math.ceil(hours * 60.0 / step_minutes))
