"""Users' figures at their edges (jobs that left the pool without finishing), bench traces'
pacing, and the job-table converters on any rows: worked out by hand, and properties that must
hold for any small trace or job table."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpualloc.agent.loading import InputError
from gpualloc.generators.job_table_files import job_table_trace
from gpualloc.generators.job_tables import TableJob, block, table_events
from gpualloc.generators.traces import T0
from gpualloc.schemas.events import envelope, parse_event
from gpualloc.solvers.simulation.simulator import SimOptions, simulate
from gpualloc.solvers.simulation.user_measures import measures

POOL = {"gpus": 4, "gpus_per_node": 4, "horizon": 12, "step_minutes": 60, "time_decay": 0.99}


def trace(*rest: tuple[float, str, dict]) -> list:
    """A pool.configured at T0, then (hours, type, payload) each."""
    events = [envelope("pool.configured", POOL, T0, "cfg")]
    events += [envelope(kind, p, T0 + timedelta(hours=h), f"e{k}") for k, (h, kind, p) in enumerate(rest)]
    return [parse_event(e) for e in events]


def job(job_id: str, gpus: int, steps: int, **extra: object) -> dict:
    return {"id": job_id, "kind": "training", "priority": 5, "gpus": gpus, "duration": steps, **extra}


# --- jobs that left the pool without finishing ---------------------------------------------------


def test_a_job_cancelled_while_queued_does_not_wait_to_the_runs_end():
    """'a' (4 GPUs x 20 steps) and 'b' (4 GPUs x 1) arrive at step 0 on 4 GPUs; 'b' is cancelled at
    step 1 while it queues. It is withdrawn, outside the waits, and the makespan is 20, 'a''s
    completion, not the run's end."""
    sim = simulate(
        trace(
            (0, "job.submitted", job("a", 4, 20)),
            (0, "job.submitted", job("b", 4, 1)),
            (1, "job.cancelled", {"id": "b"}),
        ),
        SimOptions(("fifo",)),
    )
    m = measures(sim, sim.runs["fifo"])
    assert (m.jobs, m.withdrawn, m.wait["max"]) == (1, 1, 0)
    assert m.makespan == 20


def test_a_job_failed_for_good_ends_at_its_failure():
    """'a' (4 GPUs x 10 steps, requeue false) starts at step 0 and fails for good at step 2; 'b'
    (4 GPUs x 1) then runs step 2 and completes at step 3: JCT max 3 ('b'), makespan 3."""
    sim = simulate(
        trace(
            (0, "job.submitted", job("a", 4, 10, requeue=False)),
            (0, "job.submitted", job("b", 4, 1)),
            (2, "job.failed", {"id": "a", "reason": "error"}),
        ),
        SimOptions(("fifo",)),
    )
    m = measures(sim, sim.runs["fifo"])
    assert sim.runs["fifo"].failed == {"a": [2]}
    assert (m.jobs, m.withdrawn, m.jct["max"]) == (1, 1, 3)
    assert m.makespan == 3


def test_a_job_rejected_at_submission_does_not_wait_to_the_runs_end():
    """'a' asks for 8 GPUs of a 4-GPU pool and is rejected on arrival; 'b' (4 GPUs x 30) runs
    steps 0-29: 'a' never queued, so no wait counts for it, and the makespan is 30."""
    sim = simulate(
        trace((0, "job.submitted", job("a", 8, 2)), (0, "job.submitted", job("b", 4, 30))), SimOptions(("fifo",))
    )
    m = measures(sim, sim.runs["fifo"])
    assert (m.jobs, m.withdrawn, m.wait["max"]) == (1, 1, 0)
    assert m.makespan == 30


# --- bench traces' pacing ------------------------------------------------------------------------


