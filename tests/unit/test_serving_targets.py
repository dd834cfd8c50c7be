"""`benchmarks.serving_targets`: its sets, and how a trace is judged against the real-time targets."""

from __future__ import annotations

from dataclasses import replace

from gpualloc.benchmarks.serving_targets import SETS, Judged, as_dict, summary, table
from gpualloc.solvers.simulation.report import DayReport
from gpualloc.solvers.simulation.user_measures import UserMeasures

FIFO = DayReport("fifo", None, 0.5, 1000.0, 800.0, 700.0, 20.0, 1200.0, 0.1, 50, 50, 3.0, 5.0, 0.0)


def _heuristic(**figures: float) -> DayReport:
    base = replace(FIFO, policy="heuristic", timely_value=1000.0, objective=900.0, realtime_shortfall=25.0)
    return replace(base, **figures)


def test_the_sets_are_26_tuned_13_held_out_27_unseen_and_8_independent_traces_none_in_two():
    names = ("tuned", "held-out", "unseen", "independent")
    sets = [{t.name for t in SETS[name]} for name in names]
    assert [len(s) for s in sets] == [26, 13, 27, 8]
    assert all(not a & b for i, a in enumerate(sets) for b in sets[i + 1 :])
    assert {t.kind for t in SETS["independent"]} == {"genai"}


def test_each_target_decides_a_trace_and_the_summary_counts_them():
    rows = [
        Judged("met", FIFO, _heuristic()),  # 25 <= 1.5 x 20, 1.25x timely, 50 done
        Judged("short", FIFO, _heuristic(realtime_shortfall=30.5)),
        Judged("slow", FIFO, _heuristic(timely_value=950.0)),  # 1.19x
        Judged("fewer", FIFO, _heuristic(completed=49)),
        Judged("floor", replace(FIFO, realtime_shortfall=2.0), _heuristic(realtime_shortfall=10.0)),  # max(10, 3)
    ]

    assert [r.all_met for r in rows] == [True, False, False, False, True]
    assert [r.shortfall_met for r in rows] == [True, False, True, True, True]
    totals = summary(rows)
    assert totals["all_targets_met"] == 2 and totals["shortfall_target_met"] == 4
    assert totals["misses"] == ["short", "slow", "fewer"]
    assert totals["shortfall"] == 25.0 * 3 + 30.5 + 10.0 and totals["fifo_shortfall"] == 20.0 * 4 + 2.0


def test_the_table_and_the_json_say_which_traces_miss_and_why():
    sets = {"tuned": [Judged("a", FIFO, _heuristic()), Judged("b", FIFO, _heuristic(realtime_shortfall=31.0), 2)]}

    lines = table(sets).splitlines()
    data = as_dict(sets)

    assert lines[2].endswith("met") and lines[3].endswith("shortfall missed, 2 VIOLATIONS")
    assert data["tuned"]["summary"]["misses"] == ["b"]
    assert data["tuned"]["traces"]["b"]["heuristic"]["realtime_shortfall"] == 31.0


def _apps(*days: list[float], ceiling: float = 1.0) -> dict[str, dict]:
    return {
        f"app{i}": {
            "whole": sum(d) / len(d),
            "days": d,
            "worst_day": min(d),
            "held_gpu_hours": 10.0,
            "idle_gpu_hours": 2.0,
            "ceiling_days": [ceiling] * len(d),
        }
        for i, d in enumerate(days)
    }


def test_the_summary_counts_the_traces_whose_every_app_was_served_99_percent_every_day():
    rows = [
        Judged("all", FIFO, _heuristic(), served={"heuristic": _apps([1.0, 0.995]), "fifo": _apps([0.98, 1.0])}),
        Judged(
            "one day", FIFO, _heuristic(), served={"heuristic": _apps([1.0, 0.98], [0.999, 1.0]), "fifo": _apps([1.0])}
        ),
        Judged("capped", FIFO, _heuristic(), served={"heuristic": _apps([0.9]), "fifo": _apps([0.9], ceiling=0.9)}),
    ]

    totals = summary(rows)

    assert [r.least_share() for r in rows] == [0.995, 0.98, 0.9]
    assert totals["served_99"] == 1 and totals["served_99_7"] == 0 and totals["fifo_served_99"] == 1
    assert totals["servable_99"] == 2  # the third trace's app needs more than its max_gpus a tenth of the day
    assert totals["app_days_99"] == round(5 / 7, 4) and totals["least_share"] == 0.9
    assert totals["mean_share"] == round((1.0 + 0.995 + 1.0 + 0.98 + 0.999 + 1.0 + 0.9) / 7, 4)
    assert totals["idle_gpu_hours"] == 2.0 * 4 and totals["fifo_idle_gpu_hours"] == 2.0 * 3
    assert table({"tuned": rows}).splitlines()[3].split()[-6:-1] == ["98.0%", "100.0%", "100.0%", "-", "-"]


def _users(policy: str, wait: float, jct: float, unfinished: int = 0) -> UserMeasures:
    return UserMeasures(
        policy, 60, 10, 0, 10, 10 - unfinished, unfinished, 0, {"mean": jct}, {"mean": wait}, {}, {}, {}, None, None, 0,
        0.0, 0.0, {}, None,
    )  # fmt: skip


def test_the_wait_and_jct_ratios_leave_out_traces_a_run_left_unfinished():
    rows = [
        Judged(
            "a", FIFO, _heuristic(), users={"fifo": _users("fifo", 10, 20), "heuristic": _users("heuristic", 5, 12)}
        ),
        Judged("b", FIFO, _heuristic(), users={"fifo": _users("fifo", 4, 8), "heuristic": _users("heuristic", 6, 10)}),
        Judged(
            "capped",
            FIFO,
            _heuristic(),
            users={"fifo": _users("fifo", 400, 500, unfinished=3), "heuristic": _users("heuristic", 5, 9)},
        ),
    ]
    totals = summary(rows)
    assert totals["ratio_traces"] == 2
    assert totals["wait_mean_over_fifo_median"] == round((0.5 + 1.5) / 2, 2)
    assert totals["jct_mean_over_fifo_median"] == round((0.6 + 1.25) / 2, 2)
    assert table({"tuned": rows}).splitlines()[2].split()[-3:-1] == ["5/10", "12/20"]
