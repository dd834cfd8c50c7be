"""Apps kept on the GPUs they hold (`keep_held`) at the contract's limits: 4,096 GPUs, a horizon
of 336 steps, 64 apps and 10,000 queued jobs."""

from __future__ import annotations

import pytest

from gpualloc.schemas.limits import LIMITS
from gpualloc.solvers.grid import Schedule, to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.keep_held import keep_held
from gpualloc.solvers.problem import Batch, Problem, Realtime


def _block(first: int, n: int) -> int:
    return ((1 << n) - 1) << first


@pytest.mark.slow
def test_at_the_limits_apps_go_back_to_their_gpus_and_move_only_when_work_takes_them():
    """64 apps, each holding 16 GPUs and planned on the 16 beside them for the whole window; on
    the odd apps' held GPUs a batch block starts at step 3, so the even apps go back for the whole
    window and the odd ones until step 3, where they move (all 16: 32 swaps, their cap). 10,000
    one-GPU jobs fill the other half of the pool over the window."""
    G, T, apps, jobs = LIMITS.gpus, LIMITS.horizon, LIMITS.apps, LIMITS.queued_jobs
    realtime, sets = [], {}
    for i in range(apps):
        held, planned = _block(32 * i, 16), _block(32 * i + 16, 16)
        realtime.append(Realtime(i, f"rt{i}", 5.0, (16,) * T, 16, 16, 32, held))  # a move of all 16: 32 swaps
        sets[f"rt{i}"] = [planned] * T
    batch, placed = [], {}
    for k in range(jobs):
        job = Batch(apps + k, f"j{k}", 1.0, 1, 1, 0, 0, 0)
        batch.append(job)
        placed[job.id] = (k // 2048, 1 << (2048 + k % 2048))
    for i in range(1, apps, 2):
        job = Batch(apps + jobs + i, f"w{i}", 1.0, 16, 1, 0, 0, 0)
        batch.append(job)
        placed[job.id] = (3, _block(32 * i, 16))
    weights = tuple(0.99**t for t in range(T))
    problem = Problem("limits", G, 8, T, 0.99, 1.0, weights, tuple(batch), tuple(realtime))
    plan = Schedule(placed, sets)
    assert check_plan(problem, to_grid(problem, plan)) == []

    kept = keep_held(problem, plan)

    assert check_plan(problem, to_grid(problem, kept)) == []
    assert objective_of(problem, kept) == objective_of(problem, plan) and kept.batch == plan.batch
    for app in problem.realtime:
        i = int(app.id[2:])
        moved_at = T if i % 2 == 0 else 3
        assert kept.realtime[app.id] == [app.current_mask] * moved_at + [sets[app.id][0]] * (T - moved_at), app.id


def _one_app(
    current: int, planned: list[int], cap: int, blocks: dict[str, tuple[int, int]]
) -> tuple[Problem, Schedule]:
    """A 16-GPU pool, a 6-step window: one app holding `current`, planned on `planned`, and batch
    blocks of one step each (job id -> (start, mask))."""
    T = len(planned)
    batch = tuple(
        Batch(1 + k, job_id, 1.0, mask.bit_count(), 1, 0, 0, 0) for k, (job_id, (_, mask)) in enumerate(blocks.items())
    )
    demand = tuple(m.bit_count() for m in planned)
    app = Realtime(0, "rt", 5.0, demand, 1, 16, cap, current)
    problem = Problem("one app", 16, 8, T, 0.99, 1.0, tuple(0.99**t for t in range(T)), batch, (app,))
    plan = Schedule(dict(blocks), {"rt": list(planned)})
    assert check_plan(problem, to_grid(problem, plan)) == []
    return problem, plan


def test_an_app_stays_on_its_gpu_until_the_step_a_block_takes_it():
    """Held on GPU 0, planned on GPU 1; a block takes GPU 0 at step 3. The app stays on 0 for
    steps 0-2 and moves at step 3, where the block starts: a plan that no longer places the block
    there by then never moves it."""
    problem, plan = _one_app(0b1, [0b10] * 6, 2, {"j": (3, 0b1)})

    kept = keep_held(problem, plan)

    assert kept.realtime["rt"] == [0b1] * 3 + [0b10] * 3
    assert check_plan(problem, to_grid(problem, kept)) == []
    assert objective_of(problem, kept) == objective_of(problem, plan) and kept.batch == plan.batch
    assert keep_held(problem, kept) == kept


def test_a_move_is_not_put_off_onto_a_step_whose_swaps_the_cap_already_spends():
    """As above, but the app grows by two at step 3 under a swap cap of 2: moving there as well
    would take four swaps, so the app moves at step 0 as planned."""
    planned = [0b10] * 3 + [0b1110] * 3
    problem, plan = _one_app(0b1, planned, 2, {"j": (3, 0b1)})

    assert keep_held(problem, plan) == plan
