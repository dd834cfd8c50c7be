"""What a training run's software stack does where its features are silent: each framework's
defaults for the loss, the optimizer's implementation, the adapters' precision and the fp32 master
copy (docs/contract/events.md, "Job features"). An explicit feature wins over its framework's
default; an absent framework is the Hugging Face Trainer's stack, whose defaults are the
assumptions every older job was sized by.

Sources of the defaults: transformers' `TrainingArguments` (`optim="adamw_torch"`, PyTorch's AdamW
with its default `foreach` implementation on CUDA; `bf16=True` autocasts over fp32 weights), peft's
`prepare_model_for_kbit_training` (non-quantized parameters upcast to fp32) and its fp32 adapters
(`autocast_adapter_dtype=True`); DeepSpeed's engine (`FusedAdam`, its fp32 master copy partitioned
with the optimizer state); torchtune's recipes (`dtype: bf16` for the whole model, adapters and
optimizer state included, `CEWithChunkedOutputLoss` with `num_output_chunks=8`); LitGPT's
`precision="bf16-true"` and its chunked cross-entropy (`chunked_cross_entropy`, 128-token chunks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpualloc.schemas.features import Framework, Loss, OptimizerImpl, TrainingFeatures

HALF_PRECISIONS = ("bf16", "fp16", "fp8")  # a master copy is kept only under these
LOSS_CHUNKS = 8  # torchtune's `num_output_chunks`
LITGPT_CHUNK_TOKENS = 128  # LitGPT's `chunked_cross_entropy(chunk_size=128)`: tokens a chunk


@dataclass(frozen=True)
class Defaults:
    """A framework's choices where a job's features are silent."""

    loss: Loss
    optimizer_impl: OptimizerImpl
    upcast: bool  # adapters (and QLoRA's unquantized base) in fp32
    master_weights: bool  # an fp32 master copy under 16-bit precisions


FRAMEWORK_DEFAULTS: dict[Framework, Defaults] = {
    "transformers": Defaults("whole", "foreach", upcast=True, master_weights=True),
    "deepspeed": Defaults("whole", "deepspeed", upcast=True, master_weights=True),
    "torchtune": Defaults("chunked", "foreach", upcast=False, master_weights=False),
    "litgpt": Defaults("chunked", "foreach", upcast=False, master_weights=False),
}


def defaults(f: TrainingFeatures) -> Defaults:
    return FRAMEWORK_DEFAULTS[f.framework or "transformers"]


def master_weights(f: TrainingFeatures) -> bool:
    """An fp32 master copy of the trained weights is kept (mixed precision)."""
    if f.master_weights is not None:
        return f.master_weights
    return f.precision in HALF_PRECISIONS and defaults(f).master_weights


def upcast(f: TrainingFeatures) -> bool:
    """Adapters, their state and inputs (and QLoRA's unquantized base) are held in fp32; pure
    16-bit training (`master_weights: false`) upcasts nothing unless `upcast` says so."""
    if f.upcast is not None:
        return f.upcast
    if f.precision in ("fp32", "tf32"):
        return True  # everything is fp32 already
    if f.master_weights is False:
        return False
    return defaults(f).upcast


def loss(f: TrainingFeatures) -> Loss:
    return f.loss or defaults(f).loss


def loss_chunks(f: TrainingFeatures, tokens: int) -> int:
    """Chunks a chunked loss works in: the job's, LitGPT's 128-token chunks, else torchtune's 8."""
    if f.loss_chunks is not None:
        return f.loss_chunks
    if f.loss is None and f.framework == "litgpt":
        return max(1, math.ceil(tokens / LITGPT_CHUNK_TOKENS))
    return LOSS_CHUNKS


def optimizer_impl(f: TrainingFeatures) -> OptimizerImpl:
    return f.optimizer_impl or defaults(f).optimizer_impl
