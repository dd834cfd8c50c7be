"""Job forecasts that adapt: group offsets exact whatever the order, group and model memory
corrections used only once they help, GPU counts by risk against the usable share finished jobs
show, intervals that track their coverage, the physics the corrections start from, and a failed
pass undone at the forecasters' largest."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from support.feature_jobs import LORA_7B
from support.forecaster_states import largest_job_forecaster

from gpualloc.forecasting import physics_v1 as physics
from gpualloc.forecasting import quantization
from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.job_forecast import Hardware
from gpualloc.forecasting.jobs import JobForecaster
from gpualloc.forecasting.kind_model import group_key
from gpualloc.schemas.features import QuantizationFeatures, TrainingFeatures
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.planner.state import fork, restore

H100 = Hardware("h100-80gb", 80.0, 64, 30)


def training(**change) -> TrainingFeatures:
    return TrainingFeatures.model_validate({**LORA_7B, **change})


def steps(fc: JobForecaster, f: TrainingFeatures, gpus: int = 1) -> float:
    return fc.forecast("training", f, H100, 0.5, 0.8, gpus=gpus).median


def test_a_groups_offset_is_the_same_whatever_the_order_of_its_lessons():
    rng = random.Random(3)
    lessons = [
        (training(variant=v, params_b=p, micro_batch=b), rng.randint(2, 40))
        for v, p, b in [(v, p, b) for v in ("lora", "dpo", "full") for p in (1, 7) for b in (1, 4)] * 3
    ]
    ahead, behind = JobForecaster(physics=1), JobForecaster(physics=1)
    for f, n in lessons:
        ahead.learn("training", f, H100, 1, n)
    for f, n in reversed(lessons):
        behind.learn("training", f, H100, 1, n)
    for v in ("lora", "dpo", "full"):  # the centre: the error windows' quantiles depend on the order
        f = training(variant=v)
        assert ahead._centre("training", f, H100, 1) == pytest.approx(behind._centre("training", f, H100, 1), abs=1e-9)


def test_a_group_running_slower_than_its_kind_is_learned_from_a_few_dozen_completions():
    """DPO runs three times what its kind's correction says; LoRA as it says. After 40
    completions of each the DPO forecast is within 15% of the truth and LoRA's is unmoved."""
    fc, rng = JobForecaster(physics=1), random.Random(5)
    truth = {
        v: steps(JobForecaster(physics=1), training(variant=v)) * (3.0 if v == "dpo" else 1.0) for v in ("lora", "dpo")
    }
    for _ in range(40):
        for v, base in truth.items():
            fc.learn("training", training(variant=v), H100, 1, max(1, round(base * math.exp(rng.gauss(0, 0.05)))))
    assert steps(fc, training(variant="dpo")) == pytest.approx(truth["dpo"], rel=0.15)
    assert steps(fc, training(variant="lora")) == pytest.approx(truth["lora"], rel=0.15)


def test_a_models_memory_correction_is_used_only_once_it_helps():
    """Two 7B models the features tell apart only by their shape: one peaks 6 GB over the other
    (a larger vocabulary, say). Each model's correction earns its place and the forecasts come
    within a GB of each; a correction that has not (gain <= 0) adds nothing."""
    fc = JobForecaster(physics=1)
    wide, narrow = training(layers=32, hidden_size=4096), training(layers=28, hidden_size=4608)
    for k in range(120):
        for f, extra in ((wide, 6.0), (narrow, 0.0)):
            f_k = f.model_copy(update={"micro_batch": 1 + k % 4, "seq_len": 1024 * (1 + k % 3)})
            fc.learn("training", f_k, H100, 1, 5, physics.memory_per_gpu_gb(f_k, 1) / physics.HEADROOM + 2.0 + extra)
    levels = fc.models["training"].architectures
    assert levels["7/32/4096"].gain > 0 and levels["7/28/4608"].gain > 0
    for f, extra in ((wide, 6.0), (narrow, 0.0)):
        own = fc._peak("training", f, "h100-80gb", 1) - physics.memory_per_gpu_gb(f, 1) / physics.HEADROOM
        assert own == pytest.approx(2.0 + extra, abs=1.0)
    level = levels["7/32/4096"]
    row = [1.0] * len(level.ridge.xty)
    level.gain = -1.0
    assert level.value(np.array(row)) == 0.0


