"""The rule turning a job's forecast peaks at each GPU count into the count it is given, apart from the models."""

from __future__ import annotations

from typing import Callable

KNEE = 0.02  # of a GPU's memory: a doubling of the GPUs that lowers the forecast peak by less barely helps


def choose_count(
    counts: list[int],
    peak: Callable[[int], float],
    rules: tuple[Callable[[int], bool], ...],
    memory_gb: float,
    tolerance: float,
) -> tuple[int, bool] | None:
    """Of `counts` (ascending powers of two): the smallest that the first rule that any count
    meets allows (and True: the forecast shows it fitting), else the smallest whose peak is
    within `tolerance` of fitting, doubled while a doubling lowers the peak by at least KNEE of
    the GPU's memory (and False). Past that knee the peak barely falls (what is left is not
    sharded), so more GPUs would not make the job fit, only keep them from others. None: no
    count comes within `tolerance`."""
    for rule in rules:
        n = next((n for n in counts if rule(n)), None)
        if n is not None:
            return n, True
    near = [i for i, n in enumerate(counts) if peak(n) <= memory_gb * (1 + tolerance)]
    if not near:
        return None
    i = near[0]
    while i + 1 < len(counts) and peak(counts[i]) - peak(counts[i + 1]) >= KNEE * memory_gb:
        i += 1
    return counts[i], False
