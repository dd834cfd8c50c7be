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
        "original": '{"type": "job.submitted", "payload": {"id": "train-9", "priority": -1}}',
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
    assert render(LETTER, "gpualloc.deadletter") == (
        "rejected  job.submitted train-9 - priority: must be > 0 (gpualloc.jobs:0:7)"
    )


def test_operators_inputs_are_lines_and_a_dead_letter_names_what_it_rejected():
    def msg(kind: str, **payload) -> dict:
        return {"type": kind, "pool": "p", "payload": payload}

    assert line(msg("node.status", node=1, state="drained", detail="disk"), "t") == "node      1 drained - disk"
    assert line(msg("node.status", node=2, state="up"), "t") == "node      2 up"
    assert line(msg("job.cancelled", id="j1"), "t") == "cancelled j1"
    assert line(msg("job.completed", id="j2"), "t") == "completed j2"
    assert line(msg("job.failed", id="j3", reason="out_of_memory", detail="OOM"), "t") == (
        "failed    j3 (out_of_memory) - OOM"
    )
    assert line(msg("job.failed", id="j4", reason="time_limit", source="agent"), "t") == (
        "failed    j4 (time_limit) by agent"
    )
    assert line(msg("app.registered", id="chat", priority=5, min_gpus=2), "t") == (
        "app       chat registered: priority 5, 2-pool GPUs"
    )
    assert line(msg("pool.configured", gpus=32, gpus_per_node=8, horizon=24, step_minutes=30), "t") == (
        "pool      p configured: 32 GPUs, 8 a node, horizon 24, 30-min steps"
    )
    assert render(msg("job.submitted", id="j1"), "t") is None  # its decision says it
    assert concerns(msg("job.cancelled", id="j1"), "j1") and not concerns(msg("job.cancelled", id="j1"), "j")
    text = {**LETTER, "payload": {**LETTER["payload"], "original": "hello world", "reason": "value: not JSON"}}
    assert line(text, "t").startswith("rejected  a record that is not a JSON object - value: not JSON")
    assert not concerns(text, "train-9")
    app = {
        **LETTER,
        "payload": {**LETTER["payload"], "original": '{"type": "traffic.observed", "payload": {"app": "a"}}'},
    }
    assert line(app, "t").startswith("rejected  traffic.observed a - ") and concerns(app, "a")
