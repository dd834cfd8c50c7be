"""`gpualloc bench forecast`: the backtests over generator seeds, checked against the targets."""

from __future__ import annotations

import json

import pytest

from gpualloc.agent.cli import main
from gpualloc.benchmarks import DATA_DIR
from gpualloc.benchmarks.forecast_bench import GENERATORS, run_forecast_bench
from gpualloc.forecasting.backtest import job_backtest
from gpualloc.forecasting.designs import BASELINES
from gpualloc.forecasting.forecasters import pool_hardware
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.settings import ForecastSettings


@pytest.mark.slow
def test_a_generator_is_scored_against_its_own_noise_floor_and_count_ceiling():
    [run] = run_forecast_bench(1, ForecastSettings(), ["synthetic"]).runs
    jobs = run.result["jobs"]
    a = jobs["all"]
    assert (
        0.05 < a["noise_floor"] < 0.25 and a["duration_mdape"] >= a["noise_floor"] * 0.8
    )  # nothing beats the noise by much
    # coverage: 0.67-0.71 on this generator since its truth follows real runs (docs/results.md, "Forecasting"):
    # a job sized above the truth's count runs shorter than its forecast says; refusals: the test below
    assert a["ratio"] < 1.6 and 0.65 < a["interval_coverage"] < 0.9 and a["gpus_right"] > 0.85
    assert a["gpus_ceiling"] >= a["gpus_right"] - 0.05 and a["under_sized"] <= 0.05
    assert jobs["cold_start"]["jobs"] > 0 and all(g["completions"] > 0 for g in jobs["groups"])
    apps = [x for x in run.result["traffic"].values() if x["steps"]]
    assert len(apps) == 3
    for x in apps:
        for q in ("0.8", "0.9", "0.95"):
            assert abs(x["quantiles"][q]["under_share"] - (1 - float(q))) <= 0.05
    assert set(run.targets) == {
        "duration",
        "coverage",
        "counts",
        "under-sized",
        "refused",
        "calibrated",
        "q0.9",
        "after launch",
    }


def test_a_generated_job_is_refused_only_where_the_physics_alone_puts_it_over_every_count():
    """No learned correction refuses a job: a refusal is the physics' own verdict (where the
    generator's truth and the physics disagree on what a job holds, docs/results.md)."""
    events = [parse_event(e) for e in GENERATORS["synthetic"](0)[0]]
    pools = {env.pool: p for env, p in events if env.type == "pool.configured"}
    submitted = {(env.pool, p.id): p for env, p in events if env.type == "job.submitted"}
    refused = [r for r in job_backtest(events, ForecastSettings()) if r.gpus is None]
    for r in refused:
        f = submitted[r.pool, r.id].feature_model()
        hw = pool_hardware(f, pools[r.pool])
        base, counts = BASELINES[r.kind], [1 << i for i in range(hw.max_gpus.bit_length())]
        assert all(base.memory(f, n) > hw.memory_gb for n in counts if n >= base.smallest(f)), r.id


@pytest.mark.slow
def test_the_bench_prints_a_row_a_seed_and_json(capsys):
    assert main(["bench", "forecast", "--seeds", "1", "--generators", "synthetic", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["generator"], r["seed"]) for r in runs] == [("synthetic", 0)] and all("targets" in r for r in runs)
    assert main(["bench", "forecast", "--generators", "nobody"]) == 2
    assert "unknown generator ['nobody']" in capsys.readouterr().err


TRACES = DATA_DIR / "traces"


@pytest.mark.slow
def test_the_backtest_of_a_shipped_trace_and_its_refusals(capsys):
    assert main(["forecast", "backtest", str(TRACES / "forecast-jobs-600.jsonl"), "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert (
        jobs["jobs"] == 600
        and jobs["held_out"] == 120
        and {r["kind"] for r in jobs["rows"]} == {"training", "quantization"}
    )
    assert main(["forecast", "backtest", str(TRACES / "traffic-5weeks.jsonl")]) == 0
    assert "default/rt-0" in capsys.readouterr().out
    assert main(["forecast", "backtest", str(TRACES / "pollux-workload-1.jsonl")]) == 2  # no features, no traffic
    assert "nothing to backtest" in capsys.readouterr().err
    assert main(["forecast", "backtest", str(TRACES / "traffic-5weeks.jsonl"), "--realtime-quantile", "1.5"]) == 2
    assert "realtime_quantile" in capsys.readouterr().err
