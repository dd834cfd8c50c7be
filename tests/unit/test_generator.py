"""The scenario generator: pure and seeded, always contract-valid, and contended as promised."""

from __future__ import annotations

import random
import statistics

import pytest

from gpualloc.generators.scenarios import block_sizes, default_node_size, generate_scenario
from gpualloc.schemas import Scenario

SHAPES = [(g, j) for g in (1, 2, 3, 4, 6, 8, 12, 14, 16, 24, 64) for j in (1, 3, 4, 9, 16, 30)]


def test_same_arguments_same_scenario_and_no_global_randomness():
    random.seed(1)
    a = generate_scenario(16, 12, seed=7)
    state = random.getstate()
    random.seed(2)
    b = generate_scenario(16, 12, seed=7)
    assert a == b
    random.seed(1)
    generate_scenario(16, 12, seed=7)
    assert random.getstate() == state  # the global generator is never touched


def test_different_seeds_differ():
    assert generate_scenario(16, 12, seed=1)["jobs"] != generate_scenario(16, 12, seed=2)["jobs"]


@pytest.mark.parametrize("gpus, jobs", SHAPES)
def test_always_valid_and_feasible_at_step_zero(gpus, jobs):
    for seed in range(6):
        for horizon in (24, 5, 1):
            data = generate_scenario(gpus, jobs, seed, horizon=horizon)
            sc = Scenario.model_validate(data)
            assert len(sc.jobs) == jobs
            assert sc.node_size == default_node_size(gpus)
            for a in sc.realtime_apps:
                if a.current is not None:
                    cap = sc.swap_cap_of(a)
                    assert len(a.current) - cap <= sc.max_gpus_of(a)
                    assert len(a.current) + cap >= a.min_gpus
            for j in sc.batch_jobs:
                assert j.gpus in block_sizes(gpus, sc.node_size)


def test_node_size_default():
    assert [default_node_size(g) for g in (6, 8, 12, 16, 24, 20, 64)] == [6, 8, 12, 8, 8, 20, 8]
    assert generate_scenario(16, 8, 0).get("gpus_per_node") == 8
    assert "gpus_per_node" not in generate_scenario(12, 8, 0)
    assert generate_scenario(12, 8, 0, gpus_per_node=3)["gpus_per_node"] == 3


def test_block_sizes_follow_the_node_rule():
    assert block_sizes(12, 6) == [1, 2, 4]
    assert block_sizes(12, 3) == [1, 2]
    assert block_sizes(64, 8) == [1, 2, 4, 8, 16, 32, 64]
    assert block_sizes(6, 6) == [1, 2, 4]


def test_realtime_share_and_peaks():
    for seed in range(20):
        data = generate_scenario(32, 20, seed)
        apps = [j for j in data["jobs"] if j["kind"] == "realtime"]
        assert 2 <= len(apps) <= 3  # 10-15% of 20
        assert 0.25 * 32 <= sum(max(a["demand"]) for a in apps) <= 0.45 * 32
    for jobs in (4, 5, 8):
        data = generate_scenario(8, jobs, 3)
        assert sum(j["kind"] == "realtime" for j in data["jobs"]) >= 1


def test_batch_demand_is_contended():
    loads = []
    for seed in range(30):
        data = generate_scenario(16, 16, seed)
        T, G = data["horizon"], data["gpus"]
        rt = sum(sum(j["demand"]) for j in data["jobs"] if j["kind"] == "realtime")
        run = sum(j["gpus"] * min(j["running"]["remaining"], T) for j in data["jobs"] if "running" in j)
        queued = sum(j["gpus"] * j["duration"] for j in data["jobs"] if j["kind"] != "realtime" and "running" not in j)
        loads.append(queued / (G * T - rt - run))
    assert 1.1 <= statistics.mean(loads) <= 2.1


def test_features_appear_across_seeds():
    seen = {"current": 0, "running": 0, "late": 0, "swap_cap": 0, "min_gpus": 0, "max_gpus": 0}
    for seed in range(40):
        for j in generate_scenario(16, 16, seed)["jobs"]:
            seen["current"] += "current" in j
            seen["running"] += "running" in j
            seen["late"] += j.get("arrival", 0) > 0
            seen["swap_cap"] += "swap_cap" in j
            seen["min_gpus"] += "min_gpus" in j
            seen["max_gpus"] += "max_gpus" in j
    assert all(count > 0 for count in seen.values()), seen


def test_options_turn_features_off():
    for seed in range(10):
        data = generate_scenario(
            16, 16, seed, currents=False, running=False, late_arrivals=False, app_swap_caps=False, floors=False
        )
        for j in data["jobs"]:
            assert not {"current", "running", "swap_cap", "min_gpus", "max_gpus"} & set(j)
            assert j.get("arrival", 0) == 0


def test_horizon_and_realtime_count_options():
    data = generate_scenario(6, 5, 1, horizon=7, realtime=2, step_minutes=30)
    assert data["horizon"] == 7 and data["step_minutes"] == 30
    apps = [j for j in data["jobs"] if j["kind"] == "realtime"]
    assert len(apps) == 2 and all(len(a["demand"]) == 7 for a in apps)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(gpus=0, jobs=1),
        dict(gpus=4, jobs=0),
        dict(gpus=12, jobs=4, gpus_per_node=5),
        dict(gpus=4, jobs=4, horizon=0),
        dict(gpus=4, jobs=4, realtime=5),
        dict(gpus=4, jobs=4, swap_cap=-1),
    ],
)
def test_bad_arguments_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        generate_scenario(seed=0, **kwargs)
