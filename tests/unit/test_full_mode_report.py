"""Full mode in fields and words: a solve's outcome settled where its plan is weighed against the
hot path, the step it runs next, the counter's label, and `gpualloc status`'s line."""

from __future__ import annotations

import pytest

from gpualloc.agent.metrics import FULL_MODE_OUTCOMES, AgentMetrics
from gpualloc.agent.operator.full_mode import full_mode_line, full_mode_status
from gpualloc.schemas.published import FullModeReport, FullModeSolve
from gpualloc.solvers.planner.full_mode import FullModeRun, ended_without_plan, next_due, outcome, settled
from gpualloc.solvers.planner.records import Adoption

OFFERED = FullModeReport(
    state="ran", last=FullModeSolve(step=12, outcome="adopted", detail="offered", seconds=0.8), next_step=13
)


def test_an_adopted_plan_says_by_how_much_it_beat_the_hot_path():
    adoption = Adoption(None, "adopted: 120.00 against the hot path's 100.50", 120.0, 100.5)
    last = settled(OFFERED, adoption, adopted=True).last
    assert last is not None and last.outcome == "adopted" and last.gain == 19.5 and last.step == 12
    assert last.detail == "adopted: 120.00 against the hot path's 100.50"


def test_a_plan_not_adopted_is_stale_without_a_legal_carried_plan_else_not_better():
    stale = settled(OFFERED, Adoption(None, "illegal once reconciled: R1 ..."), adopted=False).last
    assert stale is not None and stale.outcome == "stale" and stale.gain is None
    assert stale.detail == "illegal once reconciled: R1 ..."
    worse = settled(OFFERED, Adoption(None, "no better than the hot path (99.00 <= 100.00)", 99.0, 100.0), False)
    assert worse.last is not None and worse.last.outcome == "not_better" and worse.state == "ran"


def test_a_solve_that_did_not_beat_its_warm_start_says_both_objectives_and_the_bound():
    said = ended_without_plan(FullModeRun(502.34, 502.34, 510.0, None), step=7, seconds=1.25)
    assert said == FullModeSolve(
        step=7,
        outcome="not_better",
        detail="no better than the heuristic (502.34 against 502.34, bound 510.00)",
        seconds=1.25,
    )


@pytest.mark.parametrize("now,every,due", [(0, 1, 0), (5, 1, 5), (13, 4, 16), (16, 4, 16), (3, 0, None)])
def test_the_next_solve_is_the_next_multiple_of_every(now, every, due):
    assert next_due(now, every) == due


def test_each_commit_counts_once_under_its_outcome():
    assert set(FULL_MODE_OUTCOMES) == {
        "adopted",
        "not_better",
        "stale",
        "failed",
        "timed_out",
        "running",
        "skipped",
        "not_due",
    }
    metrics = AgentMetrics("p")
    reports = [OFFERED, FullModeReport(state="running", running_since=13), FullModeReport(state="not_due")]
    for report in reports:
        payload = {
            "step": 1,
            "assignments": {},
            "source": "heuristic",
            "objective": 0.0,
            "full_mode_report": report.model_dump(),
        }
        metrics.committed(payload, 8, 0, 0, {})
    counted = {o: metrics.full_mode.labels("p", o)._value.get() for o in FULL_MODE_OUTCOMES}
    assert counted == {o: float(o in ("adopted", "running", "not_due")) for o in FULL_MODE_OUTCOMES}
    assert [outcome(r) for r in reports] == ["adopted", "running", "not_due"]


def test_status_says_when_it_last_ran_how_that_ended_and_when_it_runs_next():
    report = FullModeReport(
        state="not_due",
        last=FullModeSolve(step=12, outcome="not_better", detail="no better than the heuristic", seconds=0.84),
        next_step=16,
    )
    assert full_mode_line(report) == (
        "full mode: last ran at step 12 (not adopted: no better than the heuristic, 0.8 s); next at step 16"
    )
    adopted = settled(OFFERED, Adoption(None, "adopted", 120.0, 100.5), adopted=True)
    assert full_mode_line(adopted) == (
        "full mode: last ran at step 12 (adopted: +19.50 over the heuristic's objective, 0.8 s); next at step 13"
    )
    running = FullModeReport(state="running", running_since=13, last=report.last, next_step=14)
    assert full_mode_line(running).startswith("full mode: running since step 13; last ran at step 12 (")
    skipped = FullModeReport(state="skipped", detail="model of ~5,928 variables ...", next_step=3)
    assert full_mode_line(skipped) == "full mode: skipped: model of ~5,928 variables ...; next at step 3"
    timed_out = FullModeSolve(step=3, outcome="timed_out", detail="killed after 16 s, past its deadline", seconds=16)
    assert "(timed out: killed after 16 s, past its deadline, 16.0 s)" in full_mode_line(
        FullModeReport(state="ran", last=timed_out, next_step=4)
    )
    assert full_mode_line(FullModeReport(state="not_due", next_step=6)) == "full mode: not run yet; next at step 6"


def test_status_json_carries_the_report_with_its_line_and_older_commits_their_text():
    shown = full_mode_status({"full_mode_report": OFFERED.model_dump(), "full_mode": "adopted: ..."})
    assert shown is not None and shown["state"] == "ran" and shown["last"]["step"] == 12
    assert shown["line"] == full_mode_line(OFFERED) and shown["next_step"] == 13
    assert full_mode_status({"full_mode": "skipped: model of ~1 variables"}) == {
        "line": "full mode: skipped: model of ~1 variables"
    }
    assert full_mode_status({"full_mode": None}) is None and full_mode_status(None) is None
