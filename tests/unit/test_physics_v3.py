"""Version 3 of the training physics: the stack a run uses (framework defaults, loss, optimizer
implementation, upcast, the quantized base's width), gradients held beside activations, the
multi-GPU buffers and collectives' time; version 2 left as ledgers replay it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from gpualloc.forecasting import links, physics, stack
from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.hardware import GIB
from gpualloc.forecasting.job_forecast import Hardware, SizeError
from gpualloc.forecasting.physics import MEASURED, MEASURED_V2
from gpualloc.schemas.features import TrainingFeatures
from gpualloc.schemas.settings import ForecastSettings

LLAMA_8B = {
    "params_b": 8.03,
    "layers": 32,
    "hidden_size": 4096,
    "seq_len": 2048,
    "dataset_tokens_m": 200,
    "epochs": 1,
    "global_batch": 4,
    "micro_batch": 4,
    "vocab_size": 128256,
    "intermediate_size": 14336,
    "attention_heads": 32,
    "kv_heads": 8,
}


def job(**fields) -> TrainingFeatures:
    return TrainingFeatures(**{"variant": "lora", **LLAMA_8B, **fields})


def parts(f: TrainingFeatures, gpus: int = 1, k=MEASURED) -> dict[str, float]:
    return physics.memory_parts_gb(f, gpus, k)


def test_each_framework_supplies_what_a_job_leaves_unsaid_and_an_explicit_field_wins():
    assert stack.loss(job()) == "whole" and stack.optimizer_impl(job()) == "foreach"
    assert stack.upcast(job()) and stack.master_weights(job(variant="full"))
    tune = job(framework="torchtune")
    assert (stack.loss(tune), stack.loss_chunks(tune, 8192)) == ("chunked", 8)
    assert not stack.upcast(tune) and not stack.master_weights(job(variant="full", framework="torchtune"))
    assert stack.loss_chunks(job(framework="litgpt"), 8192) == 64  # 128-token chunks
    assert stack.optimizer_impl(job(framework="deepspeed")) == "deepspeed"
    assert stack.loss(job(framework="torchtune", loss="whole")) == "whole"
    assert stack.upcast(job(framework="torchtune", upcast=True))
    assert not stack.upcast(job(master_weights=False))  # pure 16-bit training upcasts nothing
    assert stack.upcast(job(precision="fp32"))  # everything is fp32 already


def test_the_stack_fields_are_checked_naming_the_rule():
    with pytest.raises(ValueError, match="loss_chunks: only with loss 'chunked'"):
        job(loss_chunks=4)
    with pytest.raises(ValueError, match="upcast: only for variants"):
        job(variant="full", upcast=False)
    with pytest.raises(ValueError, match="base_bits: only for variant 'qlora'"):
        job(base_bits=8)


def test_a_chunked_loss_holds_the_16_bit_logits_and_a_chunk_and_a_fused_one_none():
    whole, chunked, fused = (parts(job(loss=loss))["logits"] for loss in ("whole", None, "fused"))
    chunked = parts(job(loss="chunked", loss_chunks=8))["logits"]
    tokens, vocabulary = 4 * 2048, 128256
    per_word = MEASURED.logits["half"]
    assert whole == pytest.approx(tokens * vocabulary * per_word / GIB)
    assert chunked == pytest.approx(tokens * vocabulary * (4 + (per_word - 4) / 8) / GIB)
    assert fused == pytest.approx(tokens * 4096 * 4 / GIB) and fused < chunked / 10


def test_qlora_wholly_in_16_bits_holds_less_and_an_int8_base_more():
    upcast, half = job(variant="qlora"), job(variant="qlora", upcast=False)
    assert physics.regime(upcast) == "mixed" and physics.regime(half) == "half"
    embeddings = 2 * 128256 * 4096
    assert parts(upcast)["weights"] - parts(half)["weights"] == pytest.approx(
        embeddings * 2 / GIB, rel=0.1
    )  # the unquantized embeddings in 2 bytes instead of 4 (and the adapters)
    assert parts(half)["activations"] < parts(upcast)["activations"]  # no fp32 residual, no fp32 adapter inputs
    int8 = job(variant="qlora", base_bits=8)
    linear = physics._linear_params(int8, physics.shape_of(int8))
    assert parts(int8)["weights"] - parts(upcast)["weights"] == pytest.approx(
        linear * (physics.INT8_BYTES - MEASURED.nf4_bytes) / GIB
    )


def test_only_a_foreach_step_holds_a_temporary_of_the_state():
    full = {"variant": "full", "global_batch": 4, "micro_batch": 1, "seq_len": 512}
    foreach = physics.memory_components_gb(job(**full), 1)["temporary"]
    assert foreach == pytest.approx(8.03e9 * 4 / GIB)
    assert physics.memory_components_gb(job(**full, optimizer_impl="fused"), 1)["temporary"] == 0.0
    assert physics.memory_components_gb(job(**full, framework="deepspeed"), 1)["temporary"] == 0.0
    loop = physics.memory_components_gb(job(**full, optimizer_impl="for_loop"), 1)["temporary"]
    assert loop == pytest.approx(128256 * 4096 * 4 / GIB)  # one tensor at a time: the embedding


def test_gradients_accumulated_over_micro_batches_are_held_through_the_next_forward():
    one = job(variant="full", micro_batch=2, global_batch=2, seq_len=4096, optimizer="sgd", optimizer_impl="fused")
    accumulating = one.model_copy(update={"global_batch": 16})
    held = parts(accumulating)["gradients"] - parts(one)["gradients"]
    assert parts(one)["activations"] > 0 and held == pytest.approx(8.03e9 * 4 / GIB)  # fp32 gradients
    assert parts(accumulating, k=MEASURED_V2) == parts(one, k=MEASURED_V2)  # version 2: as it was


def test_the_output_layers_gradient_is_held_beside_the_activations():
    full = job(variant="full", micro_batch=2, global_batch=2, seq_len=4096, optimizer="sgd", optimizer_impl="fused")
    at_peak = parts(full)
    assert at_peak["activations"] > 0  # the forward-backward phase peaks
    assert at_peak["gradients"] == pytest.approx(128256 * 4096 * 4 / GIB)


def test_data_parallel_buckets_copy_the_gradients_and_zero_3_gathers_a_layer():
    full = job(variant="full", micro_batch=1, global_batch=8, seq_len=1024, optimizer="sgd")
    alone, ddp = physics.memory_components_gb(full, 1), physics.memory_components_gb(full, 8)
    assert ddp["gradients"] == pytest.approx(2 * alone["gradients"])
    sharded = full.model_copy(update={"zero_stage": 3})
    shape = physics.shape_of(sharded)
    layer = physics._linear_params(sharded, shape) / 32
    gathered = 2 * layer * 2 + 2 * 8.03e9 / 32  # two layers in 16 bits, one layer's 16-bit gradient
    weights = physics.memory_components_gb(sharded, 8)["weights"]
    assert weights == pytest.approx((8.03e9 * 2 / 8 + gathered) / GIB)
    assert physics.memory_components_gb(sharded, 8, MEASURED_V2)["weights"] == pytest.approx(8.03e9 * 2 / 8 / GIB)


def test_tensor_parallelism_splits_24_of_a_layers_34_bytes():
    one, eight = job(), job(tensor_parallel=8)
    ratio = parts(eight, 8)["activations"] / parts(one)["activations"]
    assert ratio == pytest.approx((10 + 24 / 8) / 34)


def test_collectives_cost_what_the_compute_cannot_hide_on_the_slowest_link():
    full = job(variant="full", micro_batch=1, global_batch=8, seq_len=512, zero_stage=3)
    assert physics.communication_seconds(full, "h100-80gb", 1, 0.0) == 0.0
    nvlink = physics.communication_seconds(full, "h100-80gb", 8, 0.0)
    pcie = physics.communication_seconds(full, "h100-80gb", 8, 0.0, "pcie")
    network = physics.communication_seconds(full, "h100-80gb", 16, 0.0)
    weights = 8.03e9 * 2
    moved = 2 * 7 / 8 * weights + 7 / 8 * weights  # gathered twice, gradients reduce-scattered
    assert nvlink == pytest.approx(moved / (450e9 * links.ACHIEVED_LINK))
    assert pcie > nvlink and network > nvlink
    assert physics.communication_seconds(full, "h100-80gb", 8, compute=10 * nvlink) == 0.0  # hidden
    assert physics.step_parts(full, "h100-80gb", 8, MEASURED_V2)["communication"] == 0.0
    assert links.link_bytes_s("a10-24gb", 2) == 32e9 * links.ACHIEVED_LINK  # no NVLink: PCIe


def test_version_2_keeps_its_constants_and_version_3_its_own():
    assert MEASURED_V2.version == 2 and MEASURED.version == 3
    assert physics.MEASURED_SPREAD[2] != physics.MEASURED_SPREAD[3]
    f = job()
    assert parts(f, k=MEASURED_V2) != parts(f)  # refitted constants


def test_an_optimizer_looping_over_its_tensors_pays_each_kernels_launch():
    full = {"variant": "full", "micro_batch": 1, "global_batch": 1, "seq_len": 512}
    tensors = 9 * 32 + 3  # a layer's seven weights and two norms; the embedding, final norm, output layer
    adafactor = physics.step_parts(job(**full, optimizer="adafactor"), "h200-141gb", 1)["optimizer"]
    traffic = MEASURED.optimizer_slowdown * 8.03e9 * physics.OPTIMIZER_TRAFFIC["adafactor"] / 4.8e12
    assert adafactor == pytest.approx(traffic + tensors * 24 * MEASURED.launch_seconds)
    foreach = physics.step_parts(job(**full), "h200-141gb", 1)["optimizer"]
    looping = physics.step_parts(job(**full, optimizer_impl="for_loop"), "h200-141gb", 1)["optimizer"]
    assert looping - foreach == pytest.approx(tensors * 12 * MEASURED.launch_seconds)
    lora = physics.step_parts(job(optimizer="adamw_8bit", lora_targets=["q_proj", "v_proj"]), "h200-141gb", 1)
    assert lora["optimizer"] >= 2 * 2 * 32 * 4 * MEASURED.launch_seconds  # A and B of two projections a layer
    v2 = physics.step_parts(job(**full, optimizer="adafactor"), "h200-141gb", 1, MEASURED_V2)["optimizer"]
    assert v2 == pytest.approx(
        MEASURED_V2.optimizer_slowdown * 8.03e9 * physics.OPTIMIZER_TRAFFIC["adafactor"] / 4.8e12
    )


STACKS = st.fixed_dictionaries(
    {
        "variant": st.sampled_from(["full", "lora", "qlora", "dora", "dpo", "cpt", "ia3"]),
        "params_b": st.sampled_from([0.5, 8.03, 70.6, 405.0, 2000.0]),
        "seq_len": st.sampled_from([1, 512, 8192, 1 << 21]),
        "micro_batch": st.sampled_from([1, 4, 1 << 14]),
        "accumulation": st.sampled_from([1, 8]),
        "precision": st.sampled_from(["bf16", "fp32", "fp8"]),
        "optimizer": st.sampled_from(["adamw", "adamw_8bit", "adafactor", "sgd", "lion"]),
        "zero_stage": st.integers(0, 3),
        "tensor_parallel": st.sampled_from([1, 8, 64]),
        "gradient_checkpointing": st.booleans(),
        "framework": st.sampled_from([None, "transformers", "deepspeed", "torchtune", "litgpt"]),
        "loss": st.sampled_from([None, "whole", "chunked", "fused"]),
        "optimizer_impl": st.sampled_from([None, "foreach", "fused", "for_loop", "deepspeed"]),
        "upcast": st.sampled_from([None, True, False]),
        "interconnect": st.sampled_from([None, "nvlink", "pcie", "infiniband"]),
    }
)


@settings(max_examples=examples(200), deadline=None)
@given(draw=STACKS)
def test_every_stack_is_sized_or_refused_with_its_reason_up_to_the_contracts_limits(draw):
    """Any drawn stack, up to the contract's limits (2,000B parameters, 2^21 tokens, 2^14 samples,
    a pool of 4,096 GPUs): finite, non-negative parts at every count, and a count or a refusal
    that names the features."""
    adapter = draw["variant"] in ("lora", "qlora", "dora")
    fields = {k: v for k, v in draw.items() if k not in ("accumulation", "interconnect") and v is not None}
    if not adapter:
        fields.pop("upcast", None)
    micro = draw["micro_batch"]
    f = job(**fields, global_batch=min(micro * draw["accumulation"], 1 << 20))
    for gpus in (1, 64, 4096):
        parts = physics.memory_parts_gb(f, gpus)
        assert all(math.isfinite(v) and v >= 0 for v in parts.values()), parts
        assert math.isfinite(physics.step_seconds(f, "h100-80gb", gpus, interconnect=draw["interconnect"]))
    hw = Hardware("h100-80gb", 80.0, 4096, 60, nominal=True, interconnect=draw["interconnect"])
    try:
        sized = Forecasters(ForecastSettings()).size("training", f, hw, None, None)
    except SizeError as refused:
        assert str(refused).startswith("features")
    else:
        assert 1 <= sized.gpus <= 4096 and sized.duration >= 1


def test_what_is_kept_on_the_host_leaves_the_gpu_and_crosses_pcie():
    full = {"variant": "full", "micro_batch": 1, "global_batch": 8, "seq_len": 4096, "gradient_checkpointing": True}
    on_gpu = job(**full)
    host_step = job(**full, offload=["optimizer"])
    assert physics.memory_components_gb(host_step, 1)["optimizer"] == 0.0
    assert physics.memory_components_gb(host_step, 1)["gradients"] == pytest.approx(
        physics.memory_components_gb(on_gpu, 1)["gradients"] / 32
    )  # a layer's gradients at a time, on their way to the host
    both = job(**full, offload=["parameters", "optimizer"], zero_stage=3)
    assert physics.memory_components_gb(both, 8)["weights"] == pytest.approx(
        2 * 8.03e9 * 2 / 32 / GIB
    )  # two layers' 16-bit weights (ZeRO-3 keeps the fp32 master with the state): the one computed, the next fetched
    assert physics.communication_seconds(host_step, "h100-80gb", 1, 0.0) == pytest.approx(
        8.03e9 * (4 + 2) / links.host_bytes_s("h100-80gb") / 8
    )  # fp32 gradients out, 16-bit weights in, once an optimizer step of 8 micro-batches
    offloaded = job(offload=["activations"], gradient_checkpointing=True, seq_len=8192)
    kept = job(gradient_checkpointing=True, seq_len=8192)
    assert parts(offloaded)["activations"] < parts(kept)["activations"]
    with pytest.raises(ValueError, match="offload: each part once"):
        job(offload=["optimizer", "optimizer"])


def test_a_step_in_the_backward_pass_holds_no_gradients_but_a_layers():
    full = {"variant": "full", "micro_batch": 1, "global_batch": 1, "seq_len": 512, "optimizer_impl": "in_backward"}
    components = physics.memory_components_gb(job(**full), 1)
    assert components["gradients"] == pytest.approx(8.03e9 * 4 / 32 / GIB) and components["temporary"] == 0.0
