"""The Alibaba GPU cluster trace v2023 ("openb", ATC '23; Apache-2.0 copy, see benchmarks/traces)
as contract events. Pure: the shell reads the pod CSV (`gpualloc.agent.traces`).

Pods without GPUs are dropped; a GPU share (`gpu_milli` < 1000 on one GPU) becomes a whole GPU;
GPU counts round up to a power of two (they are 1, 2, 4 or 8). A pod's duration is its
`scheduled_time` to its `deletion_time`, in steps, at least one; pods never scheduled (Pending)
have none and are dropped. Pods still present when the trace ends were deleted at its end, so
their durations are cut at `max_steps` (a day by default). Priority from the QoS class:
Guaranteed and LS (latency-sensitive) above Burstable above BE (best effort). The window is the
`days` days ending `end_day` days into the trace (by creation time); its first pod arrives at
step 0."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from gpualloc.generators.job_events import job_events

OPENB_COLUMNS = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time", "scheduled_time")
QOS_PRIORITY = {"Guaranteed": 8, "LS": 6, "Burstable": 4, "BE": 2}
STEP_MINUTES = 10


def openb_events(
    rows: Iterable[Mapping[str, str]], gpus: int = 64, days: int = 2, end_day: int = 148, max_steps: int = 144
) -> list[dict[str, Any]]:
    """The pods created in [end_day - days, end_day) days as job.submitted events on a pool of
    `gpus` (nodes of 8)."""
    lo, hi = (end_day - days) * 86400, end_day * 86400
    step = STEP_MINUTES * 60
    pods = []
    for row in rows:
        created = float(row["creation_time"])
        count = int(row["num_gpu"])
        if not lo <= created < hi or count == 0 or not row["scheduled_time"].strip():
            continue
        duration = (float(row["deletion_time"]) - float(row["scheduled_time"])) / step
        size = 1 << max(0, math.ceil(math.log2(count)))
        pods.append(
            (created, row["name"], size, min(max_steps, max(1, math.ceil(duration))), QOS_PRIORITY.get(row["qos"], 4))
        )
    pods.sort()
    first = pods[0][0] if pods else lo
    return job_events(
        "openb",
        gpus,
        (
            (
                created - first,
                {
                    "id": name,
                    "kind": "training",
                    "priority": priority,
                    "gpus": size,
                    "duration": duration,
                    "actual_duration": duration,
                },
            )
            for created, name, size, duration, priority in pods
        ),
        STEP_MINUTES,
    )
