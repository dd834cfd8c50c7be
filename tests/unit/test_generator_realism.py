"""The ground-truth generators stay honest: their memory and time models, evaluated on the
configurations of the real H200 runs (benchmarks/real), stay near what those runs measured
(generators/realism.py, docs/ground-truth.md "Realism against real runs")."""

from __future__ import annotations

import pytest

from gpualloc.generators import realism

# Measured when the bounds were set (77 runs): memory median error 6%, 6% and 7%; time 13%, 27%
# and 25% (synthetic, truth_catalogue, truth_heldout). The bounds leave margin over those.
MEMORY_MEDIAN = 0.12
MEMORY_UNDER = 0.15  # share of runs whose memory is more than 10% under
MEMORY_RANGE = (0.7, 1.4)  # every run's predicted / real memory
TIME_MEDIAN = 0.35


@pytest.fixture(scope="module")
def runs() -> list[realism.Run]:
    return realism.load_runs()


@pytest.fixture(scope="module")
def results(runs: list[realism.Run]) -> dict[str, realism.Realism]:
    return {g.name: realism.realism(g, runs) for g in realism.GENERATORS}


def test_the_runs_are_read(runs):
    assert len(runs) >= 70  # the runs that completed (two ran out of memory and measured no peak)
    assert {r.variant for r in runs} >= {"full", "lora", "qlora", "dora", "dpo"}
    assert all(r.need_gb > 0 and r.tokens_per_s > 0 for r in runs)


def test_every_generator_is_scored(results):
    assert set(results) == {"synthetic", "truth_catalogue", "truth_heldout"}


@pytest.mark.parametrize("name", ["synthetic", "truth_catalogue", "truth_heldout"])
def test_memory_near_the_real_runs(results, name):
    m = results[name].memory
    assert m.median <= MEMORY_MEDIAN, realism.table([results[name]])
    assert m.under <= MEMORY_UNDER, realism.table([results[name]])
    assert MEMORY_RANGE[0] <= m.low and m.high <= MEMORY_RANGE[1], realism.table([results[name]])


@pytest.mark.parametrize("name", ["synthetic", "truth_catalogue", "truth_heldout"])
def test_time_near_the_real_runs(results, name):
    assert results[name].time.median <= TIME_MEDIAN, realism.table([results[name]])


def test_error_factor():
    e = realism.Errors.of([1.0, 2.0, 0.5, 0.85], [1.0, 1.0, 1.0, 1.0])
    assert e.median == pytest.approx((1 / 0.85 - 1 + 1) / 2)  # factors 0, 1, 1, 0.176
    assert e.under == pytest.approx(0.5)  # 0.5 and 0.85 are more than 10% under
    assert (e.low, e.high) == (0.5, 2.0)


def test_a_run_as_the_generators_read_it():
    line = (
        '{"model": "m", "variant": "dpo", "precision": "bf16", "optimizer": "adamw", "seq_len": 1024,'
        ' "micro_batch": 2, "gradient_checkpointing": false, "lora_rank": null, "lora_targets": null,'
        ' "flash_attention": true, "outcome": "ok", "params_b": 0.5, "layers": 24, "hidden_size": 896,'
        ' "intermediate_size": 4864, "attention_heads": 14, "kv_heads": 2, "vocab_size": 151936,'
        ' "peak_reserved_gib": 10.0, "step_seconds": 0.1, "cuda_context_gib": 0.5}'
    )
    oom = '{"model": "m", "variant": "full", "outcome": "oom"}'
    (run,) = realism.parse_runs([line, oom, ""])
    assert run.need_gb == pytest.approx(10.5 * 1024**3 / 1e9)
    assert run.tokens_per_s == pytest.approx(2 * 2 * 1024 / 0.1)  # both sequences of a pair
    assert run.reference_model
