"""A new user's trial, and the boundary it showed: an app's observed demand is met before a batch
start of lower value, apps stay on the GPUs they hold, a one-step spike does not lift the forecast,
and work behind a job that overran its plan is backfilled instead of a reservation sliding."""

from __future__ import annotations

from datetime import timedelta

from support.builders import T0, ev
from support.trial_trace import PROFILE, SPIKE_STEP, write_trial

from gpualloc.agent.traces import read_trace
from gpualloc.solvers.legality import online_violations
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.simulation.report import executed_violations, whole_run
from gpualloc.solvers.simulation.simulator import SimOptions, simulate

STEP = timedelta(minutes=60)


def test_the_trial_meets_the_spike_without_lifting_the_forecast_or_moving_the_app(tmp_path):
    sim = simulate(read_trace(write_trial(tmp_path / "trial.jsonl")), SimOptions(policies=("fifo", "heuristic")))
    for run in sim.runs.values():
        assert executed_violations(sim, run) == []
    run, executed = sim.runs["heuristic"], sim.runs["heuristic"].executed()
    held_then = len(executed[SPIKE_STEP].assignments["chat"])
    after = run.commits[SPIKE_STEP + 1]
    assert len(after.assignments["chat"]) == min(8, held_then + 2)  # all the swap cap lets it take at the boundary
    later = [c.window.realtime[0].demand for c in run.commits[SPIKE_STEP + 2 : 20]]
    assert later and max(max(d) for d in later) <= max(PROFILE)  # one spike lifts no forecast for the hours after
    assert whole_run(sim, run).realtime_moves == 0.0  # the app grows and shrinks, never moves


def _squeezed(cut_ahead: bool) -> tuple[Pool, list]:
    """16 GPUs; an app (priority 10, floor 2, ceiling 8, swap cap 2) seen at 2 GPUs for a day,
    beside an 8-GPU job and two that end at step 27's boundary, while a 4-GPU job of priority 5
    waits; late in step 26 the app is seen needing 8. With `cut_ahead`, the next boundary's plan is
    cut and made before that observation."""
    pool = Pool()
    pool.apply(
        [
            ev("pool.configured", {"gpus": 16, "gpus_per_node": 8, "horizon": 6, "step_minutes": 60}),
            ev("app.registered", {"id": "chat", "priority": 10, "min_gpus": 2, "max_gpus": 8, "swap_cap": 2}),
            *(
                ev("job.submitted", {"id": i, "kind": "training", "priority": 6, "gpus": g, "duration": d}, ref=i)
                for i, g, d in (("long", 8, 40), ("a", 4, 27), ("b", 1, 27))
            ),
        ],
        T0,
    )
    commits = [pool.commit().commit]
    dpo = {"id": "dpo", "kind": "training", "priority": 5, "gpus": 4, "duration": 6}
    pool.apply([ev("job.submitted", dpo, minutes=30, ref="dpo")], T0 + timedelta(minutes=30))
    for step in range(1, 27):
        at = step * 60 - 30
        pool.apply([ev("traffic.observed", {"app": "chat", "gpus": 2}, minutes=at, ref=at)], T0 + at * STEP / 60)
        commits.append(pool.commit().commit)
    at = 26 * 60 + 20
    done = [ev("job.completed", {"id": j}, minutes=at, ref=f"done-{j}") for j in ("a", "b")]
    pool.apply(done, T0 + at * STEP / 60)
    if cut_ahead:
        cut = pool.cut()
        assert cut is not None
        pool.planned_ahead(cut.step, heuristic_schedule(cut.problem))
    at = 26 * 60 + 50
    pool.apply([ev("traffic.observed", {"app": "chat", "gpus": 8}, minutes=at, ref=at)], T0 + at * STEP / 60)
    commits.append(pool.commit().commit)
    return pool, commits


def test_observed_demand_is_met_before_a_start_of_lower_value_at_the_boundary():
    """The app holds 3 at the end of step 26 (its floor's 2 and the idle GPU granted at once); the
    boundary frees 5. It takes the 2 its swap cap allows, and the priority-5 job, which would need
    4 of the 5, waits: it does not start on GPUs the app's observed need could take. The same when
    the boundary's plan was made ahead, before the observation: it is replanned."""
    for cut_ahead in (False, True):
        pool, commits = _squeezed(cut_ahead)
        last = commits[-1]
        assert last.step == 27 and len(last.assignments["chat"]) == 5, cut_ahead
        assert "dpo" not in last.started and "dpo" in pool.planner.queued
        assert online_violations(commits, {"chat": (2, 8, 2)}, {"chat"}, node_size=8) == []


def test_work_behind_a_job_that_overran_is_backfilled_and_starts_behind_it_say_so():
    """An 8-GPU job planned for 2 steps runs on; a 16-GPU job waits for its GPUs. Planned a step
    at a time, the overrunning job would end at every next boundary, and a 3-step job would never
    fit before the 16-GPU job's block; planned to its likely end (as long again as it overran), the
    3-step job starts at once, and a job placed behind the overrunning one says it depends on it."""
    pool = Pool()
    job = {"kind": "training", "priority": 6}
    pool.apply(
        [
            ev("pool.configured", {"gpus": 16, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60}),
            ev("job.submitted", job | {"id": "runs-on", "gpus": 8, "duration": 2}, ref="runs-on"),
        ],
        T0,
    )
    pool.commit()
    pool.apply(
        [ev("job.submitted", job | {"id": "wide", "gpus": 16, "duration": 4}, minutes=10, ref="w")], T0 + STEP / 6
    )
    for _ in range(5):
        pool.commit()
    at = pool.planner.now * 60 - 50
    small = {"id": "small", "kind": "training", "priority": 3, "gpus": 2, "duration": 3}
    behind = {"id": "behind", "kind": "training", "priority": 3, "gpus": 8, "duration": 2}
    decided = {}
    for payload in (small, behind):
        for effect in pool.apply([ev("job.submitted", payload, minutes=at, ref=payload["id"])], T0 + at * STEP / 60):
            if hasattr(effect, "decision"):
                decided[effect.decision.job_id] = effect.decision
    assert decided["small"].action == "start"
    assert decided["behind"].action == "planned" and "runs-on (priority 6; overrunning" in decided["behind"].reason
    assert "depends on it" in decided["behind"].reason
