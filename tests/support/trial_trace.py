"""A new user's first trial as a trace: 32 GPUs in nodes of 8, swap cap 2, one-minute steps; one
app (priority 10, floor 2, ceiling 8, a profile peaking at 6) observed twice a step at about two
GPUs, with a one-step spike to eight in step 3; 20 batch jobs, three of them ending at step 4 while
a priority-5 job waits, and a 16-GPU job that overruns (planned for 2 steps, runs 9) with another
16-GPU job queued behind it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
PROFILE = [2] * 9 + [4, 5, 6, 6, 5, 5, 4, 3, 3] + [2] * 6
JOBS = [  # id, minute submitted, priority, GPUs, planned steps, steps it runs
    ("long-16", 0.1, 6, 16, 2, 9),
    ("ft-4", 0.1, 5, 4, 4, 4),
    ("q-1", 0.1, 4, 1, 4, 4),
    ("inf-8", 0.1, 5, 8, 3, 4),
    ("dpo-8b", 1.2, 5, 4, 6, 6),
    ("pre-16", 1.5, 6, 16, 8, 8),
    ("inf-2a", 5.3, 4, 2, 3, 3),
    ("inf-2b", 6.3, 4, 2, 2, 2),
    ("q-2", 7.1, 3, 2, 1, 1),
    ("ft-8", 8.2, 5, 8, 5, 5),
    ("inf-1a", 9.4, 4, 1, 2, 2),
    ("inf-2c", 10.5, 4, 2, 3, 3),
    ("q-1b", 11.2, 3, 1, 1, 1),
    ("ft-2", 12.3, 5, 2, 6, 6),
    ("inf-4", 13.1, 4, 4, 2, 2),
    ("inf-2d", 14.7, 4, 2, 3, 3),
    ("q-2b", 15.2, 3, 2, 2, 2),
    ("ft-4b", 16.6, 5, 4, 4, 4),
    ("inf-2e", 18.1, 4, 2, 2, 2),
    ("inf-1b", 19.3, 4, 1, 3, 3),
]
RPS = [150, 160, 170, 800, 220, 200, 210, 180, 190, 200, 170, 160, 180, 200, 190]
RPS += [210, 180, 170, 160, 150, 170, 180, 160, 150, 170, 160, 150, 140, 150, 160]
SPIKE_STEP = 3


def trial_messages() -> list[dict]:
    """The trial's events, in time order."""

    def ev(key: str, kind: str, minute: float, payload: dict) -> dict:
        at = (START + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"event_id": f"trial:{key}", "type": kind, "occurred_at": at, "pool": "default", "payload": payload}

    out = [
        ev("pool", "pool.configured", 0, {"gpus": 32, "gpus_per_node": 8, "horizon": 24, "step_minutes": 1}),
        ev(
            "app",
            "app.registered",
            0,
            {"id": "chat", "priority": 10, "min_gpus": 2, "max_gpus": 8, "swap_cap": 2, "rps_per_gpu": 100.0}
            | {"profile": PROFILE},
        ),
    ]
    for job_id, minute, priority, gpus, planned, runs in JOBS:
        payload = {"id": job_id, "kind": "training", "priority": priority, "gpus": gpus, "duration": planned}
        out.append(ev(f"job:{job_id}", "job.submitted", minute, payload | {"actual_duration": runs}))
    for step, rps in enumerate(RPS):  # the spike is the second observation of its step only
        for k, at in enumerate((0.3, 0.8)):
            seen = rps if k == 1 or step != SPIKE_STEP else 180
            out.append(ev(f"obs:{step}:{k}", "traffic.observed", step + at, {"app": "chat", "requests_per_s": seen}))
    return sorted(out, key=lambda m: m["occurred_at"])


def write_trial(path: Path) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in trial_messages()), encoding="utf-8")
    return path
