"""FIFO on small hand-made scenarios whose exact grid is worked out by hand from the contract."""

from __future__ import annotations

from support.builders import app, batch, make, show

from gpualloc.solvers import solve
from gpualloc.solvers.policies import policy


def fifo_grid(gpus, horizon, jobs, **extra):
    _, problem = make(gpus, horizon, jobs, **extra)
    plan = solve(problem, "fifo")
    assert policy("fifo").check(problem, plan.grid) == []
    return plan


def test_reservation_takes_current_gpus_first_then_lowest_free():
    # Peak 2: the app keeps its current GPU 2, then takes the lowest free GPU, 0.
    # The 1-GPU jobs then take the lowest free GPUs, 1 and 3.
    plan = fifo_grid(4, 2, [app("r", [1, 2], current=[2]), batch("a", 1, 2), batch("b", 1, 1)])
    assert show(plan.grid) == ["rr", "aa", "rr", "b."]


def test_reservation_uses_gpus_free_at_every_step():
    # GPU 1 is held by running job x at steps 0-1, so it is not free at every step: the
    # app's two GPUs are 0 and 2. Job a needs 3 steps: only GPU 3 is free throughout.
    # Job b (1 step) finds no free GPU at steps 0-1, then GPU 1 at step 2.
    jobs = [batch("x", 1, 4, running=([1], 2)), app("r", [2, 1, 1]), batch("a", 1, 3), batch("b", 1, 1)]
    plan = fifo_grid(4, 3, jobs)
    assert show(plan.grid) == ["rrr", "xxb", "rrr", "aaa"]


def test_reservation_is_the_peak_clamped_to_floor_and_ceiling():
    # r: peak 1 but min 2 -> 2 GPUs; s: peak 5 but max 1 -> 1 GPU.
    plan = fifo_grid(4, 2, [app("r", [1, 0], min_gpus=2, max_gpus=3), app("s", [5, 5], max_gpus=1)])
    assert show(plan.grid) == ["rr", "rr", "ss", ".."]


def test_reservation_keeps_all_current_gpus_even_above_the_peak():
    plan = fifo_grid(4, 2, [app("r", [1, 1], current=[1, 2, 3]), batch("a", 1, 2)])
    assert show(plan.grid) == ["aa", "rr", "rr", "rr"]


def test_reservation_gets_fewer_gpus_when_fewer_are_free():
    # GPU 0 is busy at step 0, so only GPU 1 is free at every step: the app gets 1 of its 2.
    # Job a then fits on GPU 0 at step 1 only.
    plan = fifo_grid(2, 2, [batch("x", 1, 1, running=([0], 1)), app("r", [2, 2]), batch("a", 1, 1)])
    assert show(plan.grid) == ["xa", "rr"]
    assert plan.metrics.realtime_shortfall == 2


def test_first_fit_with_backfill():
    # a takes GPUs 0-1; b (4 GPUs) must wait for step 2; c (later in the file) backfills GPUs
    # 2-3 at step 0, ahead of b; d finds no free GPU at any step >= its arrival.
    jobs = [batch("a", 2, 2), batch("b", 4, 2), batch("c", 2, 2), batch("d", 1, 1, arrival=1)]
    plan = fifo_grid(4, 4, jobs)
    assert show(plan.grid) == ["aabb", "aabb", "ccbb", "ccbb"]
    assert plan.metrics.unscheduled == ["d"]


def test_jobs_are_taken_in_arrival_order_not_file_order():
    # `late` comes first in the file but arrives at step 1; `early` goes first and `late`
    # waits until the pool is free at step 2.
    plan = fifo_grid(2, 4, [batch("l", 2, 2, arrival=1), batch("e", 2, 2)])
    assert show(plan.grid) == ["eell", "eell"]


def test_node_rule_and_unaligned_block_starts():
    # Nodes {0..3}, {4..7}; GPU 0 is held by running job x. a (4 GPUs) cannot start at GPU 1
    # (it would cross into node 1): it takes node 1. b (2 GPUs) starts unaligned at GPU 1;
    # c takes GPU 3.
    jobs = [batch("x", 1, 2, running=([0], 2)), batch("a", 4, 2), batch("b", 2, 2), batch("c", 1, 2)]
    plan = fifo_grid(8, 2, jobs, gpus_per_node=4)
    assert show(plan.grid) == ["xx", "bb", "bb", "cc", "aa", "aa", "aa", "aa"]


def test_blocks_larger_than_a_node_start_on_a_node_boundary():
    # Nodes of 2. b (4 GPUs) may start at 0, 2, 4 (whole nodes); GPU 0 is taken by a, so 2.
    plan = fifo_grid(8, 1, [batch("a", 1, 1), batch("b", 4, 1)], gpus_per_node=2)
    assert show(plan.grid) == ["a", ".", "b", "b", "b", "b", ".", "."]


def test_unaligned_start_in_a_single_pool():
    plan = fifo_grid(4, 1, [batch("a", 1, 1), batch("b", 2, 1), batch("c", 1, 1)])
    assert show(plan.grid) == ["a", "b", "b", "c"]


def test_jobs_longer_than_the_horizon_run_to_its_end():
    plan = fifo_grid(2, 3, [batch("a", 1, 10), batch("b", 1, 2, arrival=2)])
    assert show(plan.grid) == ["aaa", "..b"]
    assert plan.metrics.completed == 0 and plan.metrics.scheduled == 2


def test_running_jobs_keep_their_gpus_even_when_scattered():
    # Inherited GPUs 0 and 2 are not a contiguous block; they are taken as they are. No two
    # adjacent GPUs are free while x runs (steps 0-1), so a starts at step 2 on GPUs 0-1.
    plan = fifo_grid(4, 3, [batch("x", 2, 5, running=([0, 2], 2)), batch("a", 2, 1)])
    assert show(plan.grid) == ["xxa", "..a", "xx.", "..."]


def test_gpus_of_a_finished_running_job_are_free_again():
    # x holds GPUs 0-1 for 1 step; a (2 GPUs, 2 steps) then gets the lowest block, GPUs 0-1.
    plan = fifo_grid(3, 3, [batch("x", 2, 1, running=([0, 1], 1)), batch("a", 2, 2)])
    assert show(plan.grid) == ["xaa", "xaa", "..."]
