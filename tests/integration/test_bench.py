"""The bench: FIFO vs heuristic rows, mean gain, best-known share, legality gate."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support.builders import make

from gpualloc.benchmarks.scenario_bench import Report, bench_scenario, run_bench
from gpualloc.generators.scenarios import generate_scenario
from gpualloc.solvers import POLICIES
from gpualloc.solvers.policies.solution import Solution


@pytest.fixture(scope="module")
def bundled() -> Report:
    return run_bench(None, repeat=2)[0]


def test_bundled_report(bundled):
    assert [r.scenario for r in bundled.rows] == [
        "large_mixed",
        "mixed_control",
        "oversubscribed",
        "realtime_contention",
        "scale",
        "training_heavy",
        "uniform_priority",
    ]
    assert bundled.ok and bundled.exit_code == 0
    for r in bundled.rows:
        assert r.value_gain_pct is not None and r.value_gain_pct >= 0
        assert r.best_share is not None and 0 < r.best_share <= 1.0 + 1e-6
        assert len(r.runs["heuristic"].times_ms) == 2 and r.runs["heuristic"].p50_ms > 0
        assert r.runs["fifo"].p50_ms > 0
    gains = [r.value_gain_pct for r in bundled.rows]
    assert bundled.mean_value_gain_pct == pytest.approx(sum(gains) / len(gains))
    mixed = bundled.rows[1]
    assert (mixed.gpus, mixed.tasks) == (8, 10)


def test_json_and_table(bundled):
    data = json.loads(json.dumps(bundled.as_dict()))
    assert data["ok"] is True and len(data["scenarios"]) == 7
    row = data["scenarios"][0]
    assert set(row["utilization"]) == {"fifo", "heuristic"} and row["legal"] == {"fifo": True, "heuristic": True}
    table = bundled.table()
    assert "mean value gain" in table and "scale" in table and "FAIL" not in table


def test_illegal_heuristic_plan_fails_the_bench(monkeypatch):
    sc, problem = make(4, 2, [{"id": "a", "kind": "training", "priority": 1, "gpus": 2, "duration": 2}])

    def broken(p):  # a 2-GPU job on GPUs 0 and 2: not contiguous (R3)
        schedule = POLICIES["fifo"].schedule(p)
        schedule.batch["a"] = (0, 0b101)
        return schedule

    monkeypatch.setitem(POLICIES, "heuristic", replace(POLICIES["heuristic"], solve=lambda p, o: Solution(broken(p))))
    report = Report([bench_scenario(sc, repeat=1)], 1)
    assert not report.ok and report.exit_code == 1
    assert "FAIL hand: heuristic plan is illegal: R3" in report.table()


def test_crashing_scheduler_fails_the_bench(monkeypatch):
    sc, _ = make(2, 1, [])

    def crash(p):
        raise RuntimeError("boom")

    monkeypatch.setitem(POLICIES, "heuristic", replace(POLICIES["heuristic"], solve=lambda p, o: crash(p)))
    row = bench_scenario(sc, repeat=1)
    assert not row.ok and row.runs["heuristic"].error == "RuntimeError: boom"


def test_folder_of_generated_scenarios(tmp_path):
    for seed in range(3):
        (tmp_path / f"g{seed}.json").write_text(json.dumps(generate_scenario(12, 8, seed)))
    report, _ = run_bench(tmp_path, repeat=1)
    assert len(report.rows) == 3 and report.ok
    assert all(r.best_share is None for r in report.rows)  # not in best-known.json


@pytest.mark.kafka
async def test_the_soak_accounts_for_every_event(kafka_bootstrap):
    """The harness behind `gpualloc bench soak`, briefly (the 100,000-event figures live in docs/results.md)."""
    from gpualloc.benchmarks.soak import soak

    result = await soak(kafka_bootstrap, events=3000, rate=500, step_seconds=1.0, baseline_at=1000, sample_s=1.0)
    assert result.lost == 0 and result.duplicated == 0
    assert result.jobs > 1000 and result.decisions == result.jobs
    assert result.malformed == 30 and result.dead_letters == result.malformed
    assert result.rss_samples[0] == (1000, result.rss_baseline_mb) and result.rss_samples[-1][0] == 3000
    assert len(result.rss_samples) >= 4 and 0 < result.rss_baseline_mb <= result.rss_max_mb
    assert result.lag_records >= 0 and result.lag_s < 30
