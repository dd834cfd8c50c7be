"""Metrics of tiny grids, computed by hand from the contract's definitions."""

from __future__ import annotations

import pytest
from support.builders import app, batch, grid, make

from gpualloc.solvers import compute_metrics
from gpualloc.solvers.policies import policy


def test_metrics_of_a_hand_computed_grid():
    # w = (1, 0.5); penalty 2. a: priority 3, steps 0-1 -> 3 * 1.5 = 4.5 (completed).
    # b: priority 1 at step 1 only (duration 3 runs past the horizon) -> 0.5 (not completed).
    # c: unscheduled. r: priority 4, demand (1, 2); holds 2 GPUs at step 0 (1 above demand:
    # served 1) and none at step 1 (shortfall 2) -> value 4 * 1 * 1 = 4, penalty 4 * 0.5 * 2 = 4.
    _, problem = make(
        3,
        2,
        [
            batch("a", 1, 2, priority=3),
            batch("b", 1, 3, priority=1, arrival=1),
            batch("c", 1, 1, priority=2, arrival=5),
            app("r", [1, 2], priority=4),
        ],
        time_decay=0.5,
        realtime_penalty=2,
    )
    g = grid("aa", "rb", "r.")
    assert policy("fifo").check(problem, g) == []
    m = compute_metrics(problem, g)
    assert m.value == pytest.approx(4.5 + 0.5 + 4.0)
    assert m.objective == pytest.approx(5.0 - 2 * 4.0)
    assert m.utilization == pytest.approx((3 + 1) / 6, abs=1e-6)  # batch steps + served
    assert m.realtime_shortfall == 2
    assert (m.completed, m.scheduled, m.unscheduled) == (1, 2, ["c"])


def test_running_jobs_complete_when_remaining_fits_the_horizon():
    _, problem = make(
        2, 2, [batch("x", 1, 9, running=([0], 2), priority=2), batch("y", 1, 9, running=([1], 3))], time_decay=1.0
    )
    m = compute_metrics(problem, grid("xx", "yy"))
    assert (m.completed, m.scheduled, m.unscheduled) == (1, 2, [])
    assert m.value == pytest.approx(2 * 2 + 1 * 2)
    assert m.utilization == 1.0


def test_empty_grid():
    _, problem = make(2, 3, [batch("a", 1, 1), app("r", [0, 1, 0], priority=2)], time_decay=1.0)
    m = compute_metrics(problem, grid("...", "..."))
    assert (m.utilization, m.value, m.realtime_shortfall) == (0.0, 0.0, 1)
    assert m.objective == pytest.approx(-8.0 * 2 * 1)  # default realtime_penalty 8
    assert m.unscheduled == ["a"]
