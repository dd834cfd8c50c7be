"""`forecasting.scoring` on backtest results made by hand: what each figure counts and which jobs
are held out or cold. The generators scored end to end are `make test`'s
(tests/integration/test_forecast_cli.py, marked slow)."""

from __future__ import annotations

from typing import Any

import pytest

from gpualloc.forecasting.backtest import JobResult
from gpualloc.forecasting.scoring import COLD, figures, job_scores


def result(job_id: str, group: str = "a", gpus: int | None = 2, median: float | None = 100.0, **kw: Any) -> JobResult:
    fields = {"actual": 100, "low": 90.0, "high": 110.0, **kw}
    return JobResult(job_id, "default", "training", group, gpus, median, **fields)


def truth(median: float = 100.0, gpus: int = 2, **kw: Any) -> dict[str, Any]:
    return {"median_steps": median, "gpus": gpus, **kw}


def test_each_figure_counts_its_jobs_against_the_truth():
    rs = [
        result("right"),  # the count and the interval hold
        result("under", gpus=1, median=120.0, low=110.0, high=130.0),
        result("over", gpus=4, median=90.0, low=80.0, high=95.0),
        result("refused", gpus=None, median=None, low=None, high=None),
    ]
    jobs = {
        "right": truth(median=95.0),
        "under": truth(median=110.0),
        "over": truth(noise_free_gpus=4),  # its noise-free count is not the one it ran on
        "refused": truth(),
    }
    f = figures(rs, jobs)
    assert f["duration_mdape"] == pytest.approx(0.1) and f["noise_floor"] == pytest.approx(0.05)  # medians of 3 timed
    assert f["ratio"] == pytest.approx(2.0) and f["interval_coverage"] == pytest.approx(0.3333)
    assert (f["gpus_right"], f["gpus_ceiling"], f["under_sized"]) == (0.25, 0.75, 0.25)  # over all four
    assert f["over_sized"] == pytest.approx(0.3333) and f["refused"] == 1 and f["jobs"] == 4  # over the three sized


def test_the_last_share_is_held_out_and_each_groups_first_jobs_are_its_cold_start():
    rs = [result(f"a{i}", learned=i) for i in range(25)]
    rs += [result(f"b{i}", group="b", learned=i) for i in range(5)]
    rs.append(result("unknown"))  # not in the truth: left out of every figure
    jobs = {r.id: truth() for r in rs if r.id != "unknown"}
    scores = job_scores(rs, jobs, share=0.2)
    assert (scores["jobs"], scores["held_out"]) == (30, 6)  # a24 and b0-b4
    assert scores["all"]["jobs"] == 6 and scores["cold_start"]["jobs"] == COLD + 5
    assert [(g["group"], g["jobs"], g["completions"]) for g in scores["groups"]] == [("a", 1, 24), ("b", 5, 4)]
