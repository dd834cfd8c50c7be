"""Version 2 of the training physics (the stack's own accounting) inside the job forecasters:
its parts, the lessons an out-of-memory failure teaches, states from before it, and version 1
left as replays need it."""

from __future__ import annotations

import json

from gpualloc.forecasting import physics
from gpualloc.forecasting.forecasters import Forecasters, hardware
from gpualloc.forecasting.hardware import GIB, USABLE_GIB
from gpualloc.forecasting.jobs import JobForecaster
from gpualloc.schemas.features import TrainingFeatures
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.planner.state import fork, restore

QWEN_SHAPE = {"vocab_size": 151936, "intermediate_size": 18944, "attention_heads": 28, "kv_heads": 4}
QLORA_8B = TrainingFeatures(
    variant="qlora",
    params_b=8.03,
    layers=32,
    hidden_size=4096,
    seq_len=2048,
    dataset_tokens_m=200,
    epochs=1,
    global_batch=32,
    micro_batch=4,
    lora_rank=16,
    lora_targets="all_linear",
    gradient_checkpointing=True,
    vocab_size=128256,
    intermediate_size=14336,
    attention_heads=32,
    kv_heads=8,
    gpu_type="h200-141gb",
)


def test_qlora_holds_its_embeddings_in_fp32_and_its_linears_in_four_bits():
    parts = physics.memory_parts_gb(QLORA_8B, 1)
    embeddings = 2 * 128256 * 4096 * 4 / GIB  # untied input and output, upcast to fp32
    linears = (8.03e9 - 2 * 128256 * 4096) * physics.MEASURED.nf4_bytes / GIB
    assert parts["weights"] >= embeddings + linears
    assert parts["weights"] < embeddings + linears + 1.0  # the adapters are a small rest


def test_logits_grow_with_the_vocabulary_and_the_runtime_holds_the_context():
    small = QLORA_8B.model_copy(update={"vocab_size": 32000})
    ratio = physics.memory_parts_gb(QLORA_8B, 1)["logits"] / physics.memory_parts_gb(small, 1)["logits"]
    assert abs(ratio - 128256 / 32000) < 1e-9
    assert physics.memory_parts_gb(QLORA_8B, 1)["runtime"] > physics.MEASURED.context_gib


def test_fp32_training_runs_at_the_fp32_rate_not_tf32s():
    bf16 = QLORA_8B.model_copy(update={"variant": "lora", "gradient_checkpointing": False})
    fp32 = bf16.model_copy(update={"precision": "fp32"})
    slower = physics.step_seconds(fp32, "h200-141gb", 1) / physics.step_seconds(bf16, "h200-141gb", 1)
    assert slower > 5  # 989 against 67 TFLOPS, at a better achieved share


def test_an_out_of_memory_count_is_never_chosen_again_for_the_same_configuration():
    fc = Forecasters()
    hw = hardware(QLORA_8B, None, None, 64, 60)
    first = fc.size("training", QLORA_8B, hw, None, None)
    fc.out_of_memory("training", QLORA_8B, hw, first.gpus)
    again = fc.size("training", QLORA_8B, hw, None, None)
    assert again.gpus > first.gpus
    other = QLORA_8B.model_copy(update={"lora_rank": 8})  # another configuration is sized as before
    assert fc.size("training", other, hw, None, None).gpus == first.gpus


def test_an_out_of_memory_failure_the_forecast_already_passed_teaches_no_part_to_shrink():
    huge = QLORA_8B.model_copy(update={"variant": "full", "lora_rank": None, "lora_targets": None, "micro_batch": 16})
    fc = Forecasters()
    hw = hardware(huge, None, None, 64, 60)
    assert fc.jobs._peak("training", huge, "h200-141gb", 1) > USABLE_GIB["h200-141gb"] * 1.05
    fc.out_of_memory("training", huge, hw, 1)
    assert fc.jobs.models["training"].parts.examples == 0
    assert (
        fc.size("training", QLORA_8B, hw, None, None).peak_memory_gb
        == Forecasters().size("training", QLORA_8B, hw, None, None).peak_memory_gb
    )


def test_a_job_forecast_over_the_gpu_at_every_count_is_refused_not_tried():
    unsharded = QLORA_8B.model_copy(
        update={"variant": "full", "lora_rank": None, "lora_targets": None, "params_b": 14.0, "zero_stage": 0}
    )
    fc = Forecasters()
    hw = hardware(unsharded, None, None, 64, 60)
    try:
        fc.size("training", unsharded, hw, None, None)
    except ValueError as refused:
        assert "no count of the pool's 64 GPUs holds the job" in str(refused)
    else:
        raise AssertionError("a 14B full fine-tuning without sharding was given GPUs")


