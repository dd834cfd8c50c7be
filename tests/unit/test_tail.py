"""`gpualloc tail`: readable lines that say who holds what, JSON lines, and one job's story."""

from __future__ import annotations

import json

from aiokafka import ConsumerRecord

from gpualloc.agent.operator.tail import (
    HOLDERS_SHOWN,
    Follower,
    concerns,
    flow,
    in_time_order,
    line,
    render,
    when,
)
from gpualloc.bus.topics import Topics

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
        return {"type": kind, "pool": "p", "event_id": "e1", "payload": payload}

    # an input is told as what was published, with its event id, never as if it took effect
    assert line(msg("node.status", node=1, state="drained", detail="disk"), "t") == (
        "input     node.status node 1 drained - disk (event e1)"
    )
    assert line(msg("node.status", node=2, state="up"), "t") == "input     node.status node 2 up (event e1)"
    assert line(msg("job.cancelled", id="j1"), "t") == "input     job.cancelled j1 (event e1)"
    assert line(msg("job.completed", id="j2"), "t") == "input     job.completed j2 (event e1)"
    assert line(msg("job.failed", id="j3", reason="out_of_memory", detail="OOM"), "t") == (
        "input     job.failed j3 (out_of_memory) - OOM (event e1)"
    )
    assert line(msg("job.failed", id="j4", reason="time_limit", source="agent"), "t") == (
        "failed    j4 (time_limit) by agent"  # the agent's own notice: it acted
    )
    assert line(msg("app.registered", id="chat", priority=5, min_gpus=2), "t") == (
        "input     app.registered chat: priority 5, 2-pool GPUs (event e1)"
    )
    assert line(msg("pool.configured", gpus=32, gpus_per_node=8, horizon=24, step_minutes=30), "t") == (
        "input     pool.configured p: 32 GPUs, 8 a node, horizon 24, 30-min steps (event e1)"
    )
    assert line(msg("pool.configured", gpus=32), "t") == "input     pool.configured p: 32 GPUs (event e1)"
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


BAD_APP = {"id": "bad", "priority": 5, "min_gpus": 5, "max_gpus": 4}


def _letter_of(kind: str, event_id: str, payload: dict, reason: str, offset: int) -> dict:
    original = {"event_id": event_id, "type": kind, "pool": "p", "payload": payload}
    return {
        "type": "input.rejected",
        "pool": "p",
        "event_id": f"p:rejected:{offset}",
        "payload": {
            "topic": "gpualloc.traffic",
            "partition": 0,
            "offset": offset,
            "reason": reason,
            "original": json.dumps(original),
        },
    }


def test_a_dead_lettered_registration_is_never_told_as_registered():
    follower = Follower()
    published = {"type": "app.registered", "pool": "p", "event_id": "reg-1", "payload": BAD_APP}
    letter = _letter_of("app.registered", "reg-1", BAD_APP, "max_gpus: must be at least min_gpus (5)", 3)
    lines = [follower.render(published, "gpualloc.traffic"), follower.render(letter, "gpualloc.deadletter")]
    assert lines == [
        "input     app.registered bad: priority 5, 5-4 GPUs (event reg-1)",
        "rejected  app.registered bad (event reg-1) - max_gpus: must be at least min_gpus (5) (gpualloc.traffic:0:3)",
    ]
    assert not any("registered:" in text or " registered " in text for text in lines)
    assert follower.fold.app("p", "bad").state == "rejected"


def test_a_second_submission_of_a_running_job_is_told_as_refused_and_the_job_stays_running():
    follower = Follower()
    job = {"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 40}
    first = {"type": "job.submitted", "pool": "p", "event_id": "s1", "payload": job}
    again = {**first, "event_id": "s2"}

    def decided(action: str, event: str, reason: str, gpus=()) -> dict:
        payload = {"job_id": "a", "action": action, "gpus": list(gpus), "reason": reason, "input_event_id": event}
        return {"type": "allocation.decided", "pool": "p", "payload": payload}

    follower.render(first, "gpualloc.jobs")
    assert follower.render(decided("start", "s1", "starts now", range(4)), "gpualloc.decisions") == (
        "decided   a: start GPUs 0-3 (0.0 ms) - starts now"
    )
    follower.render(again, "gpualloc.jobs")
    refusal = follower.render(decided("rejected", "s2", "job id 'a' is already queued or running"), "x")
    assert refusal == (
        "decided   a: rejected a second submission (event s2); a stays as it was (0.0 ms) - "
        "job id 'a' is already queued or running"
    )
    job_state = follower.fold.job("p", "a")
    assert job_state.state == "running" and [r.event_id for r in job_state.refused] == ["s2"]


def test_each_line_carries_its_records_time_and_the_backlog_merges_in_time_order():
    assert when(1_765_000_000_123) == "2025-12-06T05:46:40.123Z" and when(None) == "?"
    with_time = Follower().render(DECIDED, "gpualloc.decisions", 1_765_000_000_123)
    assert with_time == "2025-12-06T05:46:40.123Z  decided   train-1: start GPUs 0-3 step 4 (1.5 ms) - starts now"
    data = json.loads(Follower(as_json=True).render(DECIDED, "gpualloc.decisions", 1_765_000_000_123))
    assert data["timestamp"] == "2025-12-06T05:46:40.123Z" and data["topic"] == "gpualloc.decisions"

    def record(topic: str, offset: int, ms: int) -> ConsumerRecord:
        return ConsumerRecord(topic, 0, offset, ms, 0, None, b"{}", None, 0, 2, ())

    # a later topic's earlier record first, whatever order the topics were read in; at one
    # instant, as a pass acts: the decision, then the commit
    records = [
        record("gpualloc.jobs", 0, 300),
        record("gpualloc.jobs", 1, 500),
        record("gpualloc.commits", 0, 400),
        record("gpualloc.decisions", 0, 400),
    ]
    order = flow(Topics.with_prefix(""))
    assert [(r.topic, r.offset) for r in in_time_order(records, order)] == [
        ("gpualloc.jobs", 0),
        ("gpualloc.decisions", 0),
        ("gpualloc.commits", 0),
        ("gpualloc.jobs", 1),
    ]


def test_node_agents_heartbeats_are_not_printed_but_their_binding_reports_are():
    beat = {"type": "node.heartbeat", "event_id": "h1", "payload": {"node": 2, "interval_seconds": 10}}
    report = {
        "type": "binding.reported",
        "event_id": "b1",
        "payload": {"node": 2, "job_id": "train-1", "gpus": [16, 17], "status": "bound"},
    }
    assert render(beat, "gpualloc.bindings") is None
    assert render(report, "gpualloc.bindings") == "binding   node 2 train-1 bound GPUs 16-17"
