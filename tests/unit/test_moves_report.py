"""The simulator's count of app moves, and of those no work needed (`report.whole_run`)."""

from __future__ import annotations

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.records import Commit, PoolConfig
from gpualloc.solvers.problem import Problem
from gpualloc.solvers.simulation.report import whole_run
from gpualloc.solvers.simulation.results import PolicyRun, Simulation

WINDOW = Problem("moves", 16, 8, 1, 0.99, 8.0, (1.0,), (), ())


def _run(sets: list[dict[str, tuple[int, ...]]], down: list[int]) -> tuple[Simulation, PolicyRun]:
    """A run committing `sets` (owner -> GPUs) at steps 0, 1, ...; `down`: per step, the GPUs of
    nodes down or drained. One app, `rt`, with demand 2 throughout."""
    commits = [Commit(step, assignments, (), WINDOW, Schedule()) for step, assignments in enumerate(sets)]
    run = PolicyRun("heuristic", commits=commits, down=down)
    demand = {"rt": [2] * len(sets)}
    sim = Simulation(PoolConfig(16, 8), len(sets), demand, {"rt": 5.0, "j": 1.0}, {"rt": (1, 4, 2)}, {"heuristic": run})
    return sim, run


def test_a_move_is_for_nothing_only_where_every_gpu_the_app_left_stayed_idle():
    sim, run = _run(
        [
            {"rt": (0, 1)},
            {"rt": (0, 2)},  # left 1, idle: for nothing
            {"rt": (0, 3), "j": (2,)},  # left 2 to a batch job: needed
            {"rt": (4, 5)},  # left 0 and 3; 0's node is down: needed
            {"rt": (5, 6)},  # left 4, idle: for nothing
        ],
        down=[0, 0, 0, 0b1, 0b1],
    )

    row = whole_run(sim, run)

    assert row.realtime_moves == 5 / 4  # 1 + 1 + 2 + 1 GPUs moved over four app-steps
    assert row.realtime_idle_moves == 2 / 4
