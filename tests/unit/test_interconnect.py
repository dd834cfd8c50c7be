"""The pool's links (`pool.configured`'s `interconnect`): what a multi-GPU job's collectives cross,
so its forecast time; kept by snapshots."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpualloc.forecasting.forecasters import Forecasters, pool_hardware
from gpualloc.schemas.events import PoolConfigured
from gpualloc.schemas.features import TrainingFeatures
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import PoolConfig
from gpualloc.solvers.planner.snapshot import dump_planner, load_planner
from gpualloc.solvers.policies.heuristic import heuristic_schedule

SHARDED_70B = TrainingFeatures(
    variant="full",
    params_b=70.6,
    layers=80,
    hidden_size=8192,
    intermediate_size=28672,
    vocab_size=128256,
    seq_len=2048,
    dataset_tokens_m=100,
    epochs=1,
    global_batch=64,
    micro_batch=1,
    zero_stage=3,
    gradient_checkpointing=True,
)


def hours(interconnect: str | None, physics: int = 3) -> float:
    pool = PoolConfigured(gpus=64, gpus_per_node=8, gpu_type="h100-80gb", interconnect=interconnect)
    sized = Forecasters(ForecastSettings(physics=physics)).size(
        "training", SHARDED_70B, pool_hardware(SHARDED_70B, pool), 8, None
    )
    return sized.median


def test_a_sharded_job_runs_longer_over_slower_links():
    nvlink, pcie, network = hours(None), hours("pcie"), hours("infiniband")
    assert hours("nvlink") == nvlink < pcie < network
    assert hours("pcie", physics=2) == hours(None, physics=2)  # version 2 counts no collectives


def test_an_unknown_interconnect_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="interconnect"):
        PoolConfigured(gpus=8, interconnect="ethernet")


def test_a_snapshot_keeps_the_interconnect():
    planner = Planner(PoolConfig(gpus=8, interconnect="pcie"))
    assert load_planner(dump_planner(planner), heuristic_schedule).config.interconnect == "pcie"
    assert len(dump_planner(Planner(PoolConfig(gpus=8)))["config"]) == 16  # as before the field was added