def test_counts_follow_the_usable_share_finished_jobs_show_and_the_risk_taken():
    """Jobs peak at most 75% of a GPU (the platform's own rule): a job forecast at 80% of one GPU
    is given two. With wide memory errors a lower risk takes more GPUs."""
    fc = JobForecaster(physics=1)
    f = training(variant="full", lora_rank=None, params_b=1, layers=24, hidden_size=2048, micro_batch=1, zero_stage=3)
    at_one = physics.memory_per_gpu_gb(f, 1) / physics.HEADROOM
    hw = Hardware("h100-80gb", at_one / 0.8, 64, 30)  # a GPU the job fills to 80%
    assert fc.forecast("training", f, hw, 0.7, 0.8).gpus == 1  # nothing learned: all of a GPU usable
    rng = random.Random(1)
    for _ in range(40):
        share = rng.uniform(0.5, 0.75)
        fc.utilization.append(share)
    assert fc.usable() == pytest.approx(max(fc.utilization)) and fc.usable() <= 0.75
    assert fc.forecast("training", f, hw, 0.7, 0.8).gpus == 2
    wide = JobForecaster(physics=1)
    wide.models["training"].memory_errors.errors = [rng.gauss(0, 0.2) for _ in range(100)]
    hw_roomy = Hardware("h100-80gb", at_one / 0.95, 64, 30)  # fills 95%: fits by the point forecast
    assert wide.forecast("training", f, hw_roomy, 0.7, 0.8, risk=0.45).gpus == 1
    assert wide.forecast("training", f, hw_roomy, 0.7, 0.8, risk=0.05).gpus == 2


def test_intervals_widen_when_completions_fall_outside_them_too_often():
    fc, rng = JobForecaster(physics=1), random.Random(9)
    f = training()
    for _ in range(150):
        fc.learn("training", f, H100, 1, max(1, round(20 * math.exp(rng.gauss(0, 0.6)))), coverage=0.8)
    made = fc.forecast("training", f, H100, 0.5, 0.8, gpus=1)
    inside = sum(made.low <= 20 * math.exp(rng.gauss(0, 0.6)) <= made.high for _ in range(2000)) / 2000
    assert 0.72 <= inside <= 0.9


def test_the_physics_the_corrections_start_from():
    dpo = training(variant="dpo", lora_rank=None, params_b=70, layers=80, hidden_size=8192, reference_model=True)
    sharded = dpo.model_copy(update={"zero_stage": 3})
    parts = physics.memory_parts_gb(sharded, 64)
    assert parts["weights"] == pytest.approx(physics.memory_parts_gb(dpo, 64)["weights"] / 64)  # reference too
    eager, flash = training(flash_attention=False, seq_len=4096), training(flash_attention=True, seq_len=4096)
    ratio = physics.memory_parts_gb(eager, 1)["activations"] / physics.memory_parts_gb(flash, 1)["activations"]
    assert ratio == pytest.approx((34 + 5 * 4096 / 128) / 34, rel=0.01)  # Korthikanti et al.: 5 a s / h
    full32 = training(variant="full", lora_rank=None, precision="fp32", optimizer="adamw")
    assert physics.memory_parts_gb(full32, 1)["optimizer"] == pytest.approx(7e9 * 8 / physics.GIB)  # no master copy
    few, many = (
        QuantizationFeatures(params_b=70, algorithm="smoothquant", bits=8, calibration_samples=n) for n in (16, 4096)
    )
    assert quantization.memory_parts_gb(few, 4) == quantization.memory_parts_gb(many, 4)  # batch by batch
    gptq = [QuantizationFeatures(params_b=70, algorithm="gptq", bits=4, calibration_samples=n) for n in (16, 4096)]
    assert (
        quantization.memory_parts_gb(gptq[0], 4)["calibration"]
        < quantization.memory_parts_gb(gptq[1], 4)["calibration"]
    )


def test_a_failed_pass_is_undone_at_the_forecasters_largest():
    """Every group on every GPU type and the most model corrections a kind keeps: a pass that
    teaches a new model (evicting the oldest), a known group and an out-of-memory failure, then
    fails, leaves the state as it was, byte for byte."""
    fc = Forecasters(ForecastSettings(physics=1))
    fc.jobs = largest_job_forecaster(1)
    before = json.dumps(fc.dump(), sort_keys=True)
    found = fork(fc)  # a pass begins: what apply keeps to restore
    fc.finished("training", training(), H100, 2, 9, 41.0)
    fc.finished("quantization", QuantizationFeatures(params_b=7, algorithm="awq", bits=4), H100, 1, 2, 20.0)
    fc.out_of_memory("training", training(variant="full", lora_rank=None), H100, 1)
    assert json.dumps(fc.dump(), sort_keys=True) != before
    restore(fc, found)  # the pass failed
    assert json.dumps(fc.dump(), sort_keys=True) == before
    assert group_key(training(), "h100-80gb") == "lora/h100-80gb"
