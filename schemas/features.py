"""The `features` object of `job.submitted` (docs/contract/events.md, "Job features"): what the
forecasters turn into a job's GPU count and duration when the submitter does not give them.

Training jobs carry the fields of `TrainingFeatures` (the seed's 22 and the model's shape), quantization jobs the
fields of `QuantizationFeatures`; both name their units in the field names. Every field is
checked like any other payload field (type, range, the rule it breaks); unknown fields are
refused, so a misspelt one is reported instead of silently ignored. Batch inference has no
feature set yet: such a job gives `gpus` and `duration`.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

# Each set of names once, as the Literal type the models use; its tuple for the one-hot encodings.
TrainingVariant = Literal["full", "lora", "qlora", "dora", "adapter", "prefix", "prompt", "ia3", "dpo", "cpt"]
TRAINING_VARIANTS: tuple[TrainingVariant, ...] = get_args(TrainingVariant)
ADAPTER_VARIANTS = ("lora", "qlora", "dora")  # the ones that take `lora_rank` and `lora_targets`
Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
Optimizer = Literal["adamw", "adamw_8bit", "adafactor", "sgd", "lion"]
OPTIMIZERS: tuple[Optimizer, ...] = get_args(Optimizer)
Framework = Literal["transformers", "deepspeed", "torchtune", "litgpt"]  # whose defaults a run keeps
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)
Loss = Literal["whole", "chunked", "fused"]  # how the output layer's cross-entropy is computed
LOSSES: tuple[Loss, ...] = get_args(Loss)
# how the optimizer's step runs; in_backward: each parameter's step as its gradient is made (torchtune)
OptimizerImpl = Literal["foreach", "fused", "for_loop", "deepspeed", "in_backward"]
OPTIMIZER_IMPLS: tuple[OptimizerImpl, ...] = get_args(OptimizerImpl)
# what a run keeps in host memory instead of the GPU's: the optimizer's state and step (ZeRO-Offload,
# FSDP's CPU offload), the parameters (ZeRO-3's offload_param, FSDP's offload_params), the saved
# activations (torchtune's and Unsloth's activation offloading)
Offloaded = Literal["optimizer", "parameters", "activations"]
LoraTargetSet = Literal["attention", "attention_mlp", "all_linear"]  # shorthands: q, k, v, o (and the MLP's)
# A LoRA target module as users write it (PEFT's `target_modules`, torchtune's, LitGPT's, Meta's
# names), with the decoder projections it adapts: q, k, v, o, gate, up, down, or a fused one
# (qkv: query, key and value in one matrix; gate_up: the MLP's two input matrices in one). A name
# used for two layers in one family (GPT-2's c_proj: attention output and MLP down) adapts both.
LORA_MODULES: dict[str, tuple[str, ...]] = {
    # Llama, Mistral, Qwen, Gemma, OPT (and PEFT's defaults for them)
    "q_proj": ("q",),
    "k_proj": ("k",),
    "v_proj": ("v",),
    "o_proj": ("o",),
    "out_proj": ("o",),
    "gate_proj": ("gate",),
    "up_proj": ("up",),
    "down_proj": ("down",),
    "fc1": ("up",),
    "fc2": ("down",),
    # torchtune and Meta's reference code
    "output_proj": ("o",),
    "wq": ("q",),
    "wk": ("k",),
    "wv": ("v",),
    "wo": ("o",),
    "w1": ("gate",),
    "w2": ("down",),
    "w3": ("up",),
    # LitGPT's flags (lora_query, lora_key, lora_value, lora_projection, lora_mlp)
    "query": ("q",),
    "key": ("k",),
    "value": ("v",),
    "projection": ("o",),
    "mlp": ("gate", "up", "down"),
    # fused: GPT-NeoX, Falcon, BLOOM, GPT-2, Phi-3, MPT
    "query_key_value": ("qkv",),
    "c_attn": ("qkv",),
    "qkv_proj": ("qkv",),
    "Wqkv": ("qkv",),
    "gate_up_proj": ("gate_up",),
    "dense": ("o",),
    "dense_h_to_4h": ("up",),
    "dense_4h_to_h": ("down",),
    "c_fc": ("up",),
    "c_proj": ("o", "down"),
}


def _known_module(name: str) -> str:
    if name not in LORA_MODULES:
        near = get_close_matches(name, LORA_MODULES, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else f"; known: {', '.join(LORA_MODULES)}"
        raise ValueError(f"lora_targets: unknown LoRA target module {name!r}{hint}")
    return name


LoraModule = Annotated[
    str, AfterValidator(_known_module), WithJsonSchema({"type": "string", "enum": list(LORA_MODULES)})
]
QuantAlgorithm = Literal["awq", "gptq", "smoothquant", "bnb_nf4", "bnb_int8", "fp8", "gguf_k", "autoround"]
QUANT_ALGORITHMS: tuple[QuantAlgorithm, ...] = get_args(QuantAlgorithm)
QUANT_BITS = {
    "awq": (3, 4),
    "gptq": (2, 3, 4, 8),
    "smoothquant": (8,),
    "bnb_nf4": (4,),
    "bnb_int8": (8,),
    "fp8": (8,),
    "gguf_k": (2, 3, 4, 5, 6, 8),
    "autoround": (2, 3, 4, 8),
}
GpuType = Literal[
    "v100-32gb",
    "a10-24gb",
    "l40s-48gb",
    "a100-40gb",
    "a100-80gb",
    "h100-80gb",
    "h200-141gb",
    "b200-192gb",
    "mi300x-192gb",
]
GPU_TYPES: tuple[GpuType, ...] = get_args(GpuType)
# the links a pool's GPUs talk over within a node (`pool.configured`): NVLink (PCIe for a type that
# has none), PCIe, or InfiniBand (a GPU a node: every collective crosses the network)
Interconnect = Literal["nvlink", "pcie", "infiniband"]


ParallelDegree = Annotated[
    int, Field(strict=True, ge=1, le=64), WithJsonSchema({"type": "integer", "enum": [1, 2, 4, 8, 16, 32, 64]})
]  # a power of two


class _Features(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TrainingFeatures(_Features):
    """A training job: the model, the data, the method, the parallel layout, the hardware."""

    variant: TrainingVariant
    params_b: float = Field(gt=0, le=2000, allow_inf_nan=False)  # model parameters, billions
    active_params_b: float | None = Field(default=None, gt=0, le=2000, allow_inf_nan=False)  # MoE: per token
    layers: int = Field(strict=True, ge=1, le=1024)
    hidden_size: int = Field(strict=True, ge=64, le=131072)
    seq_len: int = Field(strict=True, ge=1, le=1 << 21)  # tokens a sample
    dataset_tokens_m: float = Field(gt=0, le=1e8, allow_inf_nan=False)  # tokens an epoch, millions
    epochs: float = Field(gt=0, le=1000, allow_inf_nan=False)
    global_batch: int = Field(strict=True, ge=1, le=1 << 20)  # samples a step
    micro_batch: int = Field(strict=True, ge=1, le=1 << 14)  # samples a GPU a forward pass
    precision: Precision = "bf16"
    optimizer: Optimizer = "adamw"
    lora_rank: int | None = Field(default=None, strict=True, ge=1, le=4096)
    # a shorthand, or the modules as users list them (`LORA_MODULES`: each architecture's own names)
    lora_targets: LoraTargetSet | Annotated[list[LoraModule], Field(min_length=1, max_length=32)] | None = None
    gradient_checkpointing: bool = False
    zero_stage: int = Field(default=0, strict=True, ge=0, le=3)  # ZeRO / FSDP sharding stage
    tensor_parallel: ParallelDegree = 1
    pipeline_parallel: ParallelDegree = 1
    flash_attention: bool = True
    gpu_type: GpuType | None = None  # default: the pool's
    gpu_memory_gb: float | None = Field(default=None, gt=0, le=1024, allow_inf_nan=False)  # default: the pool's
    reference_model: bool = False  # DPO and distillation hold a frozen copy of the model too
    # The model's shape as its config gives it (Hugging Face config.json names); each absent one is
    # assumed (docs/contract/events.md, "Job features"): a 50,000-word vocabulary, an MLP 3.5 times the
    # width, heads of 128 units, as many key-value heads as heads, untied input and output embeddings.
    vocab_size: int | None = Field(default=None, strict=True, ge=2, le=1 << 22)
    intermediate_size: int | None = Field(default=None, strict=True, ge=1, le=1 << 20)  # the MLP's width
    attention_heads: int | None = Field(default=None, strict=True, ge=1, le=4096)
    kv_heads: int | None = Field(default=None, strict=True, ge=1, le=4096)  # fewer than heads: grouped-query
    head_dim: int | None = Field(default=None, strict=True, ge=1, le=4096)  # default: hidden_size / heads
    tied_embeddings: bool | None = None  # the output layer shares the input embedding's weights
    # what a run keeps: an fp32 master copy of the trained weights (mixed precision, the Hugging Face
    # Trainer's bf16=True); false: pure 16-bit training (weights, gradients and optimizer state in 16 bits,
    # as torchtune does). Absent: kept when precision is 16-bit or fp8
    master_weights: bool | None = None
    # The stack a run uses, where it changes memory or time (docs/contract/events.md, "Job features"):
    # each absent one takes the framework's default, and the framework's absent is transformers (the
    # Hugging Face Trainer with peft and accelerate). zero_stage says what is sharded whatever the
    # framework: FSDP's FULL_SHARD is stage 3, SHARD_GRAD_OP stage 2, NO_SHARD stage 0.
    framework: Framework | None = None
    loss: Loss | None = None  # whole: the fp32 logits at once; chunked: a chunk at a time; fused: none held
    loss_chunks: int | None = Field(default=None, strict=True, ge=2, le=1024)  # chunked only; default 8
    optimizer_impl: OptimizerImpl | None = None  # foreach: PyTorch's default; deepspeed: DeepSpeed's fused Adam
    # LoRA, QLoRA, DoRA: adapters (and their inputs) in fp32 and, under QLoRA, the base's unquantized
    # parameters upcast to fp32 (peft's k-bit preparation); false: all held in the compute precision
    upcast: bool | None = None
    base_bits: Literal[4, 8] | None = None  # QLoRA: the base's linear layers in NF4 (4) or int8 (8); default 4
    offload: Annotated[list[Offloaded], Field(min_length=1, max_length=3)] | None = None  # kept in host memory

    @model_validator(mode="after")
    def _consistent(self) -> "TrainingFeatures":
        problems = []
        if self.micro_batch > self.global_batch:
            problems.append(f"micro_batch: must be <= global_batch ({self.micro_batch} > {self.global_batch})")
        if self.active_params_b is not None and self.active_params_b > self.params_b:
            problems.append(f"active_params_b: must be <= params_b ({self.active_params_b} > {self.params_b})")
        for name in ("tensor_parallel", "pipeline_parallel"):
            value = getattr(self, name)
            if value & (value - 1):
                problems.append(f"{name}: must be a power of two (got {value})")
        if self.kv_heads is not None and self.attention_heads is not None and self.attention_heads % self.kv_heads:
            problems.append(
                f"kv_heads: must divide attention_heads ({self.attention_heads} heads, {self.kv_heads} key-value)"
            )
        adapter = self.variant in ADAPTER_VARIANTS
        if self.lora_rank is not None and not adapter:
            problems.append(f"lora_rank: only for variants {', '.join(ADAPTER_VARIANTS)} (variant is {self.variant!r})")
        if self.lora_targets is not None and not adapter:
            problems.append(
                f"lora_targets: only for variants {', '.join(ADAPTER_VARIANTS)} (variant is {self.variant!r})"
            )
        if self.loss_chunks is not None and self.loss != "chunked":
            problems.append(f"loss_chunks: only with loss 'chunked' (loss is {self.loss!r})")
        if self.upcast is not None and not adapter:
            problems.append(f"upcast: only for variants {', '.join(ADAPTER_VARIANTS)} (variant is {self.variant!r})")
        if self.offload is not None and len(set(self.offload)) < len(self.offload):
            problems.append(f"offload: each part once (got {', '.join(self.offload)})")
        if self.base_bits is not None and self.variant != "qlora":
            problems.append(f"base_bits: only for variant 'qlora' (variant is {self.variant!r})")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class QuantizationFeatures(_Features):
    """A post-training quantization job: the model, the method, its calibration, the hardware."""

    params_b: float = Field(gt=0, le=2000, allow_inf_nan=False)
    algorithm: QuantAlgorithm
    bits: int = Field(strict=True, ge=2, le=8)
    calibration_samples: int = Field(default=128, strict=True, ge=0, le=1_000_000)
    seq_len: int = Field(default=2048, strict=True, ge=1, le=1 << 21)  # tokens a calibration sample
    group_size: int | None = Field(default=None, strict=True, ge=8, le=4096)
    # the model's shape as its config gives it; absent, estimated from params_b at a usual depth-to-width ratio
    layers: int | None = Field(default=None, strict=True, ge=1, le=1024)
    hidden_size: int | None = Field(default=None, strict=True, ge=64, le=131072)
    intermediate_size: int | None = Field(default=None, strict=True, ge=1, le=1 << 20)  # the MLP's width
    # AWQ, GPTQ, AutoRound: the 16-bit model stays in host memory and each layer goes to the GPU in
    # turn (the methods' own scripts, auto-round's default); false: the whole model on the GPUs
    # (transformers' integration, `device_map="auto"`). Absent: true for AutoRound, false otherwise
    model_on_host: bool | None = None
    gpu_type: GpuType | None = None
    gpu_memory_gb: float | None = Field(default=None, gt=0, le=1024, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bits_of_algorithm(self) -> "QuantizationFeatures":
        allowed = QUANT_BITS[self.algorithm]
        if self.bits not in allowed:
            raise ValueError(
                f"bits: {self.algorithm} quantizes to {', '.join(map(str, allowed))} bits (got {self.bits})"
            )
        if self.model_on_host is not None and self.algorithm not in ("awq", "gptq", "autoround"):
            raise ValueError(
                f"model_on_host: only for algorithms awq, gptq, autoround (algorithm is {self.algorithm!r})"
            )
        return self


Features = TrainingFeatures | QuantizationFeatures  # a job's features, validated by its kind

FEATURES: dict[str, type[TrainingFeatures] | type[QuantizationFeatures]] = {
    "training": TrainingFeatures,
    "quantization": QuantizationFeatures,
}
