"""The legality validator detects each of R1-R5 on hand-broken grids and accepts legal ones."""

from __future__ import annotations

import copy

import pytest
from support.builders import app, batch, grid, make

from gpualloc.solvers import check_plan
from gpualloc.solvers.policies import policy

# Nodes {0,1} {2,3} {4,5}; swap cap 1. x runs on GPU 5 for 2 steps; a (2 GPUs, 2 steps)
# arrives at step 1; b is a 1-step job; r wants [1, 1, 2, 2] GPUs, holds GPU 0 before step 0.
JOBS = [
    batch("x", 1, 3, running=([5], 2)),
    batch("a", 2, 2, arrival=1),
    batch("b", 1, 1),
    app("r", [1, 1, 2, 2], min_gpus=1, max_gpus=2, current=[0]),
]
LEGAL = grid(
    "rrrr",
    "..rr",
    "baa.",
    ".aa.",
    "....",
    "xx..",
)


@pytest.fixture(scope="module")
def problem():
    return make(6, 4, JOBS, gpus_per_node=2, swap_cap=1)[1]


def edit(cells: dict[tuple[int, int], str | None]):
    """LEGAL with some (gpu, step) cells replaced."""
    g = copy.deepcopy(LEGAL)
    for (gpu, t), job in cells.items():
        g[gpu][t] = job
    return g


def rules(problem, g, scheduler="heuristic") -> set[tuple[str, str | None]]:
    return {(v.rule, v.job) for v in policy(scheduler).check(problem, g)}


def test_legal_grid_is_accepted(problem):
    assert check_plan(problem, LEGAL) == []
    assert policy("fifo").check(problem, LEGAL) == []


def test_empty_grid_breaks_r5_and_the_realtime_floor(problem):
    empty = [[None] * 4 for _ in range(6)]
    assert rules(problem, empty, "fifo") == {("R5", "x")}
    assert rules(problem, empty) == {("R5", "x"), ("R3", "r")}


def test_r1_wrong_shape(problem):
    assert rules(problem, LEGAL[:5]) == {("R1", None)}
    short = copy.deepcopy(LEGAL)
    short[2] = short[2][:3]
    assert rules(problem, short) == {("R1", None)}


def test_r1_unknown_job(problem):
    assert rules(problem, edit({(4, 0): "zz"})) == {("R1", "zz")}


def test_r2_start_before_arrival(problem):
    g = edit({(2, 0): "a", (3, 0): "a", (2, 2): None, (3, 2): None})
    found = check_plan(problem, g)
    assert [(v.rule, v.job, v.step) for v in found] == [("R2", "a", 0)]
    assert "arrival" in found[0].detail


def test_r2_gap_in_the_interval(problem):
    g = edit({(2, 2): None, (3, 2): None, (2, 3): "a", (3, 3): "a"})
    assert rules(problem, g) == {("R2", "a")}


def test_r2_stopped_before_duration(problem):
    assert rules(problem, edit({(2, 2): None, (3, 2): None})) == {("R2", "a")}


def test_r2_wrong_number_of_gpus(problem):
    g = edit({(3, 1): None, (3, 2): None})
    found = check_plan(problem, g)
    assert {(v.rule, v.job) for v in found} == {("R2", "a")}
    assert any("needs exactly 2" in v.detail for v in found)


def test_r2_moving_to_other_gpus_mid_run(problem):
    # a on GPUs 2-3 at step 1, then on GPUs 3-4 at step 2.
    g = edit({(2, 2): None, (4, 2): "a"})
    assert ("R2", "a") in rules(problem, g)


def test_r3_block_not_contiguous(problem):
    g = edit({(3, 1): None, (3, 2): None, (4, 1): "a", (4, 2): "a"})
    found = check_plan(problem, g)
    assert [(v.rule, v.job) for v in found] == [("R3", "a")]
    assert "contiguous" in found[0].detail


def test_r3_block_breaks_the_node_rule(problem):
    # GPUs 3-4 are contiguous but span nodes {2,3} and {4,5}.
    g = edit({(2, 1): None, (2, 2): None, (4, 1): "a", (4, 2): "a"})
    found = check_plan(problem, g)
    assert [(v.rule, v.job) for v in found] == [("R3", "a")]
    assert "node rule" in found[0].detail


