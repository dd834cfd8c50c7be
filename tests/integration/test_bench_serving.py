"""`gpualloc bench serving`: each app's service in the JSON, on one fast trace."""

from __future__ import annotations

import json

from gpualloc.agent.cli import main
from gpualloc.benchmarks import serving_targets
from gpualloc.benchmarks.serving_targets import Trace
from gpualloc.solvers.simulation.simulator import SimOptions


def test_the_json_carries_each_apps_served_share_per_day_for_fifo_and_the_heuristic(monkeypatch, capsys):
    monkeypatch.setitem(serving_targets.SETS, "tuned", (Trace("serving", 16, 1),))

    assert main(["bench", "serving", "--set", "tuned", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["tuned"]

    [trace] = data["traces"].values()
    for run in ("fifo", "heuristic"):
        apps = trace["served"][run]
        assert set(apps) == {"office-1", "chat-2", "api-3"}
        for app in apps.values():
            assert len(app["days"]) == 3 and all(0.0 <= d <= 1.0 for d in app["days"])
            assert app["worst_day"] == min(app["days"]) and app["worst_day"] <= app["whole"] <= max(app["days"])
            # no run serves past the demand within max_gpus; idle GPU-hours are held ones
            assert all(d <= c + 1e-4 for d, c in zip(app["days"], app["ceiling_days"]))
            assert 0.0 <= app["idle_gpu_hours"] <= app["held_gpu_hours"]
    least = min(d for app in trace["served"]["heuristic"].values() for d in app["days"])
    summary = data["summary"]
    assert summary["least_share"] == least
    assert summary["served_99"] == int(least >= 0.99)
    assert 0.0 <= summary["app_days_99"] <= 1.0
    users = trace["users"]  # what users read of the same runs, beside the apps' service
    for run in ("fifo", "heuristic"):
        assert users[run]["jobs"] == trace[run]["started"] + users[run]["never_started"] > 0
        assert users[run]["wait"]["mean"] <= users[run]["jct"]["mean"]
        assert users[run]["served_worst_day"] == min(a["worst_day"] for a in trace["served"][run].values())
    # on 16 GPUs both runs leave jobs unstarted at the cap (FIFO the most: it holds the apps'
    # reservations past the trace's end): their times would be the cap's, so the trace is out of the ratios
    assert users["fifo"]["unfinished"] > users["heuristic"]["unfinished"] > 0
    assert summary["ratio_traces"] == 0 and summary["wait_mean_over_fifo_median"] is None


def test_strip_profiles_first_registers_the_first_app_alone_without_its_profile():
    events = Trace("serving", 16, 1).events("first")
    registered = [e["payload"] for e in events if e["type"] == "app.registered"]
    assert ["profile" in app for app in registered] == [False, True, True]
    assert all(
        "profile" not in e["payload"] for e in Trace("serving", 16, 1).events("all") if e["type"] == "app.registered"
    )


def test_node_reserve_runs_the_heuristic_with_the_setting_on(monkeypatch):
    seen: list[SimOptions] = []

    def run(names, run_with, *_):
        seen.append(run_with)
        return {}

    monkeypatch.setattr(serving_targets, "run_serving_targets", run)
    assert main(["bench", "serving", "--set", "tuned", "--node-reserve", "--json"]) == 0
    assert main(["bench", "serving", "--set", "tuned", "--json"]) == 0
    assert [s.forecast_settings.realtime_node_reserve for s in seen] == [True, False]
