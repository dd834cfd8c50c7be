"""The simulator: every committed step of every policy is legal over the executed grid, the
same trace gives the same schedules and decisions, and bad trace lines are named."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta

import pytest

from gpualloc import benchmarks
from gpualloc.agent.cli import main
from gpualloc.agent.loading import InputError
from gpualloc.agent.traces import read_trace
from gpualloc.generators.trace_files import write_trace
from gpualloc.generators.traces import generate_trace
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.settings import FullModeOptions, RollingFullMode
from gpualloc.solvers.simulation.report import (
    executed_violations,
    full_mode_figures,
    jain,
    quantiles,
    report,
    whole_run,
    window_gaps,
)
from gpualloc.solvers.simulation.simulator import SimOptions, simulate
from gpualloc.solvers.simulation.user_measures import measures


def events_of(**kw):
    return [parse_event(e) for e in generate_trace(**kw)]


@pytest.fixture(scope="module")
def day16():
    return events_of(gpus=16, days=1, jobs=40, apps=2, seed=4)


def test_fifo_and_heuristic_are_legal_at_every_committed_step(day16):
    sim = simulate(day16, SimOptions(policies=("fifo", "heuristic")))
    submitted = sum(1 for env, _ in day16 if env.type == "job.submitted")
    for policy, run in sim.runs.items():
        assert executed_violations(sim, run) == [], policy
        assert len(run.decisions) == submitted  # one decision per arrival
        assert 24 <= len(run.commits) <= sim.steps <= sim.cap  # the whole trace: on until its jobs finished
        o = measures(sim, run)
        assert o.jobs == submitted == o.started + o.never_started and o.completed == len(run.finished)
        left = set(run.submitted) - set(run.finished)
        assert (len(run.commits) == sim.cap) if left else (len(run.commits) < sim.cap)  # on to the cap only if needed
        assert o.wait["p50"] <= o.wait["p90"] <= o.wait["p99"] <= o.wait["max"]
        assert 0 < o.slowdown_jain_priority_classes <= 1 and 0 < o.slowdown_jain_jobs <= 1
    assert sim.drained and sim.steps == max(len(r.commits) for r in sim.runs.values())
    rows = {(r.policy, r.day): r for r in report(sim)}
    assert rows["heuristic", None].started == measures(sim, sim.runs["heuristic"]).started
    assert 0 < rows["heuristic", None].utilization <= 1


def test_a_run_cut_at_its_days_counts_the_jobs_left_waiting_to_its_end(day16):
    sim = simulate(day16, SimOptions(policies=("fifo",), days=1))
    run = sim.runs["fifo"]
    assert len(run.commits) == sim.steps == 24 and not sim.drained
    o = measures(sim, run)
    waiting = [j for j in run.submitted if j not in run.started]
    assert o.never_started == len(waiting) > 0
    waits = [run.started.get(j, 24) - s for j, s in run.submitted.items()]  # the waiting ones, to the end
    assert o.wait["max"] == max(waits) >= max(24 - run.submitted[j] for j in waiting)
    assert o.completed == len(run.finished) < o.jobs and o.unfinished == o.jobs - o.completed


def test_jains_index_and_nearest_rankquantiles():
    assert jain([2.0, 2.0, 2.0]) == 1.0 and jain([1.0, 0.0]) == 0.5 and jain([]) is None
    assert quantiles(list(range(1, 101))) == {"p50": 50, "p90": 90, "p99": 99, "max": 100}
    assert quantiles([7]) == {"p50": 7, "p90": 7, "p99": 7, "max": 7}


def test_the_same_trace_gives_the_same_schedules_and_decisions(day16):
    a = simulate(day16, SimOptions(policies=("heuristic",)))
    b = simulate(day16, SimOptions(policies=("heuristic",)))
    assert a.runs["heuristic"].commits == b.runs["heuristic"].commits
    assert a.runs["heuristic"].decisions == b.runs["heuristic"].decisions


def test_real_time_service_counts_through_the_last_event_only(day16):
    """After the last event an app's demand is its last observation held: a run that takes longer
    to finish its jobs would serve more of it and look more valuable."""
    sim = simulate(day16, SimOptions(policies=("heuristic",)))
    run = sim.runs["heuristic"]
    assert sim.drained and sim.apps_until is not None and len(run.commits) > sim.apps_until + 1
    counted, everything = whole_run(sim, run), whole_run(dataclasses.replace(sim, apps_until=None), run)
    after = sum(
        sim.priorities[app] * min(len(c.assignments.get(app, ())), sim.demand[app][c.step])
        for c in run.commits
        if c.step > sim.apps_until
        for app in sim.demand
    )
    assert after > 0 and everything.value - counted.value == pytest.approx(after)
    assert counted.realtime_shortfall <= everything.realtime_shortfall


def test_window_gaps_measure_committed_plans_against_the_capacity_bound(day16):
    run = simulate(day16, SimOptions(policies=("heuristic",))).runs["heuristic"]
    gaps = window_gaps(run, every=1)
    assert 0 <= gaps["p50"] <= gaps["p90"] <= gaps["max"] < 1
    light = simulate(events_of(gpus=16, days=1, jobs=3, apps=0, seed=1), SimOptions(policies=("heuristic",)))
    assert window_gaps(light.runs["heuristic"], every=1) == {}  # each job started on arrival: nothing queued


@pytest.mark.slow
def test_full_mode_every_k_steps_stays_legal_and_reproducible():
    events = events_of(gpus=8, days=1, jobs=12, apps=1, seed=2)
    options = SimOptions(
        policies=("heuristic+milp",),
        full_mode=RollingFullMode(every=6, options=FullModeOptions(node_limit=20, time_limit=None)),
    )
    first, second = simulate(events, options), simulate(events, options)
    run = first.runs["full-mode"]
    assert executed_violations(first, run) == []
    assert run.commits == second.runs["full-mode"].commits
    assert all(step % 6 == 0 for step in run.full_mode_adopted)
    figures = full_mode_figures(run)  # every solve recorded: warm start, its own objective, the bound
    assert figures["solves"] == len(run.full_mode_runs) == len(run.full_mode) > 0
    assert figures["adopted"] == len(run.full_mode_adopted) <= figures["improved"]
    assert all(r.bound is not None and r.bound >= r.objective - 1e-6 for r in run.full_mode_runs)  # a bound each
    assert all(0 <= r.hot_gap <= 1 for r in run.full_mode_runs if r.hot_gap is not None)  # None: a bound of 0
    assert figures["capacity_bounds"] == sum(r.bound_source == "capacity" for r in run.full_mode_runs)
    assert {r.bound_source for r in run.full_mode_runs} <= {"solver", "capacity"}
    assert all(r.objective >= r.warm - 1e-6 for r in run.full_mode_runs if r.warm is not None)
    assert full_mode_figures(simulate(events, SimOptions(policies=("heuristic",), days=1)).runs["heuristic"]) is None


def test_a_node_going_down_fails_and_requeues_its_jobs():
    trace = generate_trace(gpus=16, days=1, jobs=30, apps=1, seed=6)
    trace.append(
        {
            "event_id": "down-1",
            "type": "node.status",
            "occurred_at": "2026-01-05T10:30:00Z",
            "payload": {"node": 0, "state": "down", "detail": "test"},
        }
    )
    sim = simulate([parse_event(e) for e in trace], SimOptions(policies=("heuristic",)))
    run = sim.runs["heuristic"]
    assert executed_violations(sim, run) == []
    for commit in run.commits[11:]:
        assert not any(g < 8 for gpus in commit.assignments.values() for g in gpus)


def test_bad_trace_lines_are_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"event_id": "e1", "type": "job.submitted", "occurred_at": "2026-01-05T00:00:00Z", '
        '"payload": {"id": "j", "kind": "training", "priority": 0}}\nnot json\n'
    )
    with pytest.raises(InputError) as err:
        read_trace(path)
    text = "\n".join(err.value.lines)
    assert "line 1: priority" in text and "line 2: not JSON" in text


def test_simulate_cli_on_the_shipped_pollux_trace(tmp_path, capsys):
    chart = tmp_path / "days.svg"
    trace = benchmarks.DATA_DIR / "traces" / "pollux-workload-1.jsonl"
    assert main(["simulate", str(trace), "--json", "--chart", str(chart)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["violations"] == {"fifo": [], "heuristic": []}
    assert chart.read_text().startswith("<svg")


def test_trace_cli_writes_a_readable_trace(tmp_path):
    out = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--gpus", "8", "--days", "1", "--jobs", "5", "--out", str(out)]) == 0
    assert any(env.type == "job.submitted" for env, _ in read_trace(out))
    write_trace(out, generate_trace(gpus=8, days=1, jobs=5))
    assert len(read_trace(out)) > 5


@pytest.mark.slow
def test_adopted_full_mode_plans_are_recorded_and_a_replay_reuses_them():
    """Full mode runs at steps 0, 6, 12, ...; its plans, reconciled with the arrivals of the
    step, are adopted when better. Replaying the trace with the recorded plans (no solver)
    gives the same decisions and commits."""
    # a batch pool where some of full mode's plans beat the hot path
    events = events_of(gpus=16, days=1, jobs=40, apps=0, seed=3)
    options = SimOptions(
        policies=("heuristic+milp",),
        full_mode=RollingFullMode(every=6, max_jobs=8, options=FullModeOptions(node_limit=10, time_limit=None)),
    )
    run = simulate(events, options).runs["full-mode"]
    assert run.full_mode_adopted, run.full_mode
    assert all(step % 6 == 0 for step, _ in run.full_mode)
    replay = simulate(events, options, recorded=run.recorded()).runs["full-mode"]
    assert replay.full_mode == []  # nothing solved
    assert replay.commits == run.commits and replay.decisions == run.decisions


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "file not found"),
        (b"\xff\xfe,,", "not UTF-8 text"),
        (b"a,b\n1,2\n", "line 1: name, time, application, num_replicas: missing column"),
        (b"name,time,application,num_replicas\nj,1,bert,2\nk,soon,bert,\n", "line 3: time: must be float, got 'soon'"),
    ],
)
def test_trace_pollux_names_what_is_wrong_with_its_csv(tmp_path, capsys, content, expected):
    path = tmp_path / "w.csv"
    if content is not None:
        path.write_bytes(content)
    assert main(["trace", "pollux", str(path), "--out", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert expected in err and "internal error" not in err


def test_simulate_reports_what_the_pool_refused(tmp_path, capsys):
    events = generate_trace(gpus=8, days=1, jobs=3, seed=1)
    odd = dict(
        events[-1],
        event_id="odd",
        type="job.submitted",
        payload={"id": "odd", "kind": "training", "priority": 1, "gpus": 3, "duration": 2},
    )
    trace = tmp_path / "t.jsonl"
    write_trace(trace, events + [odd])
    assert main(["simulate", str(trace), "--policy", "heuristic", "--json"]) == 0
    refused = json.loads(capsys.readouterr().out)["refused"]["heuristic"]
    assert refused == ["job 'odd' rejected: job.gpus: must be a power of two (got 3)"]
    assert main(["simulate", str(trace), "--policy", "heuristic"]) == 0
    assert "heuristic: 1 inputs refused, first: job 'odd' rejected" in capsys.readouterr().out


def test_a_serving_trace_with_spikes_a_drain_and_a_node_down_stays_legal_with_reactive_grants():
    """Apps observed within steps (ramps, bursts, flash crowds, glitches), heavy-tailed batch
    work, cancellations, a node down and one drained: both policies keep the online rules at
    every step as it ended (reactive grants folded in), and the hot path grants within steps."""
    from gpualloc.generators.serving import serving_trace

    sim = simulate([parse_event(e) for e in serving_trace(0, days=2, gpus=32)], SimOptions(days=2))
    for run in sim.runs.values():
        assert executed_violations(sim, run) == [], run.policy
    grants = sim.runs["heuristic"].grants
    assert grants and all(0 < minute < sim.config.step_minutes for minute, _ in grants)
    row = whole_run(sim, sim.runs["heuristic"])
    assert row.realtime_shortfall_minutes == pytest.approx(row.realtime_shortfall * sim.config.step_minutes, abs=1)


def test_demand_rising_within_a_step_counts_short_only_until_a_grant_meets_it():
    """The app needs 1 GPU until minute 40 of step 2, then 5: the step's commit holds 1, the
    observation reaches the pool at minute 40 and idle GPUs are granted at once, so nothing is
    short (the step's largest observation applied from minute 0 would charge 160 GPU-minutes)."""
    t0 = "2026-01-05T00:00:00+00:00"
    config = {"gpus": 8, "gpus_per_node": 8, "horizon": 4, "step_minutes": 60}
    app = {"id": "rt", "priority": 5, "min_gpus": 1, "max_gpus": 8, "swap_cap": 8}
    raw = [("pool.configured", config, 0), ("app.registered", app, 0)]
    raw += [("traffic.observed", {"app": "rt", "gpus": 1}, 60 * s + 5) for s in range(2)]
    raw += [
        ("traffic.observed", {"app": "rt", "gpus": 5}, 120 + 40),
        ("traffic.observed", {"app": "rt", "gpus": 1}, 185),
    ]
    events = [
        parse_event(
            {
                "event_id": f"e{k}",
                "type": kind,
                "pool": "default",
                "occurred_at": (datetime.fromisoformat(t0) + timedelta(minutes=m)).isoformat(),
                "payload": payload,
            }
        )
        for k, (kind, payload, m) in enumerate(raw)
    ]
    sim = simulate(events, SimOptions(policies=("heuristic",), days=1))
    run = sim.runs["heuristic"]
    assert [(g.step, len(g.gpus)) for _, g in run.grants] == [(2, 5)]
    assert sim.within[("rt", 2)] == [(0.0, 1), (40.0, 5)]
    assert whole_run(sim, run).realtime_shortfall_minutes == 0


def test_simulate_prices_known_parts_only_beside_forecast_runs(tmp_path, capsys):
    from gpualloc.generators.synthetic import forecast_trace

    trace = tmp_path / "f.jsonl"
    write_trace(trace, forecast_trace(seed=2, weeks=1, gpus=16, gpus_per_node=8))
    assert main(["simulate", str(trace), "--known", "gpus"]) == 2
    assert "--known: compares runs made with --forecast" in capsys.readouterr().err
    assert main(["simulate", str(trace), "--forecast", "--known", "durations", "--days", "2"]) == 0
    out = capsys.readouterr().out
    assert "heuristic/durations-known: legal at every committed step" in out
    assert "heuristic: knowing every job's true duration, traffic as it comes: objective" in out
