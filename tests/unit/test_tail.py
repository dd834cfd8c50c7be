"""`gpualloc tail`: readable lines that say who holds what, JSON lines, and one job's story."""

from __future__ import annotations

import json

from gpualloc.agent.operator.tail import HOLDERS_SHOWN, concerns, line, render

COMMIT = {
    "type": "plan.committed",
    "event_id": "c1",
    "payload": {
        "step": 4,
        "seq": 5,
        "source": "heuristic",
        "objective": 12.5,
        "assignments": {"train-1": [0, 1, 2, 3], "chat": [4, 5]},
        "started": ["train-1"],
    },
}
DECIDED = {
    "type": "allocation.decided",
    "event_id": "d1",
    "payload": {
        "job_id": "train-1",
        "action": "start",
        "gpus": [0, 1, 2, 3],
        "start_step": 4,
        "reason": "starts now",
        "latency_ms": 1.5,
    },
}
LETTER = {
    "type": "input.rejected",
    "event_id": "r1",
    "payload": {
        "topic": "gpualloc.jobs",
        "partition": 0,
        "offset": 7,
        "reason": "priority: must be > 0",
        "original": '{"payload": {"id": "train-9", "priority": -1}}',
    },
}


def test_a_commit_line_names_its_holders_and_their_gpus():
    text = line(COMMIT, "gpualloc.commits")
    assert "train-1 0-3, chat 4-5" in text and "started train-1" in text
    many = {**COMMIT, "payload": {**COMMIT["payload"], "assignments": {f"j{k}": [k] for k in range(20)}}}
    assert f"and {20 - HOLDERS_SHOWN} more" in line(many, "gpualloc.commits")
    part = {**COMMIT, "payload": {**COMMIT["payload"], "part": 2, "parts": 3}}
    assert "(seq 5, part 2 of 3, heuristic)" in line(part, "gpualloc.commits")
    assert "part" not in line(COMMIT, "gpualloc.commits")


def test_one_jobs_story_and_json_lines():
    assert concerns(DECIDED, "train-1") and concerns(COMMIT, "chat") and not concerns(COMMIT, "train-9")
    assert concerns(LETTER, "train-9") and not concerns(LETTER, "train-1")
    assert render(DECIDED, "gpualloc.decisions", job="other") is None
    data = json.loads(render(DECIDED, "gpualloc.decisions", as_json=True, job="train-1"))
    assert data["topic"] == "gpualloc.decisions" and data["payload"]["job_id"] == "train-1"
    assert render(LETTER, "gpualloc.deadletter").startswith("rejected  gpualloc.jobs:0:7")
