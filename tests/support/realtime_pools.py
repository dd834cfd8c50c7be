"""Window-like problems for the real-time rules' properties: running jobs taking a drawn share of
a pool, and apps with drawn floors, ceilings, demands and medians (a median never above its demand)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from gpualloc.solvers.problem import Batch, Problem, Realtime


def realtime_problem(
    name: str, gpus: int, horizon: int, apps: Sequence[Realtime], running: Sequence[Batch] = ()
) -> Problem:
    """Nodes of 8, decay 0.95, penalty 8."""
    weights = tuple(0.95**t for t in range(horizon))
    return Problem(name, gpus, 8, horizon, 0.95, 8.0, weights, tuple(running), tuple(apps))


@st.composite
def realtime_pools(draw: st.DrawFn) -> Problem:
    """A pool of 8-32 GPUs and 1-6 steps, up to 3 running jobs and 1-4 apps whose floors fit beside
    them (others are refused at registration) and whose demands may exceed what is left."""
    gpus, T = draw(st.sampled_from([8, 16, 24, 32])), draw(st.integers(1, 6))
    running, used = [], 0
    for i in range(draw(st.integers(0, 3))):
        n = draw(st.integers(1, max(1, gpus // 4)))
        if used + n > gpus:
            break
        running.append(Batch(i, f"r{i}", 1.0, n, 9, 0, ((1 << n) - 1) << used, draw(st.integers(1, T))))
        used += n
    apps, floors = [], 0
    for a in range(draw(st.integers(1, 4))):
        lo, hi = draw(st.integers(0, 2)), draw(st.integers(2, gpus))
        if used + floors + lo > gpus:
            break
        floors += lo
        demand = tuple(draw(st.lists(st.integers(0, gpus), min_size=T, max_size=T)))
        median = tuple(min(d, draw(st.integers(0, gpus))) for d in demand)
        priority = draw(st.sampled_from([1.0, 5.0, 9.0]))
        apps.append(
            Realtime(len(running) + a, f"app{a}", priority, demand, lo, hi, draw(st.integers(1, 4)), -1, median)
        )
    return realtime_problem("pool", gpus, T, apps, running)
