"""The job-features contract: every documented field and variant accepted, every rule refused
with the field named, unknown fields refused, and the added optional fields of pool.configured
and job.completed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpualloc.schemas import describe
from gpualloc.schemas.events import JobCompleted, JobSubmitted, PoolConfigured
from gpualloc.schemas.features import (
    ADAPTER_VARIANTS,
    FEATURES,
    GPU_TYPES,
    QUANT_BITS,
    TRAINING_VARIANTS,
    QuantizationFeatures,
    TrainingFeatures,
)

TRAINING = {
    "variant": "full",
    "params_b": 7,
    "layers": 32,
    "hidden_size": 4096,
    "seq_len": 4096,
    "dataset_tokens_m": 200,
    "epochs": 1,
    "global_batch": 256,
    "micro_batch": 2,
}


def submitted(kind: str, features: dict, **sized) -> JobSubmitted:
    return JobSubmitted.model_validate({"id": "j", "kind": kind, "priority": 1, "features": features, **sized})


def problems(kind: str, features: dict) -> list[str]:
    with pytest.raises(ValidationError) as info:
        submitted(kind, features)
    return describe(info.value)


SHAPE = ("vocab_size", "intermediate_size", "attention_heads", "kv_heads", "head_dim", "tied_embeddings")
STACK = ("master_weights", "framework", "loss", "loss_chunks", "optimizer_impl", "offload", "upcast", "base_bits")


def test_the_training_set_has_the_seeds_22_fields_the_models_shape_the_stack_and_10_variants():
    fields = set(TrainingFeatures.model_fields)
    assert len(fields - {*SHAPE, *STACK}) == 22
    assert {*SHAPE, *STACK} <= fields
    assert len(TRAINING_VARIANTS) == 10


def test_the_shape_fields_are_optional_and_checked():
    job = submitted("training", {**TRAINING, "vocab_size": 151936, "attention_heads": 28, "kv_heads": 4})
    features = TrainingFeatures.model_validate(job.features)
    assert features.vocab_size == 151936 and features.intermediate_size is None
    with pytest.raises(ValidationError, match="kv_heads: must divide attention_heads"):
        TrainingFeatures.model_validate({**TRAINING, "attention_heads": 28, "kv_heads": 3})
    with pytest.raises(ValidationError, match="vocab_size"):
        TrainingFeatures.model_validate({**TRAINING, "vocab_size": 0})


@pytest.mark.parametrize("variant", TRAINING_VARIANTS)
def test_every_variant_is_accepted(variant):
    extra = {"lora_rank": 16, "lora_targets": "all_linear"} if variant in ADAPTER_VARIANTS else {}
    job = submitted("training", {**TRAINING, "variant": variant, **extra})
    assert job.feature_model().variant == variant and job.gpus is None


@pytest.mark.parametrize("algorithm", sorted(QUANT_BITS))
def test_every_algorithm_takes_its_bits_and_refuses_others(algorithm):
    for bits in QUANT_BITS[algorithm]:
        assert (
            submitted("quantization", {"params_b": 13, "algorithm": algorithm, "bits": bits}).feature_model().bits
            == bits
        )
    wrong = next(b for b in range(2, 9) if b not in QUANT_BITS[algorithm])
    assert problems("quantization", {"params_b": 13, "algorithm": algorithm, "bits": wrong}) == [
        f"features.bits: {algorithm} quantizes to {', '.join(map(str, QUANT_BITS[algorithm]))} bits (got {wrong})"
    ]


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"params_b": 0}, "features.params_b: Input should be greater than 0"),
        ({"layers": 3.5}, "features.layers: Input should be a valid integer"),
        ({"variant": "rlhf"}, "features.variant: Input should be"),
        ({"micro_batch": 512}, "features.micro_batch: must be <= global_batch (512 > 256)"),
        ({"tensor_parallel": 6}, "features.tensor_parallel: must be a power of two (got 6)"),
        ({"lora_rank": 8}, "features.lora_rank: only for variants lora, qlora, dora (variant is 'full')"),
        ({"active_params_b": 9}, "features.active_params_b: must be <= params_b (9.0 > 7.0)"),
        ({"gpu_type": "h100"}, "features.gpu_type: Input should be"),
        ({"layer": 32}, "features.layer: Extra inputs are not permitted"),
    ],
)
def test_each_rule_is_refused_naming_the_field(change, expected):
    found = problems("training", {**TRAINING, **change})
    assert any(p.startswith(expected) for p in found), found


def test_a_missing_field_is_named():
    features = {k: v for k, v in TRAINING.items() if k != "seq_len"}
    assert "features.seq_len: Field required" in problems("training", features)


def test_batch_inference_has_no_feature_set_yet():
    assert problems("batch_inference", {"requests": 10}) == [
        "features: batch_inference jobs have no feature set yet (give gpus and duration)"
    ]
    sized = submitted("batch_inference", {"requests": 10}, gpus=2, duration=3)  # sized: features are its own
    assert sized.feature_model() is None and set(FEATURES) == {"training", "quantization"}


def test_given_sizes_stand_beside_valid_features():
    job = submitted("training", TRAINING, gpus=8, duration=5)
    assert (job.gpus, job.duration) == (8, 5) and isinstance(job.feature_model(), TrainingFeatures)


def test_pool_gpu_type_and_completed_usage_are_optional_and_checked():
    pool = PoolConfigured.model_validate({"gpus": 8, "gpu_type": "h100-80gb", "gpu_memory_gb": 80})
    assert pool.gpu_type in GPU_TYPES and PoolConfigured.model_validate({"gpus": 8}).gpu_type is None
    with pytest.raises(ValidationError):
        PoolConfigured.model_validate({"gpus": 8, "gpu_type": "tpu-v5"})
    done = JobCompleted.model_validate(
        {"id": "j", "used": {"gpus": 4, "peak_memory_gb": 61.5, "steps": 1200, "duration": 3}}
    )
    assert done.used.gpus == 4 and JobCompleted.model_validate({"id": "j"}).used is None
    with pytest.raises(ValidationError):
        JobCompleted.model_validate({"id": "j", "used": {"gpus": 0}})
    assert isinstance(
        QuantizationFeatures.model_validate({"params_b": 1, "algorithm": "fp8", "bits": 8}).calibration_samples, int
    )
