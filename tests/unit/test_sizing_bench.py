"""`gpualloc bench sizing`: one arrival's sizing on a pool of 4,096 GPUs."""

from __future__ import annotations

from gpualloc.benchmarks.sizing_bench import measure_sizing


def test_it_times_the_mix_and_says_the_counts_given():
    result = measure_sizing(samples=2, batch=1)
    assert result.gpus == 4096 and result.jobs == len(result.counts) == 5
    assert 0 < result.least_ms <= result.p50_ms
    assert result.counts[:3] == sorted(result.counts[:3])  # larger models sharded over more GPUs
    assert "p50" in result.line() and result.as_dict()["counts"] == result.counts