def test_a_new_model_gets_at_least_the_measured_margin_however_well_known_others_are():
    fc = Forecasters()
    hw = hardware(QLORA_8B, None, None, 8, 60)
    known = QLORA_8B.model_copy(update={"params_b": 7.0})
    for _ in range(30):  # a model learned exactly: its errors are nothing
        fc.finished("training", known, hw, 1, 60, fc.jobs._peak("training", known, "h200-141gb", 1))
    unseen = fc.size("training", QLORA_8B, hw, 1, None).peak_memory_gb / fc.jobs._peak(
        "training", QLORA_8B, "h200-141gb", 1
    )
    seen = fc.size("training", known, hw, 1, None).peak_memory_gb / fc.jobs._peak("training", known, "h200-141gb", 1)
    assert unseen > 1.05 and seen < unseen


def test_a_state_from_before_version_2_loads_and_its_new_terms_start_untaught():
    old = JobForecaster(physics=1)
    f = QLORA_8B.model_copy(update=QWEN_SHAPE | {"params_b": 7.6, "hidden_size": 3584, "layers": 28})
    hw = hardware(f, "h100-80gb", 80.0, 8, 60)
    for k in range(5):
        old.learn("training", f, hw, 1, 10 + k, 30.0 + k)
    state = old.dump()
    for kind, model in state["kinds"].items():  # as 6521d26 dumped it: no parts, no runtime term
        del model["parts"]
        model["memory"]["xtx"] = [row[:-1] for row in model["memory"]["xtx"][:-1]]
        model["memory"]["xty"] = model["memory"]["xty"][:-1]
        cut = 3 if kind == "training" else 1  # the runtime term; training's copies and temporaries too
        for group in model["groups"].values():
            ridge = group["memory"]
            ridge["xtx"] = [row[: len(row) - cut] for row in ridge["xtx"][: len(ridge["xtx"]) - cut]]
            ridge["xty"] = ridge["xty"][: len(ridge["xty"]) - cut]
        for _, arch in model["architectures"]:
            arch["xtx"] = [row[: len(row) - cut] for row in arch["xtx"][: len(arch["xtx"]) - cut]]
            arch["xty"] = arch["xty"][: len(arch["xty"]) - cut]
    del state["ran_out"]
    loaded = Forecasters.load({"jobs": json.loads(json.dumps(state)), "traffic": {}}, ForecastSettings())
    assert loaded.jobs.models["training"].parts.examples == 0
    assert loaded.size("training", f, hw, None, None).gpus >= 1
    loaded.finished("training", f, hw, 1, 12, 31.0)  # and it goes on learning
    assert loaded.size("training", f, hw, None, None).gpus >= 1
    replayed = Forecasters.load({"jobs": json.loads(json.dumps(state)), "traffic": {}}, ForecastSettings(physics=1))
    assert replayed.size("training", f, hw, None, None).median == old.forecast("training", f, hw, 0.7, 0.8).median


def test_version_1_reads_none_of_the_shape_fields():
    bare = QLORA_8B.model_copy(update={field: None for field in ("vocab_size", "intermediate_size", "kv_heads")})
    v1 = Forecasters(ForecastSettings(physics=1))
    hw = hardware(QLORA_8B, None, None, 8, 60)
    assert v1.size("training", QLORA_8B, hw, None, None) == v1.size("training", bare, hw, None, None)
    v2 = Forecasters()
    assert v2.size("training", QLORA_8B, hw, 1, None) != v2.size("training", bare, hw, 1, None)


def test_the_most_gpus_a_configuration_ran_out_at_is_kept():
    sharded = QLORA_8B.model_copy(update={"variant": "full", "lora_rank": None, "lora_targets": None, "zero_stage": 3})
    fc = Forecasters()
    hw = hardware(sharded, None, None, 64, 60)
    fc.out_of_memory("training", sharded, hw, 8)
    fc.out_of_memory("training", sharded, hw, 2)  # a smaller count given afterwards
    assert fc.size("training", sharded, hw, None, None).gpus > 8
    found = fork(fc)  # a pass begins: what apply keeps to restore
    fc.out_of_memory("training", sharded, hw, 16)
    restore(fc, found)  # the pass failed
    assert list(fc.jobs.ran_out.values()) == [8]