def test_sized_does_not_pace_a_trace_whose_largest_job_does_not_bind():
    """pollux-3's largest job has 8 GPUs and its work inside the span is about 60 GPUs' worth at
    load 1.25: a pool of 56 or 64 GPUs, not one its largest job forces, so its arrivals keep their
    pace."""
    from gpualloc.benchmarks.trace_bench import sized, traces

    events = dict(traces(False))["pollux-3"]
    assert max(p.gpus for env, p in events if env.type == "job.submitted") == 8
    _, gpus, pace = sized(events, 1.25)
    assert gpus in (56, 64) and pace == 1.0


# --- job-table converters ------------------------------------------------------------------------


def test_a_submit_time_past_the_calendar_is_an_input_error_naming_it(tmp_path: Path):
    """A cut whose submit_time is in milliseconds by mistake (1.7e12) is an input error naming the
    job and the field, not an overflow past the calendar."""
    table = tmp_path / "cut.csv"
    table.write_text("job_id,submit_time,gpus,duration\na,0,8,600\nb,1700000000000,8,600\n")
    with pytest.raises(InputError):
        job_table_trace("philly", table)


_rows = st.lists(
    st.tuples(
        st.floats(0, 30 * 86400, allow_nan=False),  # submit, seconds
        st.integers(0, 600),  # GPUs
        st.one_of(st.none(), st.floats(0, 90 * 86400, allow_nan=False)),  # seconds run
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_rows, gpus=st.integers(1, 512), days=st.one_of(st.none(), st.integers(1, 10)))
def test_any_job_table_converts_to_events_that_parse_and_fit_the_pool(rows, gpus, days):
    """Property: every job kept parses, fits the pool (a power of two, at most the pool's GPUs),
    runs at least one step, arrives at or after the pool's configuration, and the counts add up."""
    jobs = [TableJob(f"j{k}", submit, n, ran) for k, (submit, n, ran) in enumerate(rows)]
    events, stats = table_events(jobs, "philly", gpus, days)
    parsed = [parse_event(e) for e in events]
    config = parsed[0][1]
    assert parsed[0][0].type == "pool.configured" and config.gpus % 8 == 0 and config.gpus >= gpus
    submitted = [(env, p) for env, p in parsed[1:]]
    assert all(env.type == "job.submitted" for env, _ in submitted)
    assert stats.kept == len(submitted) and stats.rows == stats.kept + stats.never_ran + stats.no_gpus
    assert len({p.id for _, p in submitted}) == len(submitted)
    for env, p in submitted:
        assert p.gpus <= config.gpus and p.gpus == block(p.gpus) and p.duration >= 1
        assert env.occurred_at >= parsed[0][0].occurred_at
    if submitted:
        assert submitted[0][0].occurred_at == parsed[0][0].occurred_at  # the first job kept at step 0


_jobs = st.lists(
    st.tuples(st.integers(0, 6), st.sampled_from([1, 2, 4]), st.integers(1, 5), st.integers(1, 9)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=_jobs)
def test_any_small_trace_counts_every_job_once_and_waits_within_jct(jobs):
    """Property: on any small trace of jobs that all fit (no cancellations), every policy's
    measures count each job once (overall, by size, by priority), every job finishes, and each
    job's wait is at most its JCT, which is at least its run time."""
    events = trace(
        *(
            (hour, "job.submitted", job(f"j{k}", gpus, steps, priority=prio))
            for k, (hour, gpus, steps, prio) in enumerate(jobs)
        )
    )
    sim = simulate(events, SimOptions(("fifo", "greedy", "heuristic")))
    for run in sim.runs.values():
        m = measures(sim, run)
        assert m.jobs == len(jobs) == len(run.submitted)
        assert sum(g.jobs for g in m.by_size.values()) == m.jobs == sum(g.jobs for g in m.by_priority.values())
        assert m.completed == m.jobs and m.unfinished == 0
        for j, at in run.submitted.items():
            wait, jct = run.started[j] - at, run.finished[j] - at
            assert 0 <= wait <= jct and jct >= run.run_steps[j]
        assert m.makespan == max(run.finished.values()) - min(run.submitted.values())
