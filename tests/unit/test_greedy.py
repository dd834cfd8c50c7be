"""The greedy baseline: real-time floors first, then jobs by priority at their earliest legal
block, then real-time demand above the floors with what is left, within the swap caps."""

from __future__ import annotations

from support.builders import app, batch, make, show

from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.policies import solve


def test_floors_first_then_jobs_by_priority_then_demand_with_what_is_left():
    sc, problem = make(
        4,
        4,
        [
            batch("l", 2, 2, priority=1),
            batch("h", 2, 2, priority=9, arrival=0),
            app("r", [3, 3, 1, 1], priority=2, min_gpus=1, swap_cap=4),
        ],
    )
    plan = solve(problem, "greedy")
    assert check_plan(problem, plan.grid) == []
    rows = show(plan.grid)
    cells = {(g, t): c for g, row in enumerate(rows) for t, c in enumerate(row)}
    h_gpus = {g for (g, t), c in cells.items() if c == "h" and t == 0}
    l_start = min(t for (g, t), c in cells.items() if c == "l")
    assert len(h_gpus) == 2 and l_start == 2, rows  # the valuable job first; the other waits for its GPUs
    held = [sum(1 for g in range(4) if cells[g, t] == "r") for t in range(4)]
    assert all(n >= 1 for n in held) and held[0] == 2, (rows, held)  # floor kept; demand met only with the GPU left


def test_the_greedy_respects_the_swap_cap_when_demand_jumps():
    free_start = make(8, 4, [app("r", [1, 8, 8, 1], priority=5, min_gpus=1, swap_cap=2)])[1]
    from_one = make(8, 4, [app("r", [1, 8, 8, 1], priority=5, min_gpus=1, swap_cap=2, current=[0])])[1]
    for problem, expected in ((free_start, [6, 8, 8, 8]), (from_one, [3, 5, 7, 7])):
        plan = solve(problem, "greedy")
        assert check_plan(problem, plan.grid) == []
        held = [sum(1 for row in show(plan.grid) if row[t] == "r") for t in range(4)]
        assert held == expected, held  # ramped ahead of the jump two a step; extras kept once held
