"""The public Pollux workloads (Philly-sampled jobs, Apache-2.0; see benchmarks/traces) as
contract events on 10-minute steps. Pure: the shell reads the CSV (`gpualloc.agent.traces`)."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from gpualloc.generators.job_events import job_events

# Pollux gives no durations (its simulator derives them from throughput models): steps of
# 10 minutes per application, from the artifact's job sizes, and a priority per application.
POLLUX_APPS = {
    "ncf": (2, 3),
    "cifar10": (3, 4),
    "deepspeech2": (9, 6),
    "bert": (9, 7),
    "yolov3": (12, 5),
    "imagenet": (18, 8),
}


def pollux_events(rows: Iterable[Mapping[str, str]], gpus: int = 64, gpus_per_node: int = 8) -> list[dict[str, Any]]:
    """Each row (name, time, application, num_replicas) becomes a job asking for its initial
    replica count rounded up to a power of two (at most a node), running its application's duration."""
    jobs = []
    for row in rows:
        duration, priority = POLLUX_APPS.get(row["application"], (6, 5))
        size = min(gpus_per_node, 1 << max(0, math.ceil(math.log2(max(1, int(row["num_replicas"]))))))
        jobs.append(
            (
                float(row["time"]),
                {
                    "id": row["name"],
                    "kind": "training",
                    "priority": priority,
                    "gpus": size,
                    "duration": duration,
                    "actual_duration": duration,
                },
            )
        )
    out = job_events("pollux", gpus, jobs, 10, gpus_per_node)
    return sorted(out, key=lambda e: e["occurred_at"])
