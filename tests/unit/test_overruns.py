"""`status` flags running jobs past their plan: past a forecast interval's upper bound, or past a
declared duration; bounded at the contract's limits."""

from __future__ import annotations

import orjson
from support.builders import T0, ev

from gpualloc.agent.operator.overruns import LISTED, SHOWN, overrun, past_plan, past_plan_lines
from gpualloc.agent.operator.status import lines, view
from gpualloc.forecasting.job_forecast import JobForecast
from gpualloc.schemas.limits import LIMITS
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import JobSpec, Running

FORECAST = JobForecast(4, 2, 1.6, 1.0, 4.04, 0.8, 0.7, ("gpus", "duration"), 40.0)


def spec(duration: int = 2, forecast: JobForecast | None = None, time_limit: int | None = None) -> JobSpec:
    return JobSpec("pretrain-b", "training", 5, 4, duration, 0, forecast=forecast, time_limit=time_limit)


def test_a_forecast_job_is_flagged_past_its_intervals_upper_bound():
    assert overrun("pretrain-b", spec(forecast=FORECAST), 5, 9) is None  # 4 steps: within [1, 4.04]
    flagged = overrun("pretrain-b", spec(forecast=FORECAST), 5, 14)
    assert flagged is not None and flagged["line"] == (
        "pretrain-b: running 9 steps, planned 2 (past its forecast interval's upper bound 4); "
        "no time limit: it runs until it is reported ended"
    )


def test_a_declared_duration_is_its_own_bound_and_a_time_limit_is_named():
    assert overrun("sft", spec(duration=3), 2, 5) is None  # ran exactly its duration
    flagged = overrun("sft", spec(duration=3), 2, 6)
    assert flagged is not None and flagged["line"].startswith(
        "sft: running 4 steps, planned 3 (past its declared duration)"
    )
    limited = overrun("sft", spec(duration=8, forecast=FORECAST, time_limit=8), 2, 9)
    assert limited is not None and limited["line"].endswith("; failed by its time limit at step 10")


def test_status_lists_a_job_past_its_plan():
    pool = Pool()
    pool.apply([ev("pool.configured", {"gpus": 8, "horizon": 6})], T0)
    job = {"id": "stuck", "kind": "training", "priority": 5, "gpus": 2, "duration": 2}
    pool.apply([ev("job.submitted", job, ref="stuck")], T0)
    for _ in range(5):
        pool.commit()
    status = view("default", pool.planner, None, [])
    assert status["past_plan_total"] == 1
    text = lines(status)
    at = text.index("running past their plan (1):")
    assert text[at + 1].startswith("  stuck: running 5 steps, planned 2 (past its declared duration)")


def test_at_the_limits_the_list_is_bounded():
    running = {
        f"{k:0200d}": Running(JobSpec(f"{k:0200d}", "training", 1, 1, 1, 0), 1 << k, 0) for k in range(LIMITS.gpus)
    }  # every GPU a 1-GPU job with a 200-character id, all past their plan
    fields = past_plan(running, LIMITS.duration)
    assert fields["past_plan_total"] == LIMITS.gpus and len(fields["past_plan"]) == LISTED
    assert len(orjson.dumps(fields)) < 1_000_000
    text = past_plan_lines(fields)
    assert len(text) == 2 + SHOWN + 1 and text[-1] == f"  ... and {LIMITS.gpus - SHOWN:,} more (`--json` lists 1,000)"
