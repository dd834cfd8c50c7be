"""What users read of a whole run (`solvers.simulation.user_measures`): figures worked out by hand
on small traces, every job counted, and an app's served share per day."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpualloc.agent.renderers import user_measures as users
from gpualloc.generators.traces import T0
from gpualloc.schemas.events import envelope, parse_event
from gpualloc.solvers.planner.records import Commit, PoolConfig
from gpualloc.solvers.simulation.report import served_share
from gpualloc.solvers.simulation.results import PolicyRun, Simulation
from gpualloc.solvers.simulation.simulator import SimOptions, simulate
from gpualloc.solvers.simulation.user_measures import measures, offered_load, size_bucket, spread

POOL = {"gpus": 4, "gpus_per_node": 4, "horizon": 12, "step_minutes": 60, "time_decay": 0.99}


def trace(*rest: tuple[float, str, dict]) -> list:
    """A pool.configured at T0, then (hours, type, payload) each."""
    events = [envelope("pool.configured", POOL, T0, "cfg")]
    events += [envelope(kind, p, T0 + timedelta(hours=h), f"e{k}") for k, (h, kind, p) in enumerate(rest)]
    return [parse_event(e) for e in events]


def job(job_id: str, gpus: int, steps: int, priority: float = 5) -> dict:
    return {"id": job_id, "kind": "training", "priority": priority, "gpus": gpus, "duration": steps}


@pytest.mark.parametrize(
    ("hours", "bucket"), [(0.0, "<1"), (0.99, "<1"), (1.0, "1-10"), (9.9, "1-10"), (10, "10-100"), (100, ">100")]
)
def test_a_job_is_bucketed_by_its_gpu_hours_of_work(hours, bucket):
    assert size_bucket(hours) == bucket


def test_spread_is_the_mean_and_nearest_rank_quantiles():
    assert spread([1, 2, 3, 4]) == {"mean": 2.5, "p50": 2, "p90": 4, "p99": 4, "max": 4}
    assert spread([]) == {}


def test_offered_load_inside_the_span_leaves_out_work_past_the_last_arrival():
    # 4 GPUs x 10 steps at step 0, 8 x 2 at step 9: span 10 steps of 8 GPUs; the second job's
    # second step falls past it
    load = offered_load([(0, 4, 10), (9, 8, 2)], 8)
    assert (load.trace, load.span, load.span_steps) == (0.7, 0.6, 10)


def test_fifo_on_a_whole_node_job_then_a_small_one():
    sim = simulate(
        trace((0, "job.submitted", job("a", 4, 3)), (0, "job.submitted", job("b", 1, 1))), SimOptions(("fifo",))
    )
    m = measures(sim, sim.runs["fifo"])
    # a runs steps 0-2 on the whole pool; b waits for it, runs step 3
    assert (m.jobs, m.completed, m.unfinished, m.never_started) == (2, 2, 0, 0)
    assert m.wait == {"mean": 1.5, "p50": 0, "p90": 3, "p99": 3, "max": 3}
    assert m.jct == {"mean": 3.5, "p50": 3, "p90": 4, "p99": 4, "max": 4}
    assert m.slowdown["mean"] == 2.5  # a 3/3, b 4/1
    assert m.slowdown_jain_jobs == round(25 / (2 * 17), 4)
    assert m.slowdown_jain_priority_classes == 1.0  # one class: the index over classes cannot see it
    assert m.makespan == 4
    assert set(m.by_size) == {"10-100", "1-10"}  # a: 12 GPU-hours, b: 1
    assert m.by_size["1-10"].wait["mean"] == 3 and m.by_size["10-100"].jct["max"] == 3
    assert list(m.by_priority) == ["5"] and m.served == {} and m.served_worst_day is None


def test_a_job_unfinished_when_the_run_ends_counts_to_the_end_flagged():
    sim = simulate(
        trace((0, "job.submitted", job("long", 4, 30)), (1, "job.submitted", job("next", 4, 2))),
        SimOptions(("fifo",), days=1),
    )
    m = measures(sim, sim.runs["fifo"])
    assert (m.completed, m.unfinished, m.never_started) == (0, 2, 1)
    assert m.jct["max"] == 24 and m.wait["max"] == 23  # 'next' never started: it waits to step 24


def test_an_apps_served_share_per_day_is_what_it_held_over_its_demand():
    app = {"id": "chat", "priority": 9, "min_gpus": 0, "max_gpus": 8, "rps_per_gpu": 1.0}
    # 6 GPUs of demand on a pool of 4 through day 0, then 2 on day 1
    sim = simulate(
        trace(
            (0, "app.registered", app),
            (0, "traffic.observed", {"app": "chat", "requests_per_s": 6.0}),
            (24, "traffic.observed", {"app": "chat", "requests_per_s": 2.0}),
            (47, "job.submitted", job("tail", 1, 1)),
        ),
        SimOptions(("heuristic",)),
    )
    share = served_share(sim, sim.runs["heuristic"])["chat"]
    assert share["days"][0] == pytest.approx(4 / 6, abs=0.01) and share["days"][1] == 1.0
    assert share["worst_day"] == share["days"][0] and 4 / 6 - 0.01 < share["whole"] < 1
    assert measures(sim, sim.runs["heuristic"]).served_worst_day == share["worst_day"]


def test_at_the_contracts_limits_every_job_and_app_day_is_counted():
    """10,000 jobs of distinct priorities, 64 apps over 336 hourly steps on 4,096 GPUs: every job in
    one size bucket and one priority group, every app with a share on each of its 14 days."""
    steps, apps, n = 336, 64, 10_000
    run = PolicyRun("heuristic")
    run.commits = [
        Commit(k, {f"app{a}": tuple(range(a * 64, a * 64 + 32)) for a in range(apps)}, (), None, None)
        for k in range(steps)  # each app holds 32 GPUs of its 64 of demand; the figures read no window
    ]
    for k in range(n):
        run.submitted[f"j{k}"] = k % steps
        if k % 2:
            run.started[f"j{k}"] = k % steps
            run.finished[f"j{k}"] = k % steps + 1
    run.pending = frozenset(f"j{k}" for k in range(0, n, 2))  # still queued at the end
    sim = Simulation(
        PoolConfig(gpus=4096, gpus_per_node=8),
        steps,
        {f"app{a}": [64] * steps for a in range(apps)},
        {**{f"j{k}": 1 + k / n for k in range(n)}, **{f"app{a}": 5.0 for a in range(apps)}},
        {},
        {"heuristic": run},
        sizes={f"j{k}": (1 + k % 512, 1) for k in range(n)},
    )
    m = measures(sim, sim.runs["heuristic"])
    assert (m.jobs, m.completed, m.unfinished, m.withdrawn) == (n, n // 2, n // 2, 0)
    assert len(m.by_priority) == n and sum(g.jobs for g in m.by_size.values()) == n
    assert m.served_worst_day == 0.5 and all(len(s["days"]) == 14 for s in m.served.values())


def test_the_text_shows_sizes_and_leaves_many_priority_classes_to_the_json():
    few = trace(*((0, "job.submitted", job(f"j{k}", 1, 1, priority=1 + k % 3)) for k in range(6)))
    many = trace(*((0, "job.submitted", job(f"j{k}", 1, 1, priority=1 + k)) for k in range(11)))
    for events, by_priority, n in ((few, True, 6), (many, False, 11)):
        sim = simulate(events, SimOptions(("fifo", "heuristic")))
        text = "\n".join(users.lines({p: measures(sim, run) for p, run in sim.runs.items()}))
        assert "by job size (GPU-hours of work)" in text and f"({n}) " in text  # n jobs of 1 GPU-hour: one bucket
        assert ("JCT mean/p90 by priority" in text) is by_priority
        assert ("11 priority classes, too many for a table" in text) is not by_priority
