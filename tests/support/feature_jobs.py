"""Random but valid `features` objects, for tests that send jobs given by their features."""

from __future__ import annotations

import random

from gpualloc.schemas.features import ADAPTER_VARIANTS, QUANT_BITS, TRAINING_VARIANTS

# a valid 7B LoRA fine-tune, the features the tests' jobs are sized by (with overrides where they say)
LORA_7B = {
    "variant": "lora",
    "params_b": 7,
    "layers": 32,
    "hidden_size": 4096,
    "seq_len": 2048,
    "dataset_tokens_m": 50,
    "epochs": 1,
    "global_batch": 64,
    "micro_batch": 4,
}

MODELS = ((0.5, 24, 1024), (1.5, 28, 1536), (7, 32, 4096), (13, 40, 5120), (34, 48, 7168))  # params_b, layers, hidden


def training_features(rng: random.Random) -> dict:
    params, layers, hidden = rng.choice(MODELS)
    variant = rng.choice(TRAINING_VARIANTS)
    micro = rng.choice([1, 2, 4])
    f = {
        "variant": variant,
        "params_b": params,
        "layers": layers,
        "hidden_size": hidden,
        "seq_len": rng.choice([512, 2048, 4096]),
        "dataset_tokens_m": rng.choice([5, 20, 80]),
        "epochs": rng.choice([1, 2]),
        "global_batch": micro * rng.choice([8, 32]),
        "micro_batch": micro,
        "zero_stage": rng.choice([0, 3]),
        "gradient_checkpointing": rng.random() < 0.5,
    }
    if variant in ADAPTER_VARIANTS:
        f["lora_rank"] = rng.choice([8, 16, 64])
    return f


# the algorithms drawn, fixed (the golden ledger's streams draw from them: a later algorithm of the
# contract would change every stream)
ALGORITHMS = ("awq", "bnb_int8", "bnb_nf4", "fp8", "gguf_k", "gptq", "smoothquant")


def quantization_features(rng: random.Random) -> dict:
    algorithm = rng.choice(ALGORITHMS)
    return {
        "params_b": rng.choice([1, 7, 13, 70]),
        "algorithm": algorithm,
        "bits": rng.choice(QUANT_BITS[algorithm]),
        "calibration_samples": rng.choice([64, 128, 512]),
    }


def feature_job(rng: random.Random, job_id: str) -> dict:
    """A `job.submitted` payload with features only: the pool sizes it."""
    if rng.random() < 0.7:
        return {"id": job_id, "kind": "training", "priority": rng.randint(1, 9), "features": training_features(rng)}
    return {"id": job_id, "kind": "quantization", "priority": rng.randint(1, 9), "features": quantization_features(rng)}
