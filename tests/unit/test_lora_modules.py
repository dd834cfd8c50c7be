"""LoRA target modules as users list them (`features.lora_targets`): each architecture's names map
to the projections they adapt, and the physics counts exactly those."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpualloc.forecasting.physics import adapted, shape_of, trainable_params
from gpualloc.schemas.errors import describe
from gpualloc.schemas.features import LORA_MODULES, TrainingFeatures

BASE = dict(
    variant="lora",
    params_b=8,
    layers=32,
    hidden_size=4096,
    seq_len=2048,
    dataset_tokens_m=10,
    epochs=1,
    global_batch=16,
    micro_batch=4,
    lora_rank=16,
    attention_heads=32,
    kv_heads=8,
    intermediate_size=14336,
)


def job(targets) -> TrainingFeatures:
    return TrainingFeatures(**BASE, lora_targets=targets)


def test_the_shorthand_and_its_modules_adapt_the_same_and_count_the_same():
    for shorthand, modules in (
        ("attention", ["q_proj", "k_proj", "v_proj", "o_proj"]),
        ("all_linear", ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    ):
        assert adapted(job(shorthand)) == adapted(job(modules))
        assert trainable_params(job(shorthand)) == trainable_params(job(modules))


def test_q_and_v_only_count_q_and_v_with_grouped_query_attention():
    """Llama 3 8B's shape: q is 4,096 wide, v 1,024 (8 key-value heads of 128)."""
    f = job(["q_proj", "v_proj"])
    assert adapted(f) == ("q", "v")
    assert trainable_params(f) == 32 * 16 * ((4096 + 4096) + (4096 + 1024))  # rank x (in + out), a layer
    assert trainable_params(f) < trainable_params(job("attention"))


def test_a_fused_projection_is_one_matrix_of_the_fused_width():
    dims = shape_of(job("attention")).projections()
    assert dims["qkv"] == (4096, 4096 + 2 * 1024) and dims["gate_up"] == (4096, 2 * 14336)
    fused, split = job(["query_key_value"]), job(["q_proj", "k_proj", "v_proj"])
    assert trainable_params(fused) == 32 * 16 * (4096 + 6144)
    assert trainable_params(fused) < trainable_params(split)  # one A matrix instead of three
    assert adapted(job(["c_attn", "c_proj", "c_fc"])) == ("qkv", "o", "down", "up")


def test_every_known_module_maps_to_projections_the_shape_has():
    dims = shape_of(job("attention")).projections()
    for name, projections in LORA_MODULES.items():
        assert projections and all(p in dims for p in projections), name
        assert trainable_params(job([name])) > 0


@pytest.mark.parametrize(
    ("targets", "words"),
    [
        (["q_prj"], "lora_targets: unknown LoRA target module 'q_prj' (did you mean 'q_proj'?)"),
        ([], "lora_targets"),
        (["q_proj"] * 33, "lora_targets"),
    ],
)
def test_an_unknown_module_or_an_empty_or_long_list_is_refused_naming_the_field(targets, words):
    with pytest.raises(ValidationError) as refused:
        job(targets)
    assert any(words in line for line in describe(refused.value))
