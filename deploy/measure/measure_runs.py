"""Measure fine-tuning runs on one GPU the way `benchmarks/real/README.md` says: peak memory
(allocated, reserved, the CUDA context) and step time of each configuration in RUNS.

Standalone (PyTorch, transformers, peft; bitsandbytes for QLoRA and 8-bit AdamW, skipped with a
note when absent): models are built from their published configurations with random weights on
the GPU, so nothing is downloaded. Writes one JSON object a line to `--out` as each run ends, in
the fields of `benchmarks/real/h200-runs.jsonl`, and stops starting runs past `--budget` seconds.

    python deploy/measure/measure_runs.py --out runs.jsonl --budget 400
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import time
import traceback

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

GIB = 1024**3
DEVICE = "cuda"  # where models are built and run

# Published configurations (each model's config.json): model_type and the fields that size it.
MODELS: dict[str, tuple[str, dict]] = {
    "qwen2.5-0.5b": (
        "qwen2",
        dict(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        ),
    ),
    "qwen2.5-3b": (
        "qwen2",
        dict(
            vocab_size=151936,
            hidden_size=2048,
            intermediate_size=11008,
            num_hidden_layers=36,
            num_attention_heads=16,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        ),
    ),
    "qwen2.5-7b": (
        "qwen2",
        dict(
            vocab_size=152064,
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            tie_word_embeddings=False,
        ),
    ),
    "qwen2.5-14b": (
        "qwen2",
        dict(
            vocab_size=152064,
            hidden_size=5120,
            intermediate_size=13824,
            num_hidden_layers=48,
            num_attention_heads=40,
            num_key_value_heads=8,
            tie_word_embeddings=False,
        ),
    ),
    "llama-3.2-1b": (
        "llama",
        dict(
            vocab_size=128256,
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            tie_word_embeddings=True,
        ),
    ),
    "llama-3.2-3b": (
        "llama",
        dict(
            vocab_size=128256,
            hidden_size=3072,
            intermediate_size=8192,
            num_hidden_layers=28,
            num_attention_heads=24,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=True,
        ),
    ),
    "qwen2.5-1.5b": (
        "qwen2",
        dict(
            vocab_size=151936,
            hidden_size=1536,
            intermediate_size=8960,
            num_hidden_layers=28,
            num_attention_heads=12,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        ),
    ),
    "gemma-7b": (
        "gemma",
        dict(
            vocab_size=256000,
            hidden_size=3072,
            intermediate_size=24576,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=16,
            head_dim=256,
            tie_word_embeddings=True,
        ),
    ),
    "mistral-nemo-12b": (
        "mistral",
        dict(
            vocab_size=131072,
            hidden_size=5120,
            intermediate_size=14336,
            num_hidden_layers=40,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=False,
        ),
    ),
    "qwen2.5-32b": (
        "qwen2",
        dict(
            vocab_size=152064,
            hidden_size=5120,
            intermediate_size=27648,
            num_hidden_layers=64,
            num_attention_heads=40,
            num_key_value_heads=8,
            tie_word_embeddings=False,
        ),
    ),
    "phi-3-medium": (
        "phi3",
        dict(
            vocab_size=32064,
            hidden_size=5120,
            intermediate_size=17920,
            num_hidden_layers=40,
            num_attention_heads=40,
            num_key_value_heads=10,
            tie_word_embeddings=False,
        ),
    ),
    "yi-6b": (
        "llama",
        dict(
            vocab_size=64000,
            hidden_size=4096,
            intermediate_size=11008,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=4,
            tie_word_embeddings=False,
        ),
    ),
    "llama-3.1-8b": (
        "llama",
        dict(
            vocab_size=128256,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            tie_word_embeddings=False,
        ),
    ),
    "llama-2-7b": (
        "llama",
        dict(
            vocab_size=32000,
            hidden_size=4096,
            intermediate_size=11008,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=32,
            tie_word_embeddings=False,
        ),
    ),
    "tinyllama-1.1b": (
        "llama",
        dict(
            vocab_size=32000,
            hidden_size=2048,
            intermediate_size=5632,
            num_hidden_layers=22,
            num_attention_heads=32,
            num_key_value_heads=4,
            tie_word_embeddings=False,
        ),
    ),
    "mistral-7b": (
        "mistral",
        dict(
            vocab_size=32000,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            tie_word_embeddings=False,
        ),
    ),
    "gemma-2b": (
        "gemma",
        dict(
            vocab_size=256000,
            hidden_size=2048,
            intermediate_size=16384,
            num_hidden_layers=18,
            num_attention_heads=8,
            num_key_value_heads=1,
            head_dim=256,
            tie_word_embeddings=True,
        ),
    ),
    "phi-3-mini": (
        "phi3",
        dict(
            vocab_size=32064,
            hidden_size=3072,
            intermediate_size=8192,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=32,
            tie_word_embeddings=False,
        ),
    ),
    "smollm2-1.7b": (
        "llama",
        dict(
            vocab_size=49152,
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=24,
            num_attention_heads=32,
            num_key_value_heads=32,
            tie_word_embeddings=True,
        ),
    ),
}

TARGETS = {
    "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "attention_mlp": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "all_linear": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
}
PHI3_TARGETS = {
    "attention": ["qkv_proj", "o_proj"],
    "attention_mlp": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
}
PHI3_TARGETS["all_linear"] = PHI3_TARGETS["attention_mlp"]


def run(model, variant, seq, mb, ckpt=False, rank=None, targets=None, opt="adamw", prec="bf16", flash=True):
    return dict(
        model=model,
        variant=variant,
        precision=prec,
        optimizer=opt,
        seq_len=seq,
        micro_batch=mb,
        gradient_checkpointing=ckpt,
        lora_rank=rank,
        lora_targets=targets,
        flash_attention=flash,
    )


# In order of what the shared runs lack most: QLoRA, DPO, 8-bit AdamW and SGD, 16k-32k tokens,
# other families (32k and 256k vocabularies, no GQA), then boundaries that may run out of memory.
RUNS = [
    run("llama-3.1-8b", "qlora", 2048, 4, True, 16, "all_linear"),
    run("mistral-7b", "qlora", 4096, 2, False, 16, "attention"),
    run("qwen2.5-7b", "qlora", 1024, 8, False, 64, "all_linear"),
    run("llama-3.2-1b", "qlora", 2048, 8, False, 16, "all_linear"),
    run("qwen2.5-14b", "qlora", 2048, 2, True, 16, "all_linear"),
    run("llama-2-7b", "qlora", 2048, 4, True, 8, "attention"),
    run("qwen2.5-0.5b", "dpo", 1024, 2),
    run("llama-3.2-1b", "dpo", 512, 4, True),
    run("tinyllama-1.1b", "dpo", 1024, 2, True),
    run("qwen2.5-0.5b", "full", 2048, 4, opt="adamw_8bit"),
    run("llama-3.2-1b", "full", 1024, 4, opt="adamw_8bit"),
    run("llama-3.2-3b", "full", 2048, 2, True, opt="adamw_8bit"),
    run("qwen2.5-3b", "full", 2048, 2, True, opt="adamw_8bit"),
    run("qwen2.5-0.5b", "full", 2048, 4, opt="sgd"),
    run("tinyllama-1.1b", "full", 2048, 4, True, opt="sgd"),
    run("llama-3.1-8b", "lora", 16384, 1, True, 16, "attention"),
    run("qwen2.5-1.5b", "full", 16384, 1, True),
    run("llama-3.2-1b", "lora", 32768, 1, True, 16, "all_linear"),
    run("mistral-7b", "lora", 32768, 1, True, 16, "attention"),
    run("qwen2.5-0.5b", "full", 16384, 2, True),
    run("mistral-7b", "lora", 2048, 4, False, 16, "attention"),
    run("llama-2-7b", "lora", 2048, 4, False, 16, "all_linear"),
    run("gemma-2b", "full", 1024, 4),
    run("phi-3-mini", "lora", 2048, 4, True, 16, "all_linear"),
    run("tinyllama-1.1b", "full", 2048, 4),
    run("smollm2-1.7b", "full", 2048, 4, True),
    run("qwen2.5-3b", "full", 2048, 2, True, opt="adafactor"),
    run("llama-3.2-1b", "full", 1024, 2, prec="fp32"),
    run("tinyllama-1.1b", "full", 512, 4, prec="fp32"),
    run("tinyllama-1.1b", "lora", 2048, 4, False, 16, "attention", flash=False),
    run("llama-3.1-8b", "dora", 1024, 2, False, 16, "attention"),
    run("gemma-2b", "lora", 2048, 8, False, 16, "attention"),
    run("mistral-7b", "full", 512, 1, True, opt="adafactor"),
    run("llama-2-7b", "full", 512, 1, True),
    run("qwen2.5-14b", "lora", 4096, 4, True, 16, "all_linear"),
    run("phi-3-mini", "full", 1024, 2, True),
]

# QLoRA and 8-bit AdamW over families and lengths, and more of what the first set holds one of.
MORE = [
    run("llama-3.1-8b", "qlora", 2048, 4, True, 16, "all_linear"),
    run("mistral-7b", "qlora", 4096, 2, False, 16, "attention"),
    run("qwen2.5-7b", "qlora", 1024, 8, False, 64, "all_linear"),
    run("llama-3.2-1b", "qlora", 2048, 8, False, 16, "all_linear"),
    run("qwen2.5-14b", "qlora", 2048, 2, True, 16, "all_linear"),
    run("llama-2-7b", "qlora", 2048, 4, True, 8, "attention"),
    run("llama-3.1-8b", "qlora", 8192, 1, True, 64, "all_linear"),
    run("phi-3-mini", "qlora", 2048, 4, False, 16, "attention_mlp"),
    run("gemma-2b", "qlora", 1024, 4, True, 16, "attention"),
    run("qwen2.5-3b", "qlora", 4096, 2, False, 32, "attention"),
    run("qwen2.5-0.5b", "full", 2048, 4, opt="adamw_8bit"),
    run("llama-3.2-1b", "full", 1024, 4, opt="adamw_8bit"),
    run("llama-3.2-3b", "full", 2048, 2, True, opt="adamw_8bit"),
    run("mistral-7b", "full", 1024, 1, True, opt="adamw_8bit"),
    run("qwen2.5-7b", "full", 1024, 1, True, opt="adafactor"),
    run("llama-3.2-3b", "full", 8192, 1, True),
    run("mistral-7b", "lora", 4096, 2, False, 16, "all_linear"),
    run("gemma-2b", "full", 1024, 2, flash=False),
    run("qwen2.5-1.5b", "lora", 8192, 2, True, 16, "attention"),
    run("qwen2.5-1.5b", "full", 2048, 4, True, opt="sgd"),
    run("llama-3.2-1b", "full", 512, 2, prec="fp32", flash=False),
    run("smollm2-1.7b", "dpo", 1024, 2, True),
]
# Kept aside: models and settings the physics is never fitted to, to say how it does on ones it has not seen.
ASIDE = [
    run("gemma-7b", "lora", 2048, 4, True, 16, "all_linear"),
    run("gemma-7b", "qlora", 2048, 2, False, 16, "attention"),
    run("mistral-nemo-12b", "lora", 4096, 2, True, 16, "attention"),
    run("mistral-nemo-12b", "qlora", 2048, 4, True, 16, "all_linear"),
    run("qwen2.5-32b", "qlora", 2048, 2, True, 16, "all_linear"),
    run("phi-3-medium", "lora", 2048, 2, True, 16, "attention_mlp"),
    run("yi-6b", "full", 1024, 1, True, opt="adafactor"),
    run("yi-6b", "lora", 4096, 4, False, 16, "attention"),
    run("qwen2.5-3b", "dpo", 1024, 2, True),
    run("tinyllama-1.1b", "full", 2048, 8, opt="adamw_8bit"),
    run("smollm2-1.7b", "full", 4096, 2, True, opt="sgd"),
    run("llama-3.2-3b", "lora", 2048, 2, False, 16, "attention", flash=False),
    run("qwen2.5-1.5b", "full", 1024, 2, True, prec="fp32"),
    run("mistral-7b", "dora", 2048, 2, True, 16, "attention"),
    run("llama-3.1-8b", "lora", 32768, 1, True, 16, "all_linear"),
    run("gemma-2b", "dpo", 512, 2, True),
    run("qwen2.5-14b", "qlora", 8192, 1, True, 16, "attention"),
    run("yi-6b", "qlora", 4096, 4, False, 16, "all_linear"),
    run("qwen2.5-0.5b", "lora", 4096, 8, False, 16, "attention"),
    run("phi-3-mini", "full", 1024, 2, True, opt="adamw_8bit"),
    run("gemma-7b", "full", 512, 1, True, opt="adafactor"),
    run("mistral-nemo-12b", "full", 512, 1, True),
    run("qwen2.5-7b", "dpo", 512, 1, True),
    run("llama-3.2-1b", "qlora", 8192, 2, True, 16, "all_linear"),
]
SETS = {"first": RUNS, "more": MORE, "aside": ASIDE}


def sync() -> None:
    torch.cuda.synchronize()


def fresh() -> None:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def build_config(name: str, flash: bool):
    kind, fields = MODELS[name]
    config = AutoConfig.for_model(kind, **fields)
    config.use_cache = False
    config._attn_implementation = "sdpa" if flash else "eager"
    return config


def from_config(config, dtype):
    with torch.device(DEVICE):
        try:
            return AutoModelForCausalLM.from_config(config, dtype=dtype)
        except TypeError:
            return AutoModelForCausalLM.from_config(config, torch_dtype=dtype)


def quantize_4bit(model) -> None:
    """Replace every decoder Linear by bitsandbytes' NF4 Linear4bit (bf16 compute), as loading with
    BitsAndBytesConfig(load_in_4bit, nf4) does; the output layer stays 16-bit."""
    import bitsandbytes as bnb

    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and child_name != "lm_head":
                q = bnb.nn.Linear4bit(
                    child.in_features,
                    child.out_features,
                    bias=child.bias is not None,
                    compute_dtype=torch.bfloat16,
                    quant_type="nf4",
                    device="meta",
                )
                q.weight = bnb.nn.Params4bit(
                    child.weight.data.to(torch.bfloat16), requires_grad=False, quant_type="nf4"
                ).to(DEVICE)
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(module, child_name, q)
                del child
    gc.collect()
    torch.cuda.empty_cache()


def adapters(model, spec):
    import peft

    kind = MODELS[spec["model"]][0]
    targets = (PHI3_TARGETS if kind == "phi3" else TARGETS)[spec["lora_targets"]]
    config = peft.LoraConfig(
        r=spec["lora_rank"],
        lora_alpha=2 * spec["lora_rank"],
        lora_dropout=0.0,
        target_modules=targets,
        use_dora=spec["variant"] == "dora",
        task_type="CAUSAL_LM",
    )
    return peft.get_peft_model(model, config)


def optimizer_of(name: str, params):
    params = [p for p in params if p.requires_grad]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-5)
    if name == "adamw_8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=1e-5)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=1e-5, relative_step=False, scale_parameter=False, warmup_init=False)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9)
    raise ValueError(name)


def build(spec):
    """The model (and the DPO reference), its optimizer and whether the forward runs under
    autocast: full and DPO train fp32 weights under bf16 autocast (fp32 without it); LoRA and DoRA
    train fp32 adapters on a bf16 base; QLoRA fp32 adapters on an NF4 base with its other
    parameters upcast to fp32 (peft's k-bit preparation) under bf16 autocast."""
    variant = spec["variant"]
    config = build_config(spec["model"], spec["flash_attention"])
    reference = None
    autocast = spec["precision"] == "bf16"
    if variant in ("full", "dpo"):
        model = from_config(config, torch.float32)
        if variant == "dpo":
            reference = from_config(config, torch.bfloat16).eval().requires_grad_(False)
    elif variant == "qlora":
        model = from_config(config, torch.bfloat16)
        quantize_4bit(model)
        with contextlib.suppress(Exception):  # peft wraps bitsandbytes layers by this flag
            model.is_loaded_in_4bit = True
        for p in model.parameters():
            p.requires_grad_(False)
            if p.dtype in (torch.float16, torch.bfloat16) and type(p).__name__ != "Params4bit":
                p.data = p.data.to(torch.float32)
        model = adapters(model, spec)
    else:
        autocast = False
        model = from_config(config, torch.bfloat16)
        model = adapters(model, spec)
    if spec["gradient_checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if variant in ("lora", "dora", "qlora"):
            model.enable_input_require_grads()
    model.train()
    return model, reference, optimizer_of(spec["optimizer"], model.parameters()), autocast


def sequence_logps(logits, ids):
    """Summed log-probabilities of each sequence's own next tokens (fp32 log-softmax)."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return torch.gather(logp, 2, ids[:, 1:, None]).squeeze(-1).sum(-1)


def step(spec, model, reference, optimizer, autocast, vocab):
    mb, seq = spec["micro_batch"], spec["seq_len"]
    ctx = torch.autocast(DEVICE, dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    if spec["variant"] == "dpo":  # micro_batch pairs: chosen and rejected in one forward
        ids = torch.randint(0, vocab, (2 * mb, seq), device=DEVICE)
        with ctx:
            policy = sequence_logps(model(input_ids=ids).logits, ids)
        with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
            ref = sequence_logps(reference(input_ids=ids).logits, ids)
        margin = (policy[:mb] - policy[mb:]) - (ref[:mb] - ref[mb:])
        loss = -torch.nn.functional.logsigmoid(0.1 * margin).mean()
    else:
        ids = torch.randint(0, vocab, (mb, seq), device=DEVICE)
        with ctx:
            loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    sync()


def measure(spec, context_gib: float) -> dict:
    kind, fields = MODELS[spec["model"]]
    record = dict(spec)
    record["reference_model"] = spec["variant"] == "dpo"
    record.update(
        {
            "layers": fields["num_hidden_layers"],
            "hidden_size": fields["hidden_size"],
            "intermediate_size": fields["intermediate_size"],
            "attention_heads": fields["num_attention_heads"],
            "kv_heads": fields["num_key_value_heads"],
            "head_dim": fields.get("head_dim", fields["hidden_size"] // fields["num_attention_heads"]),
            "vocab_size": fields["vocab_size"],
            "tied_embeddings": fields["tie_word_embeddings"],
        }
    )
    fresh()
    model = reference = optimizer = None
    try:
        model, reference, optimizer, autocast = build(spec)
        record["params_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 4)
        if spec["variant"] == "qlora":  # Params4bit holds two 4-bit values a byte
            record["params_b"] = round(
                sum(p.numel() * (2 if type(p).__name__ == "Params4bit" else 1) for p in model.parameters()) / 1e9, 4
            )
        record["trainable_m"] = round(sum(p.numel() for p in model.parameters() if p.requires_grad) / 1e6, 3)
        record["autocast"] = autocast
        sync()
        record["weights_gib"] = round(torch.cuda.memory_allocated() / GIB, 3)
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(4):
            start = time.perf_counter()
            step(spec, model, reference, optimizer, autocast, fields["vocab_size"])
            times.append(time.perf_counter() - start)
        record["outcome"] = "ok"
        record["peak_allocated_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 3)
        record["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / GIB, 3)
        record["step_seconds"] = round(statistics.median(times[1:]), 4)
        record["tokens_per_second"] = round(
            spec["micro_batch"] * spec["seq_len"] * (2 if spec["variant"] == "dpo" else 1) / record["step_seconds"], 1
        )
    except torch.cuda.OutOfMemoryError:
        record["outcome"] = "oom"
        record["peak_allocated_gib_at_failure"] = round(torch.cuda.max_memory_allocated() / GIB, 3)
    except Exception as error:  # a configuration this stack cannot run: say why, go on
        record["outcome"] = "error"
        record["error"] = f"{type(error).__name__}: {error}"[:500]
        traceback.print_exc()
    record["cuda_context_gib"] = context_gib
    del model, reference, optimizer
    fresh()
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=float, default=400.0, help="seconds: start no run past this")
    parser.add_argument("--set", choices=sorted(SETS), default="first", help="which list of runs")
    args = parser.parse_args()
    begun = time.monotonic()
    torch.cuda.init()
    torch.zeros(1, device=DEVICE)
    free, total = torch.cuda.mem_get_info()
    context = round((total - free - torch.cuda.memory_reserved()) / GIB, 3)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    for name in ("peft", "bitsandbytes"):
        try:
            versions[name] = __import__(name).__version__
        except Exception as error:  # absent: its runs report the error
            versions[name] = f"absent ({type(error).__name__})"
    header = {
        "gpu": torch.cuda.get_device_name(),
        "total_gib": round(total / GIB, 3),
        "cuda_context_gib": context,
        **versions,
    }
    print(json.dumps(header), flush=True)
    runs = SETS[args.set]
    with open(args.out, "a") as out:
        out.write(json.dumps({"header": header}) + "\n")
        for spec in runs:
            if time.monotonic() - begun > args.budget:
                print(f"budget spent: {len(runs)} runs listed", flush=True)
                break
            t0 = time.monotonic()
            record = measure(spec, context)
            record["wall_seconds"] = round(time.monotonic() - t0, 1)
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
