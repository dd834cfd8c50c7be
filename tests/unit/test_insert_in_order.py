"""`insert_in_order` (FIFO, the greedy and a carried-over plan place their jobs with it) skips
the jobs it can tell fit nowhere; it must place exactly what one `earliest_block` a job does."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.examples import examples
from test_property import drawn_scenarios

from gpualloc.schemas import Scenario
from gpualloc.solvers import compile_scenario
from gpualloc.solvers.problem import earliest_block, insert_in_order


def one_scan_a_job(problem, jobs, busy):
    placed = {}
    for job in jobs:
        block = earliest_block(problem, job, busy)
        if block is not None:
            placed[job.id] = block
            for t in range(block[0], problem.end_of(job, block[0])):
                busy[t] |= block[1]
    return placed


@settings(max_examples=examples(400), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(drawn_scenarios(), st.data())
def test_skipping_the_jobs_that_cannot_fit_places_what_a_scan_a_job_places(data, draw):
    problem = compile_scenario(Scenario.model_validate(data))
    queued = [j for j in problem.batch if not j.running_mask]
    order = draw.draw(st.permutations(queued))
    # a window already partly held (often full), so that some jobs fit nowhere
    held = draw.draw(st.lists(st.integers(0, problem.full), min_size=problem.horizon, max_size=problem.horizon))
    busy = list(held)
    expected_busy = list(held)
    assert insert_in_order(problem, order, busy) == one_scan_a_job(problem, order, expected_busy)
    assert busy == expected_busy


def test_a_job_no_smaller_shorter_or_earlier_than_a_misfit_is_not_scanned(monkeypatch):
    data = {
        "name": "full",
        "gpus": 8,
        "gpus_per_node": 8,
        "horizon": 4,
        "jobs": [
            {"id": "wide", "kind": "training", "priority": 1, "gpus": 4, "duration": 2},
            {"id": "wider", "kind": "training", "priority": 1, "gpus": 8, "duration": 3, "arrival": 1},
            {"id": "narrow", "kind": "training", "priority": 1, "gpus": 2, "duration": 1},
        ],
    }
    problem = compile_scenario(Scenario.model_validate(data))
    scanned = []

    def counting(problem, job, busy):
        scanned.append(job.id)
        return earliest_block(problem, job, busy)

    monkeypatch.setattr("gpualloc.solvers.problem.earliest_block", counting)
    busy = [0b00111111] * 4  # two GPUs free at every step
    placed = insert_in_order(problem, problem.batch, busy)
    assert scanned == ["wide", "narrow"]  # "wider" is at least as wide, long and late as "wide"
    assert placed == {"narrow": (0, 0b11000000)}
