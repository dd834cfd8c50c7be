"""A fine-tuning run measured on a real GPU (`benchmarks/real`) as the forecasters see it: the
features a submitter would give for it and what it really needed.

A run's features are those of a job that trains `dataset_tokens_m` million tokens for one epoch
at `accumulation` micro-batches an optimizer step on one GPU of `gpu_type`; its truth is the
memory it needed (the reserved peak plus the CUDA context, GiB), whether it ran out of memory,
and its hours (the tokens over the tokens a second it was measured at).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpualloc.schemas.features import TrainingFeatures

CONTEXT_GIB = 0.60  # the CUDA context of the runs that do not record theirs
SHAPE_FIELDS = ("vocab_size", "intermediate_size", "attention_heads", "kv_heads", "head_dim", "tied_embeddings")


@dataclass(frozen=True)
class RealRun:
    model: str
    features: TrainingFeatures
    needed_gib: float | None  # None: it ran out of memory
    held_at_failure_gib: float | None  # what an out-of-memory run held when it failed
    tokens_per_second: float | None
    hours: float | None  # of the features' tokens at the measured rate

    @property
    def oom(self) -> bool:
        return self.needed_gib is None


def real_run(
    record: dict[str, Any],
    gpu_type: str = "h200-141gb",
    dataset_tokens_m: float = 200.0,
    accumulation: int = 1,
    shape: bool = True,
) -> RealRun:
    """The run of one line of a `benchmarks/real` file (`shape`: with the model's shape fields;
    without, as a submitter who gives only the seed's features would)."""
    fields: dict[str, Any] = {
        "variant": record["variant"],
        "params_b": record["params_b"],
        "layers": record["layers"],
        "hidden_size": record["hidden_size"],
        "seq_len": record["seq_len"],
        "dataset_tokens_m": dataset_tokens_m,
        "epochs": 1,
        "global_batch": record["micro_batch"] * accumulation,
        "micro_batch": record["micro_batch"],
        "precision": record["precision"],
        "optimizer": record["optimizer"],
        "lora_rank": record.get("lora_rank"),
        "lora_targets": record.get("lora_targets"),
        "gradient_checkpointing": record["gradient_checkpointing"],
        "flash_attention": record["flash_attention"],
        "gpu_type": gpu_type,
        "reference_model": bool(record.get("reference_model", False)) and record["variant"] != "dpo",
    }
    if shape:
        fields |= {name: record[name] for name in SHAPE_FIELDS if record.get(name) is not None}
    features = TrainingFeatures(**fields)
    ok = record["outcome"] == "ok"
    context = float(record.get("cuda_context_gib", CONTEXT_GIB))
    rate = record.get("tokens_per_second") if ok else None
    tokens = dataset_tokens_m * 1e6 * (2 if record["variant"] == "dpo" else 1)
    return RealRun(
        record["model"],
        features,
        record["peak_reserved_gib"] + context if ok else None,
        record.get("peak_allocated_gib_at_failure"),
        rate,
        tokens / rate / 3600.0 if rate else None,
    )
