"""The physics of a training job on the stack most fine-tuning runs on (PyTorch, Hugging Face
transformers and peft, bitsandbytes): what a GPU must hold, and how long the job runs.

Memory, by what holds it (`memory_parts_gb`, GiB a GPU), the way that stack allocates it:
- weights: fp32 master weights under mixed precision (16-bit or fp8 compute), 16 bits in pure
  16-bit training; a LoRA or DoRA base in 16 bits with fp32 adapters; a QLoRA base of NF4 linear
  layers (`nf4_bytes` a parameter with their block scales) whose other parameters (embeddings,
  output layer, norms) are upcast to fp32 by the usual k-bit preparation; a DPO or distillation
  reference in 16 bits;
- gradients and optimizer state of what is trained, in its own precision: AdamW 8 bytes a fp32
  parameter, 8-bit AdamW 2, Adafactor's factored moments about nothing, SGD's and Lion's
  momentum 4; AdamW's foreach step holds one more tensor of the parameters' size;
- activations a token and layer from the model's width and its MLP's, in each precision regime
  (mixed: an fp32 residual stream under autocast; half: all 16-bit; fp32), the fp32 inputs peft
  casts for each adapted projection, eager attention's scores (heads x sequence), and with
  gradient checkpointing each layer's input and one layer rebuilt; autocast's 16-bit copies of
  the weights while the forward and backward use them;
- logits: tokens x vocabulary, held in 16 bits, upcast to fp32 for the loss, with their gradient;
- runtime: the caching allocator's reserve over what is allocated (more with checkpointing, whose
  recomputed layers fragment it) and the CUDA context.
The peak is the larger of the forward-backward one (activations, logits, copies) and the
optimizer step's (gradients and its temporaries), over the weights and state held throughout.

Time: FLOPs (2 a multiply-add: linear layers, causal attention, a backward of 2 forwards, 1 where
no weight is trained, a forward again under checkpointing, the reference's forward) at the type's
rate for the precision, times an achieved fraction that falls with the model's width; each layer's
launch overhead; QLoRA's dequantization and the optimizer's pass over its state at the type's
memory bandwidth, once an optimizer step (every `accumulation` micro-batches).

The constants in `MEASURED` are fitted to the real runs of `benchmarks/real` by
`deploy/measure/fit_physics.py`, with their leave-one-model-out errors (docs/forecasting.md);
the rest are datasheet figures (`hardware`) or the byte counts of the formats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpualloc.forecasting import links, physics_v1, stack
from gpualloc.forecasting.hardware import GIB, HBM_TB_S, peak_flops
from gpualloc.forecasting.memo import by_identity
from gpualloc.forecasting.physics_v1 import Sizing, smallest_count, steps_of
from gpualloc.schemas.features import LORA_MODULES, Interconnect, TrainingFeatures

__all__ = ["MEASURED", "MEASURED_SPREAD", "Measured", "Shape", "Sizing", "shape_of", "smallest_count", "steps_of"]

VOCABULARY = 50_000  # words of a vocabulary no feature gives (GPT-2's 50,257; Llama's 32,000 to 128,256)
MLP_RATIO = 3.5  # the MLP's width over the model's when no feature gives it (Llama-3 and Mistral 7-8B)
HEAD_DIM = 128  # units an attention head when no feature gives the heads (Llama, Mistral, Qwen 7B+)
FULL = ("full", "cpt", "dpo")  # variants that train every weight
FROZEN_BACKWARD = ("lora", "qlora", "dora", "adapter", "prefix", "prompt", "ia3")  # no base weight gradients
HALF = {"bf16": 2, "fp16": 2, "fp8": 2}  # bytes a weight of 16-bit and fp8 training (fp8: cast per multiply)
INT8_BYTES = 1.0  # a weight of bitsandbytes' int8 (its row scales are a few bytes a row)
CHUNKED_HELD = 4.0  # bytes a token and word a chunked loss holds whole: the 16-bit logits and their gradient
OPTIMIZER_BYTES = {"adamw": 8, "adamw_8bit": 2, "adafactor": 0, "sgd": 4, "lion": 4}  # a fp32 parameter
STEP_TEMPORARY = {"adamw": 4, "lion": 4}  # a fp32 parameter: the foreach step's temporary
# kernels a step launches for each trained tensor where the optimizer loops over them one by one
# (a foreach or fused step launches a handful for all of them): transformers' Adafactor, counted from
# its `step` for a factored 2-D parameter (squares, row and column means and their moving
# averages, the reciprocal square roots' product, the update, its RMS clip, learning rate and
# in-place add, the casts of a 16-bit parameter); bitsandbytes' 8-bit optimizers (one blockwise
# update kernel and its state's bookkeeping); PyTorch's for-loop AdamW, SGD and a Lion's
LOOP_KERNELS = {"adafactor": 24, "adamw_8bit": 4}
FOR_LOOP_KERNELS = {"adamw": 12, "sgd": 3, "lion": 6}
OPTIMIZER_TRAFFIC = {"adamw": 40, "adamw_8bit": 16, "adafactor": 24, "sgd": 20, "lion": 20}  # bytes read and written
ADAPTED = {  # the projections each LoRA target set adapts
    "attention": ("q", "k", "v", "o"),
    "attention_mlp": ("q", "k", "v", "o", "gate", "up", "down"),
    "all_linear": ("q", "k", "v", "o", "gate", "up", "down"),
}


def adapted(f: TrainingFeatures) -> tuple[str, ...]:
    """The projections a LoRA job adapts (`Shape.projections`' names): its shorthand's (attention
    when none), or those of the modules it lists (`features.LORA_MODULES`), each once."""
    targets = f.lora_targets or "attention"
    if isinstance(targets, str):
        return ADAPTED[targets]
    return tuple(dict.fromkeys(p for module in targets for p in LORA_MODULES[module]))


Regime = str  # "mixed" (fp32 residual under autocast), "half" (all 16-bit) or "fp32"


@dataclass(frozen=True)
class Measured:
    """Constants fitted to real runs (`deploy/measure/fit_physics.py`): bytes a token and layer a
    unit of the width (`act_width`) and of the MLP's width (`act_mlp`) by regime, bytes a token
    and vocabulary word of the logits, a token and head and key of eager attention's scores,
    Adafactor's step temporaries in fp32 copies of the embedding, the allocator's reserve with
    and without checkpointing; the achieved share of peak (16-bit and fp8, fp32) at large widths,
    the width at which it halves, eager attention's share of that, the optimizer pass's and the
    dequantization's slowdown over bandwidth, and each layer's launch overhead a micro-batch."""

    act_width: dict[Regime, float] = field(default_factory=lambda: {"mixed": 0.31, "half": 10.19, "fp32": 106.97})
    act_mlp: dict[Regime, float] = field(default_factory=lambda: {"mixed": 13.60, "half": 6.27, "fp32": 0.0})
    logits: dict[Regime, float] = field(default_factory=lambda: {"mixed": 10.58, "half": 10.53, "fp32": 23.33})
    eager_scores: float = 6.20
    adafactor_copies: float = 2.14
    nf4_bytes: float = 0.53  # 4 bits and the double-quantized block scales (bitsandbytes' NF4, 64-blocks)
    reserve: float = 0.074
    reserve_checkpointed: float = 0.142
    context_gib: float = 0.6  # the CUDA context PyTorch creates (measured: 0.60 GiB on an H200)
    achieved: float = 0.414
    achieved_fp32: float = 0.771
    width_half: float = 148.1
    eager_attention: float = 0.0433
    optimizer_slowdown: float = 0.885
    dequantize_slowdown: float = 10.94
    layer_seconds: float = 0.00203
    launch_seconds: float = 9.4e-6  # a kernel launch of an optimizer's loop over its tensors (version 3)
    # the accounting's version (`ForecastSettings.physics`): 3 holds gradients beside activations
    # (accumulated ones, the output layer's), data parallelism's buckets, ZeRO-3's gathered layers
    # and tensor parallelism's whole activations, and counts collectives' time; 2 does none of that
    version: int = 3


MEASURED = Measured()
# version 2's constants, fitted to the same runs by its own accounting (kept so a ledger's replay
# forecasts as the agent that decided did)
MEASURED_V2 = Measured(
    act_width={"mixed": 0.0, "half": 10.19, "fp32": 111.06},
    act_mlp={"mixed": 13.86, "half": 6.27, "fp32": 0.0},
    logits={"mixed": 10.98, "half": 10.53, "fp32": 24.04},
    eager_scores=6.21,
    adafactor_copies=2.09,
    reserve=0.076,
    reserve_checkpointed=0.144,
    achieved=0.415,
    achieved_fp32=0.772,
    width_half=119.7,
    eager_attention=0.0432,
    optimizer_slowdown=1.10,
    dequantize_slowdown=10.67,
    layer_seconds=0.00217,
    version=2,
)
# the log spread of what runs needed over what `MEASURED` forecast for them, each model's runs by
# constants fitted without them (`deploy/measure/fit_physics.py`): the error to expect of a model
# never seen, which sizes the margin a count is chosen with before any completion is learned
MEASURED_SPREAD = {3: 0.080, 2: 0.082}


@dataclass(frozen=True)
class Shape:
    """A model's shape: given by the features, or assumed where they are silent."""

    hidden: int
    mlp: int
    heads: int
    kv_heads: int
    head_dim: int
    vocabulary: int
    tied: bool
    layers: int

    def projections(self) -> dict[str, tuple[int, int]]:
        """(inputs, outputs) of each linear layer of a decoder layer."""
        q, kv, h, mlp = self.heads * self.head_dim, self.kv_heads * self.head_dim, self.hidden, self.mlp
        return {
            "q": (h, q),
            "k": (h, kv),
            "v": (h, kv),
            "o": (q, h),
            "gate": (h, mlp),
            "up": (h, mlp),
            "down": (mlp, h),
            "qkv": (h, q + 2 * kv),  # fused query, key and value (GPT-NeoX, Falcon, GPT-2, Phi-3)
            "gate_up": (h, 2 * mlp),  # fused gate and up (Phi-3)
        }

    def embedding_params(self) -> float:
        """Parameters of the input embedding and, untied, the output layer."""
        return self.vocabulary * self.hidden * (1 if self.tied else 2)


def shape_of(f: TrainingFeatures) -> Shape:
    heads = f.attention_heads or max(1, f.hidden_size // HEAD_DIM)
    return Shape(
        f.hidden_size,
        f.intermediate_size or round(MLP_RATIO * f.hidden_size),
        heads,
        f.kv_heads or heads,
        f.head_dim or max(1, f.hidden_size // heads),
        f.vocab_size or VOCABULARY,
        bool(f.tied_embeddings),
        f.layers,
    )


def regime(f: TrainingFeatures) -> Regime:
    """How the run's activations are held: fp32 training; an fp32 residual stream under 16-bit
    autocast (mixed-precision full training over fp32 weights, QLoRA over its fp32 upcast
    parts); all 16-bit otherwise (a 16-bit LoRA base, pure 16-bit training, QLoRA without the
    upcast, a ZeRO engine's 16-bit model)."""
    return _regime(f, stack.master_weights(f), stack.upcast(f))


def _regime(f: TrainingFeatures, master: bool, upcast: bool) -> Regime:
    if f.precision in ("fp32", "tf32"):
        return "fp32"
    if (f.variant == "qlora" and upcast) or (f.variant in FULL and master and not _sharded(f, master)):
        return "mixed"
    return "half"


def sharded_master(f: TrainingFeatures) -> bool:
    """A ZeRO engine's mixed precision (DeepSpeed's, FSDP's): the model's weights and gradients in
    16 bits, the fp32 master copy kept with the optimizer's state and sharded with it; without
    sharding, the fp32 weights are the master (autocast, as the Hugging Face Trainer runs)."""
    return _sharded(f, stack.master_weights(f))


def _sharded(f: TrainingFeatures, master: bool) -> bool:
    return master and f.variant in FULL and f.zero_stage >= 1 and f.precision in HALF


def trainable_params(f: TrainingFeatures) -> float:
    """Parameters the optimizer updates."""
    if f.variant in FULL:
        return f.params_b * 1e9
    if f.variant in ("lora", "qlora", "dora"):
        rank = f.lora_rank or 16
        dims = shape_of(f).projections()
        shapes = [dims[p] for p in adapted(f)]
        per_layer = sum(rank * (i + o) for i, o in shapes) + (sum(o for _, o in shapes) if f.variant == "dora" else 0)
        return float(per_layer * f.layers)
    return physics_v1.trainable_params(f)  # adapters, prefixes, prompts, IA3: as version 1 counts them


def _linear_params(f: TrainingFeatures, s: Shape) -> float:
    """Parameters in the decoder's linear layers (what QLoRA quantizes): all but the embeddings."""
    total = f.params_b * 1e9
    return min(max(0.0, total - s.embedding_params()), total)


def _tokens(f: TrainingFeatures) -> int:
    """Tokens a micro-batch's forward holds: DPO's chosen and rejected sequences together."""
    return f.micro_batch * (2 if f.variant == "dpo" else 1) * f.seq_len


def _accumulation(f: TrainingFeatures, replicas: int) -> int:
    """Micro-batches a replica runs an optimizer step."""
    return math.ceil(f.global_batch / (f.micro_batch * replicas))


def _logits_bytes(f: TrainingFeatures, s: Shape, reg: Regime, k: Measured) -> float:
    """Bytes the loss holds at once: every token's logits (fp32 and their gradient) for a whole
    loss; the 16-bit logits and their gradient, and one chunk in fp32, for a chunked one; for a
    fused one the final hidden state's fp32 gradient, which it makes in the forward pass."""
    tokens, kind = _tokens(f), stack.loss(f)
    if kind == "fused":
        return tokens * s.hidden * 4.0
    per_word = k.logits[reg]
    if kind == "chunked":
        per_word = min(per_word, CHUNKED_HELD + (per_word - CHUNKED_HELD) / stack.loss_chunks(f, tokens))
    return tokens * s.vocabulary * per_word


def _activation_share(tensor_parallel: int) -> float:
    """Of a layer's activations, the share a GPU holds under tensor parallelism without sequence
    parallelism: 10 of the 34 bytes a token and unit (norms' and dropouts' inputs) stay whole,
    the rest split (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
    Transformer Models", eq. 2)."""
    return (10 + 24 / tensor_parallel) / 34


@dataclass(frozen=True)
class _Terms:
    """A job's bytes that do not depend on its GPU count: a model replica's, before sharding."""

    full: bool
    weights: float
    copies: float  # autocast's 16-bit copies of fp32 weights
    grads: float
    grad_width: float  # bytes a trained parameter's gradient
    state: float
    temporary: float  # the optimizer step's
    reference: float
    output_grad: float  # the output layer's gradient, made at the backward pass's start
    gathered_layer: float  # a ZeRO-3 layer gathered whole, the next prefetched, and one layer's gradient
    activations: float  # a micro-batch's, on a pipeline stage, without pipelining's micro-batches in flight
    kept: float  # with checkpointing: the layers' inputs (the part that multiplies with micro-batches in flight)
    logits: float
    reserve: float  # the caching allocator's, over what is allocated
    saved: float  # the activations a micro-batch saves for its backward, wherever they are held
    parameters_offloaded: bool  # the weights in host memory, two layers at a time on the GPU


@by_identity
def _terms(f: TrainingFeatures, k: Measured) -> _Terms:
    master, upcast = stack.master_weights(f), stack.upcast(f)
    s, reg = shape_of(f), _regime(f, master, upcast)
    params, trainable = f.params_b * 1e9, trainable_params(f)
    full, engine = f.variant in FULL, _sharded(f, master)
    compute_width = HALF.get(f.precision, 4)  # a weight as the multiplies read it
    width = 4 if (reg == "fp32" or (full and master and not engine)) else compute_width  # a weight
    adapter_bytes = 4 if upcast else compute_width  # peft keeps adapters (and their state) in fp32
    copies = 0.0
    if full:
        weights = params * width
        state_width = 1.0 if engine else width / 4  # 16-bit state when the weights are 16-bit
        if reg == "mixed":
            copies = 2.0 * (params - s.vocabulary * s.hidden * (0 if s.tied else 1))  # autocast's 16-bit copies
    elif f.variant == "qlora":
        linear = _linear_params(f, s)
        base = k.nf4_bytes if (f.base_bits or 4) == 4 else INT8_BYTES
        weights = base * linear + adapter_bytes * (params - linear) + adapter_bytes * trainable
        state_width = adapter_bytes / 4
    else:
        weights = params * compute_width + adapter_bytes * trainable
        state_width = adapter_bytes / 4
    grad_width = width if full else adapter_bytes
    grads = grad_width * trainable
    state = trainable * (OPTIMIZER_BYTES[f.optimizer] * state_width + (4 if engine else 0))  # the master copy
    impl = stack.optimizer_impl(f)
    offload = set(f.offload or ())
    temporary = 0.0
    if impl == "foreach":
        temporary = trainable * STEP_TEMPORARY.get(f.optimizer, 0) * state_width
    elif impl == "for_loop" and full:  # one tensor at a time: the largest, the embedding
        temporary = s.vocabulary * s.hidden * STEP_TEMPORARY.get(f.optimizer, 0) * state_width
    if f.optimizer == "adafactor" and full:
        temporary = k.adafactor_copies * 4.0 * s.vocabulary * s.hidden
    if "optimizer" in offload or impl == "in_backward":
        # the step runs on the host, or each parameter's as its gradient is made: a layer's
        # gradients at a time on the GPU, no step temporary (and, on the host, no state)
        grads, temporary = grads / f.layers, 0.0
        state = 0.0 if "optimizer" in offload else state
    if "parameters" in offload:  # two layers' worth on the GPU: the one computed, the next fetched
        weights, copies = 2 * weights / f.layers, 2 * copies / f.layers
    layer_params = _linear_params(f, s) / f.layers
    tokens = _tokens(f)
    layer = k.act_width[reg] * s.hidden + k.act_mlp[reg] * s.mlp
    if f.variant in ("lora", "qlora", "dora") and upcast:
        dims = s.projections()
        layer += 4.0 * sum(dims[p][0] for p in adapted(f))  # fp32 adapter inputs
    if not f.flash_attention:
        layer += k.eager_scores * s.heads * f.seq_len
    stage_layers = math.ceil(f.layers / f.pipeline_parallel)
    held_layers = min(stage_layers, 2) if "activations" in offload else stage_layers  # the rest on the host
    kept = 0.0
    if f.gradient_checkpointing:
        input_bytes = tokens * (4.0 if reg in ("mixed", "fp32") else 2.0) * s.hidden  # each layer's input
        kept, activations, saved = input_bytes * held_layers, tokens * layer, input_bytes * stage_layers
    else:
        activations, saved = tokens * layer * held_layers, tokens * layer * stage_layers
    return _Terms(
        full=full,
        weights=weights,
        copies=copies,
        grads=grads,
        grad_width=grad_width,
        state=state,
        temporary=temporary,
        reference=params * compute_width if f.variant == "dpo" or f.reference_model else 0.0,
        output_grad=s.vocabulary * s.hidden * grad_width if full else 0.0,
        gathered_layer=2 * layer_params * compute_width + grad_width * trainable / f.layers,
        activations=activations,
        kept=kept,
        logits=_logits_bytes(f, s, reg, k),
        reserve=k.reserve_checkpointed if f.gradient_checkpointing else k.reserve,
        saved=saved,
        parameters_offloaded="parameters" in offload,
    )


def memory_parts_gb(
    f: TrainingFeatures, gpus: int, k: Measured = MEASURED, components: bool = False
) -> dict[str, float]:
    """GiB a GPU holds at its peak when the job runs on `gpus` GPUs, by what holds it (the
    learned correction weighs each part on its own: a part this gets wrong is off in proportion)."""
    t = _terms(f, k)
    split = f.tensor_parallel * f.pipeline_parallel
    replicas = max(1, gpus // split)
    weights, copies, reference, grad_bytes = t.weights, t.copies, t.reference, t.grads
    state, temporary = t.state, t.temporary
    v3 = k.version >= 3
    buckets = gathered = 0.0
    if replicas > 1 and f.zero_stage == 0 and v3:  # DDP's buckets: a copy of every gradient (PyTorch's default)
        buckets = grad_bytes
    if f.zero_stage >= 1:
        state /= replicas
        temporary /= replicas
    if f.zero_stage >= 2:
        grad_bytes /= replicas
    if f.zero_stage >= 3:  # the frozen reference is wrapped by the same engine, so sharded alike
        reference /= replicas
        if not t.parameters_offloaded:  # offloaded, the two layers on the GPU are already whole
            weights /= replicas
            copies /= replicas
            if replicas > 1 and v3:
                gathered = t.gathered_layer
    accumulation = _accumulation(f, replicas)
    carried = 0.0
    if v3:
        # gradients held through the forward and backward passes: those accumulated over earlier
        # micro-batches, and the output layer's, made while the logits' gradient and every layer's
        # activations are still held (the backward pass's first step)
        carried = (grad_bytes if accumulation > 1 else 0.0) + t.output_grad / f.tensor_parallel
    in_flight = min(f.pipeline_parallel, accumulation)
    activations = t.kept * in_flight + t.activations * (1 if f.gradient_checkpointing else in_flight)
    activations *= _activation_share(f.tensor_parallel) if v3 else 1 / f.tensor_parallel
    logits = t.logits / f.tensor_parallel
    forward = (copies + carried + buckets) / split + gathered + activations + logits
    step = (grad_bytes + buckets + temporary) / split
    held = (weights + reference + state) / split
    if forward >= step:
        parts = {"weights": held - state / split + copies / split + gathered}
        parts |= {"gradients": (carried + buckets) / split, "optimizer": state / split}
        parts |= {"activations": activations, "logits": logits}
    else:
        parts = {"weights": held - state / split, "gradients": (grad_bytes + buckets) / split}
        parts |= {"optimizer": (state + temporary) / split, "activations": 0.0, "logits": 0.0}
    allocated = sum(parts.values())
    out = {name: b / GIB for name, b in parts.items()}
    out["runtime"] = t.reserve * allocated / GIB + k.context_gib
    if components:  # every part whichever phase peaks; the peak's parts first, in their order
        raw = {"weights": (weights + reference) / split + gathered, "gradients": (grad_bytes + buckets) / split}
        raw |= {"optimizer": state / split, "activations": activations, "logits": logits}
        return {name: b / GIB for name, b in raw.items()} | {
            "runtime": out["runtime"],
            "copies": copies / split / GIB,
            "temporary": temporary / split / GIB,
        }
    return out


def memory_components_gb(f: TrainingFeatures, gpus: int, k: Measured = MEASURED) -> dict[str, float]:
    """Every part `memory_parts_gb` accounts for, whether or not it is held at the peak: the terms
    the pooled memory correction scales, so a pool whose runs peak where the physics says they do
    not (or hold what it says they free) is corrected part by part."""
    return memory_parts_gb(f, gpus, k, components=True)


def memory_per_gpu_gb(f: TrainingFeatures, gpus: int, k: Measured = MEASURED) -> float:
    """GiB a GPU needs when the job runs on `gpus` GPUs: its reserved peak and the CUDA context."""
    return sum(memory_parts_gb(f, gpus, k).values())


def step_seconds(
    f: TrainingFeatures, gpu_type: str, gpus: int, k: Measured = MEASURED, interconnect: Interconnect | None = None
) -> float:
    """Seconds a micro-batch takes on each of the job's model replicas (its share of the
    optimizer's step included)."""
    return sum(step_parts(f, gpu_type, gpus, k, interconnect).values())


def step_parts(
    f: TrainingFeatures, gpu_type: str, gpus: int, k: Measured = MEASURED, interconnect: Interconnect | None = None
) -> dict[str, float]:
    """`step_seconds` by what takes it: the multiplies, each layer's launches, QLoRA's
    dequantization, the optimizer's pass over its state, and what the GPUs' collectives add
    where they cannot hide behind the compute (`communication_seconds`)."""
    s = shape_of(f)
    split = f.tensor_parallel * f.pipeline_parallel
    replicas = max(1, gpus // split)
    active = (f.active_params_b or f.params_b) * 1e9
    matmul = max(active - s.vocabulary * s.hidden * (0 if s.tied else 1), 0.1 * active)  # the lookup is free
    attention = 2.0 * f.layers * f.seq_len * s.heads * s.head_dim  # causal QK and AV, a token's forward
    full = f.variant in FULL
    linear_passes = (3 if full or f.variant not in FROZEN_BACKWARD else 2) + (1 if f.gradient_checkpointing else 0)
    attention_passes = 3 + (1 if f.gradient_checkpointing else 0)
    if f.variant == "dpo" or f.reference_model:
        linear_passes += 1
        attention_passes += 1
    achieved = (
        (k.achieved_fp32 if f.precision in ("fp32", "tf32") else k.achieved) * s.hidden / (s.hidden + k.width_half)
    )
    rate = peak_flops(gpu_type, f.precision) * split
    tokens = _tokens(f)
    compute = tokens * (2 * matmul * linear_passes / achieved + attention * attention_passes / achieved)
    if not f.flash_attention:
        compute += tokens * attention * attention_passes * (1 / (achieved * k.eager_attention) - 1 / achieved)
    overhead = k.layer_seconds * math.ceil(f.layers / f.pipeline_parallel) * (2 if f.gradient_checkpointing else 1)
    bandwidth = HBM_TB_S[gpu_type] * 1e12
    dequantize = 0.0
    if f.variant == "qlora":  # each pass dequantizes the NF4 weights to 16 bits
        passes = 3 if f.gradient_checkpointing else 2
        dequantize = k.dequantize_slowdown * _linear_params(f, s) * 2.5 * passes / bandwidth / split
    updated = trainable_params(f) / split / (replicas if f.zero_stage >= 1 else 1)
    accumulation = _accumulation(f, replicas)
    optimizer = k.optimizer_slowdown * updated * OPTIMIZER_TRAFFIC[f.optimizer] / bandwidth / accumulation
    if k.version >= 3:
        optimizer += _loop_launches(f, s) * k.launch_seconds / accumulation
    communication = communication_seconds(f, gpu_type, gpus, compute / rate, interconnect, k) if k.version >= 3 else 0.0
    return {
        "compute": compute / rate,
        "overhead": overhead,
        "dequantize": dequantize,
        "optimizer": optimizer,
        "communication": communication,
    }


def _loop_launches(f: TrainingFeatures, s: Shape) -> int:
    """Kernels an optimizer step launches one trained tensor at a time (`LOOP_KERNELS`)."""
    kernels = LOOP_KERNELS.get(f.optimizer, 0)
    if not kernels and stack.optimizer_impl(f) == "for_loop":
        kernels = FOR_LOOP_KERNELS.get(f.optimizer, 0)
    if f.variant in FULL:  # a decoder layer's seven weights and two norms; the embedding, final norm, output
        tensors = 9 * f.layers + (2 if s.tied else 3)
    elif f.variant in ("lora", "qlora", "dora"):  # each adapted projection's A and B (and DoRA's magnitude)
        tensors = len(adapted(f)) * (3 if f.variant == "dora" else 2) * f.layers
    else:
        tensors = f.layers
    return kernels * tensors


def communication_seconds(
    f: TrainingFeatures,
    gpu_type: str,
    gpus: int,
    compute: float,
    interconnect: Interconnect | None = None,
    k: Measured = MEASURED,
) -> float:
    """Seconds a micro-batch waits on collectives (ring collectives, `links`), beyond the
    `compute` seconds they overlap:
    - data parallel (DDP, ZeRO-1 and -2): the gradients reduced once an optimizer step, overlapped
      with that micro-batch's backward pass (two thirds of its compute); ZeRO-1 and -2 then gather
      the updated 16-bit weights, which nothing overlaps;
    - ZeRO-3 and FSDP's full shard: every micro-batch gathers the 16-bit weights for the forward
      and again for the backward pass and reduce-scatters the gradients, prefetched behind the
      compute;
    - tensor parallelism: two all-reduces of a layer's output a layer in each direction, on the
      critical path (Megatron-LM's layout);
    - what is kept in host memory crosses the GPU's PCIe link (`links.host_bytes_s`): offloaded
      weights come in for the forward and again for the backward pass and saved activations go out
      and come back, both behind the compute; an offloaded optimizer's gradients go out and the
      updated 16-bit weights come in once a step, which nothing overlaps (the host's own step is
      not counted)."""
    split = f.tensor_parallel * f.pipeline_parallel
    replicas = max(1, gpus // split)
    s, t = shape_of(f), _terms(f, k)
    compute_width = HALF.get(f.precision, 4)
    full = f.variant in FULL
    weights = f.params_b * 1e9 / split * compute_width
    grads = trainable_params(f) / split * t.grad_width
    seconds = 0.0
    if replicas > 1:
        rate = links.link_bytes_s(gpu_type, gpus, interconnect)
        if f.zero_stage >= 3:
            moved = 2 * links.gather_s(weights, replicas, rate) + links.gather_s(grads, replicas, rate)
            seconds += max(0.0, moved - compute)
        else:
            exposed = max(0.0, links.all_reduce_s(grads, replicas, rate) - compute * 2 / 3)
            if f.zero_stage >= 1:
                exposed += links.gather_s(weights if full else grads, replicas, rate)
            seconds += exposed / _accumulation(f, replicas)
    if f.tensor_parallel > 1:
        rate = links.link_bytes_s(gpu_type, f.tensor_parallel, interconnect)
        output = _tokens(f) * s.hidden * compute_width
        layers = math.ceil(f.layers / f.pipeline_parallel)
        seconds += 4 * layers * links.all_reduce_s(output, f.tensor_parallel, rate)
    offload = set(f.offload or ())
    if offload:
        host = links.host_bytes_s(gpu_type)
        shard = replicas if f.zero_stage >= 3 else 1
        behind = 2 * weights / shard if "parameters" in offload else 0.0
        if "activations" in offload:
            behind += 2 * t.saved / f.tensor_parallel
        seconds += max(0.0, behind / host - compute)
        if "optimizer" in offload:
            shard = replicas if f.zero_stage >= 1 else 1
            seconds += (grads + weights) / shard / host / _accumulation(f, replicas)
    return seconds


def training_hours(
    f: TrainingFeatures, gpu_type: str, gpus: int, k: Measured = MEASURED, interconnect: Interconnect | None = None
) -> float:
    """Wall time on `gpus` GPUs of `gpu_type`: the micro-batches each replica runs."""
    replicas = max(1, gpus // (f.tensor_parallel * f.pipeline_parallel))
    micro_batches = f.dataset_tokens_m * 1e6 * f.epochs / (replicas * f.micro_batch * f.seq_len)
    return micro_batches * step_seconds(f, gpu_type, gpus, k, interconnect) / 3600.0