def test_r3_realtime_below_min(problem):
    # r drops GPU 0 at step 0 (1 move, within its cap of 1) but holds 0 < min_gpus 1.
    found = check_plan(problem, edit({(0, 0): None}))
    assert [(v.rule, v.job, v.step) for v in found] == [("R3", "r", 0)]


def test_r3_realtime_above_max(problem):
    found = check_plan(problem, edit({(4, 3): "r"}))
    assert [(v.rule, v.job, v.step) for v in found] == [("R3", "r", 3)]


def test_r4_swap_cap_between_steps(problem):
    # At step 2, r takes GPUs 1 and 4 instead of 0 and 1: GPU 0 leaves, 1 and 4 enter (3 > 1);
    # at step 3 it is back on 0 and 1 (2 > 1).
    g = edit({(0, 2): None, (4, 2): "r"})
    found = check_plan(problem, g)
    assert {(v.rule, v.job, v.step) for v in found} == {("R4", "r", 2), ("R4", "r", 3)}


def test_r4_step_zero_counts_against_current(problem):
    # r holds GPU 4 at steps 0-1 instead of its current GPU 0: 2 moves at step 0, 2 at step 2.
    g = edit({(0, 0): None, (0, 1): None, (4, 0): "r", (4, 1): "r"})
    found = {(v.rule, v.step) for v in check_plan(problem, g)}
    assert ("R4", 0) in found and all(rule == "R4" for rule, _ in found)


def test_fifo_is_exempt_from_realtime_floors_and_r4(problem):
    g = edit({(0, 2): None, (4, 2): "r", (4, 3): "r"})
    assert rules(problem, g, "fifo") == set()
    assert rules(problem, g) != set()


def test_r5_running_job_on_other_gpus(problem):
    g = edit({(5, 0): None, (5, 1): None, (4, 0): "x", (4, 1): "x"})
    assert rules(problem, g) == {("R5", "x")}


def test_r5_running_job_missing_from_the_grid(problem):
    found = check_plan(problem, edit({(5, 0): None, (5, 1): None}))
    assert [(v.rule, v.job, v.step) for v in found] == [("R5", "x", 0)]


def test_r5_running_job_released_early(problem):
    assert rules(problem, edit({(5, 1): None})) == {("R5", "x")}


def test_r5_running_job_kept_too_long(problem):
    assert rules(problem, edit({(5, 2): "x"})) == {("R5", "x")}


def test_r5_running_job_must_hold_from_step_zero(problem):
    found = check_plan(problem, edit({(5, 0): None}))
    assert [(v.rule, v.job, v.step) for v in found] == [("R5", "x", 1)]


def test_fifo_is_still_checked_for_blocks_and_running_jobs(problem):
    g = edit({(5, 1): None, (3, 1): None, (3, 2): None, (4, 1): "a", (4, 2): "a"})
    assert rules(problem, g, "fifo") == {("R5", "x"), ("R3", "a")}


def test_online_a_job_started_on_a_node_drained_since_the_previous_commit_is_caught():
    """Running work goes on on a drained node, and one bound before the drain reached the
    commit stays legal; a job first committed on GPUs drained at both that commit and the one
    before was decided while no new work could land there."""
    from types import SimpleNamespace

    from gpualloc.solvers.legality import online_violations

    def step(t: int, **assignments: tuple[int, ...]) -> SimpleNamespace:
        return SimpleNamespace(step=t, assignments=assignments)

    drained = [0, 0xFF00, 0xFF00, 0xFF00]  # node 1 of 8-GPU nodes, drained from step 1
    commits = [step(0, old=tuple(range(8, 12))), step(1, old=tuple(range(8, 12)), late=tuple(range(12, 16)))]
    commits += [step(2, new=tuple(range(8, 12))), step(3, new=tuple(range(8, 12)))]
    assert online_violations(commits, {}, set(), drained, node_size=8) == [
        "step 2: new starts on GPU 8, of a node down or drained since the previous commit"
    ]  # `late` was bound before the drain reached commit 1; `old` keeps running
    assert online_violations(commits, {}, set(), node_size=8) == []  # no node states: nothing to check
