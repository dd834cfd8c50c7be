"""`gpualloc bench forecast --real`: the job forecasters against the fine-tuning runs measured on
an H200 (benchmarks/real). Bounds a broken physics would miss, on the figures as computed."""

from __future__ import annotations

import json

import pytest

from gpualloc.agent.cli import main
from gpualloc.agent.renderers.real_runs import table
from gpualloc.benchmarks import real_runs_bench
from gpualloc.schemas.features import GPU_TYPES


@pytest.fixture(scope="module")
def bench() -> real_runs_bench.RealRunsBench:
    return real_runs_bench.run_real_runs_bench()


def test_every_line_of_both_files_is_a_run(bench):
    lines = {source: real_runs_bench.load_records(source) for source in real_runs_bench.FILES}
    oom = sum(r["outcome"] != "ok" for rs in lines.values() for r in rs)
    cold = bench.views["cold"]["figures"]
    assert cold["runs"] == sum(map(len, lines.values())) and cold["oom"] == oom and cold["ran"] == cold["runs"] - oom
    assert bench.views["cold_shared"]["figures"]["runs"] == len(lines["shared"])
    assert bench.views["cold_own"]["figures"]["runs"] == len(lines["own"])
    assert bench.views["leave_one_model_out"]["figures"]["runs"] == cold["runs"]
    assert sum(f["runs"] for f in bench.per_model.values()) == cold["runs"]


def test_cold_forecasts_hold_the_real_runs(bench):
    cold = bench.views["cold"]["figures"]
    assert cold["memory_median_error"] <= 0.12
    assert cold["memory_under_10"] <= 0.05  # no run started on a forecast far below its need
    assert cold["memory_ratio_min"] >= 0.8 and cold["memory_ratio_max"] <= 1.6
    assert cold["oom_given_one"] == 0  # a run that ran out of memory on one H200 is not started on one
    assert cold["count_right"] >= 0.9
    assert cold["time_median_error"] <= 0.3
    assert all(bench.targets.values())


def test_learning_keeps_the_forecasts_close(bench):
    for view in ("warm_shared_to_own", "warm_own_to_shared", "leave_one_model_out"):
        f = bench.views[view]["figures"]
        assert f["memory_median_error"] <= 0.15 and f["time_median_error"] <= 0.35, view
        assert f["memory_ratio_min"] >= 0.75, view


def test_per_gpu_type_no_start_on_the_h200_where_a_run_runs_out(bench):
    assert list(bench.gpu_types) == list(GPU_TYPES)
    h200 = bench.gpu_types["h200-141gb"]
    assert h200["started_where_out"] == 0 and h200["runs_out"] == bench.views["cold"]["figures"]["oom"]
    for g in bench.gpu_types.values():
        assert g["runs_out"] + g["fits"] == g["runs"]
        assert g["started_where_out"] <= g["runs_out"]
        assert g["refused_where_fits"] + g["more_than_one_where_fits"] <= g["fits"]


@pytest.mark.slow
def test_the_section_renders_and_goes_into_the_json(bench, capsys):
    text = table(bench.as_dict())
    assert "leave one model out" in text and "h200-141gb" in text
    assert main(["bench", "forecast", "--real-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        set(out) == {"real_runs", "measured_points", "measured_points_summary"}  # the published points beside them
        and out["real_runs"]["views"]["cold"]["figures"]["runs"] == bench.views["cold"]["figures"]["runs"]
    )
    assert len(out["measured_points"]) >= 100 and "quantization" in out["measured_points_summary"]
