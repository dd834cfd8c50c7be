"""Hypothesis strategy for `generate_scenario` arguments, shared by the property tests."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def generator_args(draw, pools: list[int], max_jobs: int, horizons: list[int], max_node: int | None = None) -> dict:
    """Pool size from `pools`, a node size dividing it (at most `max_node`), 1..`max_jobs` jobs, a
    horizon from `horizons`, and every feature of the generator switched on or off."""
    gpus = draw(st.sampled_from(pools))
    node = draw(st.sampled_from([d for d in range(1, min(gpus, max_node or gpus) + 1) if gpus % d == 0]))
    jobs = draw(st.integers(1, max_jobs))
    return dict(
        gpus=gpus,
        jobs=jobs,
        seed=draw(st.integers(0, 2**32 - 1)),
        gpus_per_node=node,
        horizon=draw(st.sampled_from(horizons)),
        swap_cap=draw(st.integers(0, 4)),
        realtime_penalty=draw(st.sampled_from([0.0, 0.5, 2.0, 8.0])),  # low: apps held at floors pay
        realtime=draw(st.none() | st.integers(0, min(jobs, gpus, 4))),
        running=draw(st.booleans()),
        late_arrivals=draw(st.booleans()),
        floors=draw(st.booleans()),
        currents=draw(st.booleans()),
        app_swap_caps=draw(st.booleans()),
        value_model=draw(st.sampled_from([None, "completion"])),
    )
