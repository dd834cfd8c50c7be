"""The changes to a training job's own settings that would let a GPU hold it, named in the reason a
job no count holds is refused with: the submitter's next move, not a guess at a larger pool.

The changes are those the stacks offer without touching the model or the data: the loss a chunk at
a time, recomputed activations (gradient checkpointing), the weights, gradients and optimizer
state sharded across the job's GPUs (ZeRO-3, FSDP's full shard), and a smaller micro-batch (the
global batch kept by accumulating more of them). They are judged by the physics alone, at the count
that needs least, so the reason says "about".
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Callable

from gpualloc.schemas.features import TrainingFeatures

Memory = Callable[[Any, int], float]  # GiB a GPU of a job at a count


# what each change costs a run, in rank: the loss's chunks nothing, a smaller micro-batch a little
# of each multiply's efficiency, recomputation a forward pass, sharding the traffic of its gathers
COST = {"loss": 0, "micro_batch": 1, "gradient_checkpointing": 2, "zero_stage": 3}


def _settings(f: TrainingFeatures) -> list[tuple[str, dict[str, Any]]]:
    """The changes of setting open to `f`, a smaller micro-batch aside."""
    out: list[tuple[str, dict[str, Any]]] = []
    if f.loss in (None, "whole") and f.framework in (None, "transformers", "deepspeed"):
        out.append(("loss: chunked", {"loss": "chunked"}))
    if not f.gradient_checkpointing:
        out.append(("gradient_checkpointing: true", {"gradient_checkpointing": True}))
    if f.zero_stage < 3:
        out.append(("zero_stage: 3", {"zero_stage": 3}))
    return out


def changes_that_fit(f: TrainingFeatures, memory: Memory, counts: list[int], gpu_memory: float) -> str | None:
    """The fewest changes under which the physics holds the job within `gpu_memory` at one of
    `counts` (of as many, the cheapest by `COST`, then the largest micro-batch), in words with the
    GiB and the count; None where even all of them together do not."""
    settings = _settings(f)
    micro_batches = [f.micro_batch >> i for i in range(f.micro_batch.bit_length())]
    options = []
    for k in range(len(settings) + 1):
        for chosen in combinations(settings, k):
            for micro in micro_batches:
                update = {field: v for _, u in chosen for field, v in u.items()}
                changes = [*update, *(["micro_batch"] if micro != f.micro_batch else [])]
                rank = (len(changes), sum(COST[c] for c in changes), -micro)
                options.append((rank, chosen, micro, update | {"micro_batch": micro}))
    for _, chosen, micro, update in sorted(options, key=lambda o: o[0]):
        changed = f.model_copy(update=update)
        need, at = min((memory(changed, n), n) for n in counts)
        if need <= gpu_memory:
            words = [w for w, _ in chosen] + ([f"micro_batch: {micro}"] if micro != f.micro_batch else [])
            return f"{' and '.join(words)} (about {need:.0f} GB a GPU at {at})"
    return None
