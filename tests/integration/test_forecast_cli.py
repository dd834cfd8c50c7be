"""`gpualloc bench forecast`: the backtests over generator seeds, checked against the targets."""

from __future__ import annotations

import json

from gpualloc.agent.benches.forecast_bench import bench_seed
from gpualloc.agent.cli import main
from gpualloc.benchmarks import DATA_DIR
from gpualloc.schemas.settings import ForecastSettings


def test_a_seed_is_backtested_against_its_own_noise_floor():
    r = bench_seed(4, ForecastSettings())  # a seed never looked at while the forecasters were built
    assert 0.05 < r.floor < 0.25 and r.mdape >= r.floor * 0.8  # nothing beats the noise by much
    assert r.ratio < 2.0 and 0.6 < r.coverage < 0.95 and r.gpus_right > 0.85
    assert r.worst_under <= 0.15 and r.worst_over <= 0.35 and r.beats_peak
    assert set(r.targets) == {"mdape", "coverage", "gpus", "under", "over", "vs profile", "vs peak"}


def test_the_bench_prints_a_row_a_seed_and_json(capsys):
    assert main(["bench", "forecast", "--seeds", "2", "--json"]) == 0
    seeds = json.loads(capsys.readouterr().out)["seeds"]
    assert [s["seed"] for s in seeds] == [0, 1] and all("targets" in s for s in seeds)


TRACES = DATA_DIR / "traces"


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
