"""Full mode readable at every commit, on a real broker: the trial's pool (32 GPUs in nodes of 8,
h100-80gb, swap cap 2, one app, 20 jobs) under the default policy, each commit saying what
became of full mode since the last one and when it runs next, a counter per outcome, the ledger
replaying the same words, and `gpualloc status` (text and JSON) with its line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from support.kafka_broker import read_all, unique_topic
from test_agent_failures import publish

from gpualloc.agent.metrics import FULL_MODE_OUTCOMES
from gpualloc.agent.operator.audit import audit
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.schemas.settings import AgentSettings, FullModeOptions, RollingFullMode

pytestmark = pytest.mark.kafka

POOL = {"gpus": 32, "gpus_per_node": 8, "horizon": 24, "swap_cap": 2, "gpu_type": "h100-80gb"}


def trial() -> list[dict]:
    """The trial's pool, its real-time app and 20 jobs of 1-8 GPUs."""
    out = [("pool.configured", POOL), ("app.registered", {"id": "chat", "priority": 5, "min_gpus": 2, "max_gpus": 8})]
    out += [
        (
            "job.submitted",
            {
                "id": f"job-{k}",
                "kind": "training",
                "priority": 1 + k % 5,
                "gpus": [1, 2, 4, 8][k % 4],
                "duration": 2 + k % 6,
            },
        )
        for k in range(20)
    ]
    now = datetime.now(timezone.utc).isoformat()
    return [
        {"event_id": f"in-{n}", "type": kind, "occurred_at": now, "pool": "default", "payload": payload}
        for n, (kind, payload) in enumerate(out)
    ]


async def test_every_commit_says_what_became_of_full_mode_and_status_shows_it(kafka_bootstrap):
    topics = Topics.with_prefix(unique_topic("visible") + ".")
    await publish(kafka_bootstrap, topics, trial())
    agent = AgentService(kafka_bootstrap, AgentSettings(step_seconds=2.0, group_id=unique_topic("g")), topics)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        for _ in range(600):  # until a solve has ended and been said (its process starts cold)
            report = agent.dispatcher.full_mode_report
            if report is not None and report.last is not None and agent.stats.commits >= 4:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    commits = [m["payload"] for m in await read_all(kafka_bootstrap, topics.commits) if not m["payload"]["reactive"]]
    reports = [c["full_mode_report"] for c in commits]
    assert len(reports) >= 4 and all(r is not None for r in reports)
    assert reports[0]["state"] == "not_due" and reports[0]["next_step"] == 1  # before any launch
    assert all(r["next_step"] == c["step"] + 1 for r, c in zip(reports, commits))  # full mode every step
    ran = [(r, c) for r, c in zip(reports, commits) if r["state"] == "ran"]
    assert ran, reports
    for r, c in ran:  # a solve said once, at the commit after it ended, with how and how long
        assert r["last"]["step"] <= c["step"] and r["last"]["seconds"] > 0
        assert r["last"]["outcome"] in FULL_MODE_OUTCOMES and r["last"]["detail"]
        assert c["full_mode"] is not None  # the free text says it too, adopted or not
        assert (c["source"] == "milp") == (r["last"]["outcome"] == "adopted")
    counted = {o: agent.metrics.full_mode.labels("default", o)._value.get() for o in FULL_MODE_OUTCOMES}
    assert sum(counted.values()) == len(commits)
    assert counted["not_due"] >= 1 and sum(counted[r["last"]["outcome"]] > 0 for r, _ in ran) == len(ran)
    result = await audit(kafka_bootstrap, topics, "default")  # replays say the same of full mode
    assert result.ok, result.lines()
    argv = [sys.executable, "-m", "gpualloc", "status", "--bootstrap", kafka_bootstrap, "--topic-prefix", topics.prefix]
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    last = commits[-1]["full_mode_report"]
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if x.startswith("full mode: "))
    assert f"next at step {last['next_step']}" in line
    assert f"last ran at step {last['last']['step']} (" in line and " s)" in line
    shown = json.loads(subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60).stdout)
    assert shown["full_mode"]["state"] == last["state"] and shown["full_mode"]["line"] == line


async def test_between_solves_due_every_few_steps_no_idle_solver_process_is_held(kafka_bootstrap):
    topics = Topics.with_prefix(unique_topic("idle") + ".")
    await publish(kafka_bootstrap, topics, trial())
    # steps long enough that a solve (its process's start included) ends well before the next due
    # step on a loaded machine, so a boundary with no solve due finds the worker idle
    every_3 = RollingFullMode(every=3, options=FullModeOptions(time_limit=1.0))
    agent = AgentService(
        kafka_bootstrap, AgentSettings(step_seconds=2.0, full_mode=every_3, group_id=unique_topic("g")), topics
    )
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    solved, released, restarted = set(), False, False
    try:
        for _ in range(2400):  # a solve ends, its process goes, the next due step starts one again
            worker, report = agent.boundaries.full_mode.worker, agent.dispatcher.full_mode_report
            if worker is not None and report is not None and report.last is not None:
                released = released or (not worker.busy and not worker.done and worker.pid is None)
                restarted = restarted or (released and worker.busy and worker.solving not in solved)
                solved.add(report.last.step)
            if restarted:
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert released and restarted, (solved, released)
    reports = [m["payload"]["full_mode_report"] for m in await read_all(kafka_bootstrap, topics.commits)]
    assert {r["next_step"] % 3 for r in reports if r is not None} == {0}
