"""The agent's move counters (`AgentMetrics.committed`): GPUs apps moved, and those moved for nothing."""

from __future__ import annotations

from gpualloc.agent.metrics import AgentMetrics


def _commit(metrics: AgentMetrics, step: int, assignments: dict[str, list[int]], unavailable: int = 0) -> None:
    payload = {"step": step, "assignments": assignments, "source": "hot_path"}
    metrics.committed(payload, 16, unavailable.bit_count(), 0, {"rt": 2}, unavailable=unavailable)


def _counted(metrics: AgentMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(f"gpualloc_realtime_{name}_total", {"pool": "default"})


def test_a_move_counts_as_for_nothing_only_where_every_gpu_left_stayed_idle_on_a_node_up():
    metrics = AgentMetrics("default")
    _commit(metrics, 0, {"rt": [0, 1]})
    _commit(metrics, 1, {"rt": [0, 2]})  # left 1, idle: for nothing
    _commit(metrics, 2, {"rt": [0, 3], "j": [2]})  # left 2 to a batch job: needed
    _commit(metrics, 3, {"rt": [4, 5]}, unavailable=0b1)  # left 0, on a node down, and 3: needed
    _commit(metrics, 4, {"rt": [5, 6]}, unavailable=0b1)  # left 4, idle: for nothing

    assert (_counted(metrics, "moves"), _counted(metrics, "app_steps")) == (4.0, 3.0)  # steps 1-3: once ended

    _commit(metrics, 5, {"rt": [5, 6]})

    assert (_counted(metrics, "moves"), _counted(metrics, "idle_moves"), _counted(metrics, "app_steps")) == (
        5.0,
        2.0,
        4.0,
    )
