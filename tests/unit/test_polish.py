"""The polish of a finished plan (`heuristic.polish`): hand-made cases whose best move is known
(an app migrating off a node within a swap cap of 1 or 2, a job making way and placed again),
and on generated scenarios: polishing a legal plan (the greedy's, and its apps with no batch
work at all) keeps it legal, never lowers its
objective, and the compiled polish moves exactly as the Python one."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from support.builders import app, batch, make
from support.examples import examples
from support.scenario_args import generator_args

from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.solvers import check_plan, compile_scenario
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.policies.greedy import greedy_schedule
from gpualloc.solvers.policies.heuristic import polish as polish_module
from gpualloc.solvers.policies.heuristic.native import AVAILABLE, NativeKernels
from gpualloc.solvers.policies.heuristic.polish import polish
from gpualloc.solvers.problem import mask_of


def _node_held_by_an_app(swap_cap: int):
    """8 GPUs in nodes of 4: running jobs hold GPUs 0-2 throughout, the app holds GPU 5 and
    the 4-GPU job waits with no start. Only GPUs 4-7 can take it, once the app moves to GPU 3."""
    _, problem = make(
        8,
        4,
        [
            batch("run", 2, 4, running=([0, 1], 4)),
            batch("run1", 1, 4, running=([2], 4)),
            app("rt", [1, 1, 1, 1], current=[5], max_gpus=2, swap_cap=swap_cap, min_gpus=1),
            batch("big", 4, 4, priority=5),
        ],
        gpus_per_node=4,
        time_decay=0.9,
    )
    plan = Schedule(batch={"run": (0, mask_of([0, 1])), "run1": (0, mask_of([2]))}, realtime={"rt": [mask_of([5])] * 4})
    return problem, plan


def _checked(problem, schedule: Schedule) -> Schedule:
    assert [str(v) for v in check_plan(problem, to_grid(problem, schedule))] == []
    return schedule


def test_an_app_migrates_off_a_node_so_a_block_starts_at_once():
    problem, plan = _node_held_by_an_app(swap_cap=2)
    polished = _checked(problem, polish(problem, plan, 1000))
    assert polished.batch["big"] == (0, mask_of([4, 5, 6, 7]))
    assert polished.realtime["rt"] == [mask_of([3])] * 4
    assert objective_of(problem, polished) > objective_of(problem, plan)


def test_a_swap_cap_of_one_migrates_in_two_steps_holding_both_gpus_for_one():
    problem, plan = _node_held_by_an_app(swap_cap=1)
    polished = _checked(problem, polish(problem, plan, 1000))
    assert polished.batch["big"] == (1, mask_of([4, 5, 6, 7]))
    assert polished.realtime["rt"] == [mask_of([3, 5])] + [mask_of([3])] * 3


def test_a_job_makes_way_for_a_more_valuable_block_and_is_placed_again():
    # The small job holds half the node from step 0; the big one (worth more a step) takes the
    # whole node first and the small one follows it.
    _, problem = make(
        4,
        6,
        [batch("small", 2, 2, priority=1), batch("big", 4, 2, priority=5)],
        time_decay=0.9,
    )
    plan = Schedule(batch={"small": (0, mask_of([0, 1])), "big": (2, mask_of([0, 1, 2, 3]))})
    polished = _checked(problem, polish(problem, plan, 1000))
    assert polished.batch == {"big": (0, mask_of([0, 1, 2, 3])), "small": (2, mask_of([0, 1]))}
    assert objective_of(problem, polished) > objective_of(problem, plan)


def test_no_budget_leaves_the_plan_as_it_is():
    problem, plan = _node_held_by_an_app(swap_cap=2)
    assert polish(problem, plan, 0) == plan


def _generated(args: dict):
    return compile_scenario(Scenario.model_validate(generate_scenario(**args)))


@settings(max_examples=examples(150), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(generator_args([2, 4, 8, 12, 16, 32, 64], 24, [1, 4, 8, 16], max_node=16))
def test_polishing_a_legal_plan_keeps_it_legal_and_never_lowers_its_objective(args):
    problem = _generated(args)
    greedy = greedy_schedule(problem)
    running = {j.id: greedy.batch[j.id] for j in problem.batch if j.running_mask}
    for plan in (greedy, Schedule(batch=running, realtime=greedy.realtime)):  # the second places every job
        polished = _checked(problem, polish(problem, plan, 4000))
        assert objective_of(problem, polished) >= objective_of(problem, plan) - 1e-6
        if AVAILABLE:
            compiled = NativeKernels(problem).polish(plan, 4000)
            assert (compiled.batch, compiled.realtime) == (polished.batch, polished.realtime)


def test_the_compiled_polish_refuses_a_start_past_the_horizon():
    if not AVAILABLE:
        pytest.skip("the compiled heuristic is not built here (`make native`)")
    problem, plan = _node_held_by_an_app(swap_cap=2)
    kernels = NativeKernels(problem)
    sets = [[kernels.encode(m) for m in plan.realtime["rt"]]]
    with pytest.raises(ValueError, match="starts"):
        kernels.native.polish([None, None, None, (9, 4)], sets, 10)


def test_the_migration_pre_check_changes_no_plan():
    """`_room_to_migrate` only skips migrations that would fail: polishing with it always
    passing gives the same plans (both implementations run it, so only this can show it)."""
    real = polish_module._Plan._room_to_migrate
    refused = 0

    def counted(self, block, s, e):
        nonlocal refused
        ok = real(self, block, s, e)
        refused += not ok
        return ok

    for seed in range(40):
        problem = _generated({"gpus": 8 + 4 * (seed % 3), "jobs": 10, "seed": seed, "horizon": 12})
        greedy = greedy_schedule(problem)
        running = {j.id: greedy.batch[j.id] for j in problem.batch if j.running_mask}
        for plan in (greedy, Schedule(batch=running, realtime=greedy.realtime)):
            with patch.object(polish_module._Plan, "_room_to_migrate", counted):
                checked = polish(problem, plan, 4000)
            with patch.object(polish_module._Plan, "_room_to_migrate", lambda self, block, s, e: True):
                unchecked = polish(problem, plan, 4000)
            assert (checked.batch, checked.realtime) == (unchecked.batch, unchecked.realtime)
    assert refused > 0  # the check did skip migrations here
