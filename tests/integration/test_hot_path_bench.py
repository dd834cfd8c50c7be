"""`gpualloc bench hot-path`: one arrival's decision timed on a loaded pool."""

from __future__ import annotations

import json

from gpualloc.agent.cli import main


def test_the_hot_path_bench_times_one_arrival_on_a_loaded_pool(capsys):
    from gpualloc.benchmarks.hot_path import loaded_pool, measure_hot_path

    pool = loaded_pool(16, 30)
    assert len(pool.queued) + len(pool.running) == 30 and pool.running and pool.now == 1
    result = measure_hot_path(gpus=16, queued=30, arrivals=3, boundaries=2, since_cut=5)
    assert result.arrivals == 3 and 0 < result.p50_ms <= result.p99_ms <= result.max_ms
    assert result.boundaries == 2 and 0 < result.boundary_p50_ms <= result.boundary_max_ms
    assert result.since_cut == 5 and 0 < result.carried_p50_ms <= result.carried_max_ms
    assert main(["bench", "hot-path", "--queued", "20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"] == 64 and data["queued"] <= 20 and data["p99_ms"] >= data["p50_ms"] > 0
