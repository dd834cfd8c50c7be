"""A job no count holds is refused naming the change to its own settings that would fit (physics
version 3); older versions' reasons replay as they were written."""

from __future__ import annotations

import re

import pytest

from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.job_forecast import Hardware, SizeError
from gpualloc.schemas.features import TrainingFeatures
from gpualloc.schemas.settings import ForecastSettings

HW = Hardware("a100-80gb", 80.0, 8, 5, nominal=True)
LONG_8B = TrainingFeatures(
    variant="full",
    params_b=8.03,
    layers=32,
    hidden_size=4096,
    vocab_size=128256,
    intermediate_size=14336,
    seq_len=8192,
    dataset_tokens_m=10,
    epochs=1,
    global_batch=64,
    micro_batch=8,
)


def refusal(f: TrainingFeatures, physics: int = 3) -> str:
    with pytest.raises(SizeError) as info:
        Forecasters(ForecastSettings(physics=physics)).size("training", f, HW, None, None)
    return str(info.value)


def test_the_reason_names_the_fewest_changes_that_fit_and_they_do():
    reason = refusal(LONG_8B)
    fix = re.search(r"it would fit with (.*) \(about (\d+) GB a GPU at (\d+)\)", reason)
    assert fix, reason
    update = {}
    for change in fix.group(1).split(" and "):
        field, value = change.split(": ")
        update[field] = {"true": True, "chunked": "chunked"}.get(value, value if not value.isdigit() else int(value))
    changed = LONG_8B.model_copy(update=update)
    sized = Forecasters(ForecastSettings()).size("training", changed, HW, None, None)
    assert sized.gpus <= HW.max_gpus  # the change named is one the forecasters then size


def test_one_change_is_named_where_one_suffices_the_cheapest_first():
    lora = {"variant": "lora", "lora_rank": 16}
    reason = refusal(LONG_8B.model_copy(update={**lora, "micro_batch": 8, "seq_len": 2048}))
    assert "it would fit with micro_batch: 2 (about" in reason  # a smaller micro-batch before recomputation
    reason = refusal(LONG_8B.model_copy(update={**lora, "micro_batch": 2, "seq_len": 8192}))
    assert "it would fit with gradient_checkpointing: true (about" in reason


def test_older_physics_refuse_as_they_did():
    assert "would fit" not in refusal(LONG_8B, physics=2)
