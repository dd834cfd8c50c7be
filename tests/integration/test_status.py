"""`gpualloc status`: the text Gantt of a commit's grid, the pure view of a pool, and the live
view read back from a real broker while an agent runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from support.kafka_broker import unique_topic
from support.pool_agents import gpualloc_on, pool_agent

from gpualloc.agent.operator.status import (
    JSON_BYTES,
    LISTED,
    SHOWN,
    gantt,
    gpu_rows,
    lines,
    read_status,
    summary,
    summary_lines,
    view,
)
from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.client import Client
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.settings import AgentSettings, RollingFullMode
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import AppSpec, JobSpec, PoolConfig, Running


def test_the_gantt_groups_gpus_with_the_same_plan_and_names_each_holder():
    grid = [["a", "a", None], ["a", "a", None], ["chat", None, "b"], ["chat", None, "b"]]
    out = gantt(grid, first_step=10, width=48)
    assert out[0].startswith("step") and "|0  |" in out[0] and "from step 10" in out[0]
    assert out[1:3] == ["GPUs 0-1 |aa.|", "GPUs 2-3 |c.b|"]
    assert out[3] == "legend: a=a, b=b, c=chat"
    assert gantt(grid, 0, width=2)[1] == "GPUs 0-1 |aa|"  # the window cut to the width shown
    assert gantt([], 0) == ["(no commit yet)"]
    assert gantt(grid[2:], 0, first_gpu=2)[1:3] == ["GPUs 2-3 |b.a|", "legend: a=b, b=chat"]


def test_the_summary_sums_each_group_of_nodes_up_and_counts_what_holds_gpus_now_as_committed():
    plan = {"gpus": 32, "steps": 6, "holders": {"a": [[0, 6, 0, 2]], "app": [[6, 10, 0, 6]], "b": [[16, 32, 1, 3]]}}
    # `late` started after the commit (its start decision binds at once): the plan's step 0 has
    # nothing on node 2, yet 4 of its GPUs are held now, by one holder
    holding = {"a": list(range(6)), "app": list(range(6, 10)), "late": list(range(16, 20))}
    out = summary(plan, nodes=4, node_size=8, width=4, holding=holding)
    assert out == {
        "steps": 4,
        "nodes_per_group": 1,
        "rows": [
            {"nodes": [0, 0], "gpus_per_group": 8, "busy": [8, 8, 2, 2], "held_now": 8, "holders_now": 2},
            {"nodes": [1, 1], "gpus_per_group": 8, "busy": [2, 2, 2, 2], "held_now": 2, "holders_now": 1},
            {"nodes": [2, 3], "gpus_per_group": 8, "busy": [0, 8, 8, 0], "held_now": 4, "holders_now": 1},
        ],
    }
    text = summary_lines(out, 8, first_step=1)
    assert text[3].endswith("|  now: 4 GPUs held by 1 holder") and "as committed" in text[-1]
    big = summary({"gpus": 4096, "steps": 336, "holders": {"x": [[0, 4096, 0, 336]]}}, 512, 8, 48, {"x": [0, 4095]})
    assert big["nodes_per_group"] == 8 and big["rows"] == [
        {"nodes": [0, 511], "gpus_per_group": 64, "busy": [64] * 48, "held_now": 2, "holders_now": 1}
    ]  # 64 groups alike: one row


def test_the_view_tells_each_queued_job_its_promised_start_and_why():
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=4, horizon=6))
    planner.realtime.register_app(AppSpec("chat", priority=5, min_gpus=0, max_gpus=4))  # no floor: a pool-wide job fits
    planner.realtime.observe_traffic("chat", 0, 2)
    first = planner.admission.submit_all(
        [JobSpec("big", "training", 9, 4, 3, 0), JobSpec("wide", "training", 1, 8, 2, 0)]
    )
    assert [d.action for d in first] == ["start", "queued"]
    commit = planner.boundary.tick()
    planner.drained = 0b11110000  # node 1 drained after the commit
    reports = [
        {
            "type": "binding.reported",
            "occurred_at": "2026-12-01T00:00:00Z",
            "payload": {"node": 0, "job_id": "big", "status": "bound", "gpus": [0, 1, 2, 3]},
        }
    ]
    holders = {owner: [[g, g + 1, 0, 1] for g in gpus] for owner, gpus in commit.assignments.items()}
    status = view(
        "p",
        planner,
        {
            "step": 0,
            "seq": 1,
            "step_start": "2026-12-01T00:00:00+00:00",
            "source": "heuristic",
            "objective": 1.0,
            "assignments": {k: list(v) for k, v in commit.assignments.items()},
            "plan": {"gpus": 8, "steps": 6, "holders": holders},
        },
        reports,
        gpu_range=(0, 4),
    )
    assert [r["id"] for r in status["running"]] == ["big"] and status["running"][0]["gpus"] == "0-3"
    (wide,) = status["queue"]
    assert wide["id"] == "wide" and wide["action"] == "queued" and wide["promised_start"] is None
    assert "8-GPU block" in wide["reason"]
    (chat,) = status["apps"]
    # one observation of 2 GPUs in the committed step: its observed need; the forecast, the
    # next plan's, from the next step
    assert chat["need"] == 2 and chat["forecast"]["steps"] == planner.window_demand("chat")
    assert chat["held"] == len(commit.assignments["chat"]) and chat["shortfall"] == max(0, 2 - chat["held"])
    assert [n["state"] for n in status["nodes"]] == ["up", "drained"]
    assert status["nodes"][0]["last_report"]["status"] == "bound" and status["nodes"][1]["last_report"] is None
    assert status["usage"]["batch"] == 4 and status["usage"]["realtime"] == len(commit.assignments["chat"])
    assert status["detail"] == {"gpus": [0, 4], "steps": 6, "holders": {"big": [[g, g + 1, 0, 1] for g in range(4)]}}
    assert gpu_rows(status["detail"]) == [["big"] + [None] * 5] * 4
    text = "\n".join(lines(status))
    assert "queue (1, 0 planned in the window):" in text and "wide" in text and "drained" in text and "legend:" in text
    assert "node 0 (GPUs 0-3) |#" in text and "nodes 1 drained: " not in text and "node 1 drained" in text
    json.dumps(status)  # plain data, as --json prints it


def test_the_queue_reads_each_jobs_promise_from_the_latest_commits_plan():
    planner = Planner(PoolConfig(gpus=16, gpus_per_node=8, horizon=6))
    planner.realtime.register_app(AppSpec("chat", priority=5, min_gpus=1, max_gpus=4))
    planner.admission.submit_all(
        [
            JobSpec("a", "training", 9, 8, 3, 0),
            JobSpec("b", "training", 2, 8, 2, 0),
            JobSpec("c", "training", 1, 8, 2, 0),
        ]
    )
    planner.boundary.tick()
    planner.admission.submit_all([JobSpec("late", "training", 1, 8, 1, 1)])
    plan = {
        "gpus": 16,
        "steps": 6,
        "holders": {"a": [[0, 8, 0, 3]], "chat": [[8, 10, 0, 2], [8, 9, 2, 6]], "b": [[8, 16, 3, 5]]},
    }
    commit = {
        "step": 0,
        "seq": 1,
        "step_start": "2026-12-01T00:00:00+00:00",
        "source": "heuristic",
        "objective": 1.0,
        "assignments": {"a": list(range(8))},
        "plan": plan,
    }
    queue = {q["id"]: q for q in view("p", planner, commit, [], length=timedelta(hours=1))["queue"]}
    assert (queue["b"]["action"], queue["b"]["promised_start"], queue["b"]["promised_gpus"]) == ("planned", 3, "8-15")
    assert queue["b"]["reason"] == (
        "planned at step 3 (03:00:00 UTC, in 3 h) on GPUs 8-15: until then its block is held by chat "
        "(priority 5, from step 2)"
    )
    assert (
        queue["c"]["action"] == "queued" and "no 8-GPU block for 2 steps in the 6-step window" in queue["c"]["reason"]
    )
    assert queue["late"]["promised_start"] is None and "arrived after the latest commit" in queue["late"]["reason"]


def test_the_text_lists_the_first_jobs_and_says_how_many_more():
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=4, horizon=6))
    planner.admission.submit_all([JobSpec(f"j{k}", "training", 1, 8, 2, 0) for k in range(SHOWN + 6)])  # one starts
    text = "\n".join(lines(view("p", planner, None, [])))
    assert f"queue ({SHOWN + 5}, 0 planned in the window):" in text and "  ... and 5 more (`--all` lists all)" in text
    assert text.count("GPUs x 2  priority 1") == SHOWN
    # the job its decision started holds its GPUs before any commit does
    assert "(no commit yet)" in text and "nodes 0-1 up: 8 of 8 GPUs busy" in text and ", 0 idle," in text


def _at_the_limits() -> tuple[Planner, dict]:
    """A pool at the contract's limits, every id as long as the contract allows: 4,096 GPUs,
    horizon 336, 64 apps holding 2 GPUs each, 3,968 running jobs of a GPU each and 10,000 queued
    jobs of 8 GPUs, each planned behind 8 holders or one (the commit's plan holds them all)."""
    name = lambda k, kind: f"{kind}-{k:06d}-".ljust(LIMITS.id_chars, "x")  # noqa: E731
    planner = Planner(PoolConfig(gpus=LIMITS.gpus, gpus_per_node=8, horizon=LIMITS.horizon))
    holders: dict[str, list[list[int]]] = {}
    for k in range(LIMITS.apps):
        app = AppSpec(name(k, "app"), priority=5, min_gpus=2, max_gpus=2)
        planner.realtime.register_app(app)
        g = LIMITS.gpus - 2 * (k + 1)
        planner.apps[app.id] = replace(planner.apps[app.id], held=0b11 << g)
        holders[app.id] = [[g, g + 2, 0, LIMITS.horizon]]
    running = LIMITS.gpus - 2 * LIMITS.apps
    for g in range(running):
        spec = JobSpec(name(g, "run"), "training", 9, 1, 2, 0)
        planner.running[spec.id] = Running(spec, 1 << g, 0)
        holders[spec.id] = [[g, g + 1, 0, 1]]
    nodes = running // 8
    for k in range(LIMITS.queued_jobs):
        spec = JobSpec(name(k, "queued"), "training", 1, 8, 1, 0)
        planner.queued[spec.id] = spec
        t0 = 1 + k // nodes
        holders[spec.id] = [[8 * (k % nodes), 8 * (k % nodes) + 8, t0, t0 + 1]]
    commit = {
        "step": 0,
        "seq": 1,
        "step_start": "2026-12-01T00:00:00+00:00",
        "source": "heuristic",
        "objective": 1.0,
        "assignments": {h: list(range(r[0][0], r[0][1])) for h, r in holders.items() if r[0][2] == 0},
        "plan": {"gpus": LIMITS.gpus, "steps": LIMITS.horizon, "holders": holders},
    }
    return planner, commit


@pytest.mark.slow
def test_the_status_at_the_contracts_limits_stays_under_its_stated_size():
    planner, commit = _at_the_limits()
    status = view("p", planner, commit, [], length=timedelta(minutes=60))
    assert status["queue_total"] == LIMITS.queued_jobs and len(status["queue"]) == LISTED
    assert status["usage"] == {
        "batch": LIMITS.gpus - 2 * LIMITS.apps,
        "realtime": 2 * LIMITS.apps,
        "down": 0,
        "idle": 0,
    }
    first = status["queue"][0]
    assert first["reason"].startswith("planned at step 1 (01:00:00 UTC, in 60 min) on GPUs 0-7: until then its block ")
    assert first["reason"].endswith("(priority 9, now) and 5 others")  # 3 of its 8 holders named
    later = next(q for q in status["queue"] if q["promised_start"] == 2)
    assert later["reason"].endswith("(priority 1, from step 1)")  # the job before it, not the one that ran there
    assert max(len(q["reason"]) for q in status["queue"]) < 1_000
    size = len(orjson.dumps(status, option=orjson.OPT_INDENT_2))  # as `--json` prints it
    assert size < JSON_BYTES, size
    text = "\n".join(lines(status))
    assert len(text.splitlines()) < 300 and f"queue ({LIMITS.queued_jobs:,}, {LIMITS.queued_jobs:,} planned" in text
    every = view("p", planner, commit, [], length=timedelta(minutes=60), listed=None)  # `--all`
    assert len(every["queue"]) == LIMITS.queued_jobs and len(every["running"]) == LIMITS.gpus - 2 * LIMITS.apps
    assert len(lines(every, shown=None)) > LIMITS.queued_jobs


def test_the_text_says_a_pool_whose_agent_stopped_publishing_is_stalled():
    planner = Planner(PoolConfig(gpus=8, gpus_per_node=4, horizon=6))
    status = view("p", planner, None, [])
    assert not any(line.startswith("stalled:") for line in lines(status))
    status |= {"waiting": 1200, "stalled": True}
    assert lines(status)[1] == (
        "stalled: 1,200 input records past its ledger, whose last pass is over 300 s old: its agent publishes nothing"
    )


@pytest.mark.kafka
async def test_status_reads_the_live_pool_back_from_the_bus(kafka_bootstrap):
    prefix = unique_topic("status") + "."
    topics = Topics.with_prefix(prefix)
    agent = AgentService(
        kafka_bootstrap,
        AgentSettings(step_seconds=1.0, full_mode=RollingFullMode(every=0), group_id=unique_topic("g")),
        topics,
        pool="p",
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(agent.run(stop, ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        async with Client(kafka_bootstrap, pool="p", topics=topics) as client:
            await client.send("pool.configured", {"gpus": 8, "gpus_per_node": 4, "horizon": 6})
            await client.register_app({"id": "chat", "priority": 5, "min_gpus": 0, "max_gpus": 4})
            await client.report_traffic("chat", gpus=2)
            a = await client.submit_job({"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 4})
            b = await client.submit_job({"id": "b", "kind": "training", "priority": 1, "gpus": 8, "duration": 2})
        assert a.action == "start" and b.action in ("planned", "queued")
        for _ in range(50):  # until a commit holds `a`
            status = await read_status(kafka_bootstrap, topics, "p", gpu_range=(0, 8))
            if status and status["commit"] and "a" in status["detail"]["holders"]:
                break  # `a` runs from its start decision; its first commit is what the plan shows
            await asyncio.sleep(0.3)
        assert {r["id"] for r in status["running"]} == {"a"}
        assert status["stalled"] is False  # a live agent: nothing waits long past its ledger
        assert [q["id"] for q in status["queue"]] == ["b"] and status["queue"][0]["reason"]
        # its observation holds into the step after it (then nothing is observed: no need)
        assert status["apps"][0]["id"] == "chat" and status["apps"][0]["need"] in (2, None)
        assert sum(row[0] == "a" for row in gpu_rows(status["detail"])) == 4
        assert status["plan"]["rows"][0]["busy"][0] >= 4
        assert await read_status(kafka_bootstrap, topics, "nobody") is None
        env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
        run = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "gpualloc", "status", "--pool", "p", "--topic-prefix", prefix],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        assert "queue (1, " in run.stdout and "chat" in run.stdout and "GPUs the plan takes a group" in run.stdout
        assert "legend:" not in run.stdout  # the per-GPU Gantt only on request
        run = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "gpualloc", "status", "--pool", "p", "--topic-prefix", prefix, "--gpus", "0-7"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert run.returncode == 0 and "legend:" in run.stdout and "=a" in run.stdout, run.stderr
        run = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "gpualloc", "status", "--pool", "nobody", "--topic-prefix", prefix, "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert run.returncode == 2 and "--pool" in run.stderr and "Traceback" not in run.stderr
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@pytest.mark.kafka
async def test_explain_and_status_on_the_command_line_agree_and_a_dead_letter_is_no_waiting_job(kafka_bootstrap):
    prefix = unique_topic("explain") + "."
    topics = Topics.with_prefix(prefix)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        async with pool_agent(kafka_bootstrap, topics) as halt:
            await producer.start()
            async with Client(kafka_bootstrap, pool="p", topics=topics) as client:
                await client.send("pool.configured", {"gpus": 8, "gpus_per_node": 4, "horizon": 6})
                a = await client.submit_job({"id": "a", "kind": "training", "priority": 5, "gpus": 4, "duration": 40})
                assert a.action == "start"
                negative = {"id": "neg", "kind": "training", "priority": -5, "gpus": 1, "duration": 1}
                envelope = {"event_id": "neg-1", "type": "job.submitted", "occurred_at": "2026-12-04T00:00:00Z"}
                await producer.send_and_wait(
                    topics.jobs, orjson.dumps({**envelope, "pool": "p", "payload": negative}), key=b"p"
                )
                for _ in range(50):  # until the dead letter and two commits are out
                    status = await read_status(kafka_bootstrap, topics, "p")
                    if status and status["commit"] and status["commit"]["seq"] >= 2:
                        break
                    await asyncio.sleep(0.3)
            await halt()  # the pool still: both commands read the same commit
        gpualloc = gpualloc_on(kafka_bootstrap, prefix)
        status, running, rejected = await asyncio.gather(
            *(asyncio.to_thread(gpualloc, *args) for args in (["status"], ["explain", "a"], ["explain", "neg"]))
        )
        assert status.returncode == running.returncode == rejected.returncode == 0, status.stderr + running.stderr
        (now,) = [line for line in status.stdout.splitlines() if line.startswith("now: ")]
        committed = now.split(" (seq")[0]  # "now: step N committed at HH:MM:SS UTC"
        assert running.stdout.splitlines()[-1].startswith(committed)
        assert " - running on GPUs 0-3 since step " in running.stdout.splitlines()[-1]
        assert "GPUs: 4 batch, 0 real-time, 4 idle, 0 down" in status.stdout
        last = rejected.stdout.splitlines()[-1]
        assert last.startswith(committed) and " - rejected, never planned: priority" in last and "waiting" not in last
        assert "rejected job.submitted (" in rejected.stdout
    finally:
        await producer.stop()
