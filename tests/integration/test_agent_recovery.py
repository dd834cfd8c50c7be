"""Safe restarts: the agent, run as the CLI runs it, is killed with SIGKILL at 20 points of a
compressed two-day trace and started again with the same command each time. Against an
uninterrupted run of the same trace: every job is decided, each exactly once; every committed
step is legal with no GPU given to two holders; `seq` rises strictly; and `gpualloc audit`
reproduces every decision and commit of both runs."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections import Counter

import pytest
from support.kafka_broker import read_all, unique_topic

from gpualloc.agent.cli.running import agent_argv
from gpualloc.agent.operator.publish import complete_jobs, publish_trace
from gpualloc.bus.topics import Topics
from gpualloc.generators.traces import generate_trace
from gpualloc.solvers.legality import online_violations

pytestmark = pytest.mark.kafka

STEP = 0.4  # seconds per step
KILLS = 20


def agent_command(bootstrap: str, prefix: str, config: str) -> list[str]:
    return agent_argv(
        bootstrap,
        prefix,
        "--config",
        config,
        "--step-seconds",
        str(STEP),
        "--full-mode-every",
        "3",
        "--full-mode-time-limit",
        "0.3",
    )


async def play(bootstrap: str, prefix: str, config: str, cwd, kills: int, seed: int) -> dict:
    """Publish the trace paced at STEP while the agent runs (and is killed `kills` times)."""
    topics = Topics.with_prefix(prefix)
    events = generate_trace(gpus=16, days=2, jobs=60, apps=1, seed=seed)
    jobs = [e["payload"]["id"] for e in events if e["type"] == "job.submitted"]
    durations = {e["payload"]["id"]: e["payload"]["actual_duration"] for e in events if e["type"] == "job.submitted"}
    stop_completing = asyncio.Event()
    completer = asyncio.create_task(complete_jobs(bootstrap, topics, durations, stop_completing))
    command = agent_command(bootstrap, prefix, config)
    log = open(cwd / f"{prefix}agent.log", "ab")
    agent = subprocess.Popen(command, cwd=cwd, stderr=log)
    publisher = asyncio.create_task(publish_trace(bootstrap, events, topics, STEP))
    rng = random.Random(seed)
    killed = 0
    while killed < kills and not publisher.done():
        await asyncio.sleep(rng.uniform(0.4, 1.6))
        agent.kill()  # SIGKILL: no clean-up, mid-pass or mid-transaction as it falls
        agent.wait()
        killed += 1
        agent = subprocess.Popen(command, cwd=cwd, stderr=log)
    await publisher
    await asyncio.sleep(8 * STEP)  # the queue drains into a few more commits
    stop_completing.set()
    await completer
    agent.terminate()
    assert agent.wait(timeout=60) == 0
    limits = {
        e["payload"]["id"]: (
            e["payload"].get("min_gpus", 0),
            e["payload"].get("max_gpus") or 16,
            e["payload"].get("swap_cap") or 2,
        )
        for e in events
        if e["type"] == "app.registered"
    }
    return {"jobs": jobs, "killed": killed, "topics": topics, "limits": limits}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"gpus": 16, "gpus_per_node": 8, "horizon": 24, "step_minutes": 60, "swap_cap": 2}))
    return str(path)


async def test_sigkill_at_twenty_points_loses_nothing_and_decides_nothing_twice(kafka_bootstrap, tmp_path, config):
    runs = {}
    for name, kills in (("calm", 0), ("killed", KILLS)):
        prefix = unique_topic(name) + "."
        runs[name] = await play(kafka_bootstrap, prefix, config, tmp_path, kills, seed=7)
    assert runs["killed"]["killed"] == KILLS
    for name, run in runs.items():
        topics = run["topics"]
        decisions = [m["payload"] for m in await read_all(kafka_bootstrap, topics.decisions)]
        per_job = Counter(d["job_id"] for d in decisions)
        assert set(per_job) == set(run["jobs"]), name  # every job decided...
        assert max(per_job.values()) == 1, (name, per_job.most_common(3))  # ...exactly once
        commits = [m["payload"] for m in await read_all(kafka_bootstrap, topics.commits)]
        seqs = [c["seq"] for c in commits]
        assert seqs == list(range(1, len(seqs) + 1)), name  # strictly rising, no gap, no repeat
        steps = [
            type("Step", (), {"step": c["step"], "assignments": {k: tuple(v) for k, v in c["assignments"].items()}})
            for c in commits
        ]
        restarts = {}
        for c in commits:
            for job_id in c["started"]:
                restarts.setdefault(job_id, []).append(c["step"])
        limits = run["limits"]
        assert online_violations(steps, limits, set(limits), failed=restarts, node_size=8) == [], name
        prefix = topics.jobs[: -len("gpualloc.jobs")]
        proc = subprocess.run(
            [sys.executable, "-m", "gpualloc", "audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (name, proc.stdout[-3000:], proc.stderr[-2000:])
        last = proc.stdout.strip().splitlines()[-1]
        assert last == f"audit default: {len(decisions)} decisions, {len(commits)} commits reproduced; 0 mismatches"
