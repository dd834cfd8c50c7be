"""The agent at a size users run (correctness, not timing): a 1,024-GPU pool of 8-GPU nodes
with three real-time apps and a backlog of 2,000 jobs (a tenth given by their features, ids of
80 characters), the agent run as the CLI runs it, SIGKILLed after its first commits and started
again (recovering from a snapshot), node agents on three nodes, the platform completing what runs. Every job is decided
exactly once; `seq` rises by one across the kill; every committed step passes the online rules
with each app within its bounds; every message is under the broker's default limit; `gpualloc
audit` reproduces every decision and commit; each node agent ends bound to what the last commit
assigns its node; SIGTERM ends the agent promptly with exit 0."""

from __future__ import annotations

import asyncio
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone

import pytest
from support.feature_jobs import LORA_7B
from support.kafka_broker import read_all, unique_topic

from gpualloc.agent.cli.running import agent_argv
from gpualloc.agent.node.binders import FileBinder
from gpualloc.agent.node.node_agent import NodeAgent
from gpualloc.agent.operator.publish import complete_jobs, publish_trace
from gpualloc.bus.topics import Topics, encode
from gpualloc.schemas.commits import merge
from gpualloc.schemas.events import envelope
from gpualloc.schemas.settings import NodeAgentSettings
from gpualloc.solvers.legality import online_violations

pytestmark = pytest.mark.kafka

GPUS, NODE, JOBS = 1024, 8, 2000
STEP = 4.0  # seconds per step: a boundary's replan of 2,000 jobs takes about one on a loaded machine
NODES = (0, 64, 127)
WAIT_S = 240
LORA = LORA_7B
APPS = {"chat": (8, 64), "search": (4, 32), "voice": (2, 16)}  # floor, ceiling


def backlog(seed: int) -> tuple[list[dict], dict[str, int]]:
    """The apps and the backlog as envelopes, and each job's real duration (steps)."""
    rng = random.Random(seed)
    at = datetime.now(timezone.utc)
    events = [
        envelope(
            "app.registered",
            {
                "id": app,
                "priority": 9,
                "min_gpus": lo,
                "max_gpus": hi,
                "swap_cap": 4,
                "profile": [rng.randint(lo, hi) for _ in range(24)],
            },
            at,
            f"app-{app}",
        )
        for app, (lo, hi) in APPS.items()
    ]
    durations = {}
    for k in range(JOBS):
        job_id = f"team-{k % 17:02d}/" + f"{k:06d}-".ljust(72, "x")
        payload: dict = {"id": job_id, "kind": "training", "priority": rng.randint(1, 9)}
        if k % 10 == 0:
            payload["features"] = {**LORA, "dataset_tokens_m": rng.choice([20, 50, 200])}
        else:
            payload |= {"gpus": rng.choice([1, 2, 4, 8, 8, 16, 32, 64]), "duration": rng.randint(1, 8)}
        durations[job_id] = payload.get("duration", 4)
        events.append(envelope("job.submitted", payload, at, f"job-{k}"))
    return events, durations


async def commits_past(bootstrap: str, topics: Topics, seq: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if any(m["payload"]["seq"] >= seq for m in await read_all(bootstrap, topics.commits)):
            return
        await asyncio.sleep(1)
    raise AssertionError(f"no commit with seq >= {seq} within {WAIT_S} s")


async def test_a_1024_gpu_pool_with_apps_and_a_backlog_survives_sigkill_and_audits_clean(kafka_bootstrap, tmp_path):
    prefix = unique_topic("scale") + "."
    topics = Topics.with_prefix(prefix)
    config = tmp_path / "pool.json"
    config.write_text(
        json.dumps(
            {
                "gpus": GPUS,
                "gpus_per_node": NODE,
                "horizon": 48,
                "step_minutes": 30,
                "swap_cap": 4,
                "gpu_type": "h100-80gb",
            }
        )
    )
    command = agent_argv(kafka_bootstrap, prefix, "--config", str(config), "--step-seconds", str(STEP))
    log = open(tmp_path / "agent.log", "ab")
    events, durations = backlog(seed=3)
    stop, nodes = asyncio.Event(), {}
    for n in NODES:
        nodes[n] = NodeAgent(  # three nodes of 128 run one, beating none: the pool is not watched
            kafka_bootstrap,
            n,
            range(n * NODE, (n + 1) * NODE),
            FileBinder(tmp_path / f"node{n}"),
            topics=topics,
            settings=NodeAgentSettings(heartbeat_s=0),
        )
    node_tasks = [asyncio.create_task(a.run(stop)) for a in nodes.values()]
    agent = subprocess.Popen(command, cwd=tmp_path, stderr=log)
    stop_completing = asyncio.Event()
    completer = asyncio.create_task(complete_jobs(kafka_bootstrap, topics, durations, stop_completing))
    try:
        apps = [e for e in events if e["type"] == "app.registered"]
        await publish_trace(kafka_bootstrap, apps, topics)  # apps first, as at a pool's set-up: floors first
        await commits_past(kafka_bootstrap, topics, 1)
        await publish_trace(kafka_bootstrap, events[len(apps) :], topics)
        await commits_past(kafka_bootstrap, topics, 3)
        agent.kill()  # SIGKILL: mid-pass or mid-transaction as it falls
        agent.wait()
        agent = subprocess.Popen(command, cwd=tmp_path, stderr=log)
        seq = max(m["payload"]["seq"] for m in await read_all(kafka_bootstrap, topics.commits))
        await commits_past(kafka_bootstrap, topics, seq + 3)
        began = time.monotonic()
        agent.terminate()
        assert agent.wait(timeout=60) == 0
        assert time.monotonic() - began < 30, "SIGTERM took too long"
    finally:
        if agent.poll() is None:
            agent.kill()
        stop_completing.set()
        await completer

    decisions = [m["payload"] for m in await read_all(kafka_bootstrap, topics.decisions)]
    per_job = Counter(d["job_id"] for d in decisions)
    assert set(per_job) == set(durations) and max(per_job.values()) == 1  # every job decided, once
    raw = await read_all(kafka_bootstrap, topics.commits)
    by_seq: dict[int, list] = {}
    for m in raw:
        assert len(encode(m)) < 1_000_000
        by_seq.setdefault(m["payload"]["seq"], []).append(m["payload"])
    assert sorted(by_seq) == list(range(1, len(by_seq) + 1))  # one seq after another, across the kill
    commits = [merge(parts) for _, parts in sorted(by_seq.items())]
    steps = [
        type("Step", (), {"step": c["step"], "assignments": {k: tuple(v) for k, v in c["assignments"].items()}})
        for c in commits
    ]
    restarts: dict[str, list[int]] = {}
    for c in commits:
        for job_id in c["started"]:
            restarts.setdefault(job_id, []).append(c["step"])
    limits = {app: (lo, hi, 4) for app, (lo, hi) in APPS.items()}
    assert online_violations(steps, limits, set(limits), failed=restarts, node_size=NODE) == []
    recovered = re.findall(
        r"recovered at transaction (\d+), seq \d+ \((\d+) replayed\)",
        (tmp_path / "agent.log").read_text(errors="replace"),
    )
    assert recovered and all(int(replayed) < int(txn) for txn, replayed in recovered)  # from a snapshot
    assert await read_all(kafka_bootstrap, topics.deadletter) == []
    assert all(app in commits[-1]["assignments"] for app in APPS)
    for topic in (topics.decisions, topics.ledger, topics.state):
        assert all(len(encode(m)) < 1_000_000 for m in await read_all(kafka_bootstrap, topic)), topic

    proc = subprocess.run(
        [sys.executable, "-m", "gpualloc", "audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-2000:])
    assert proc.stdout.strip().splitlines()[-1] == (
        f"audit default: {len(decisions)} decisions, {len(commits)} commits reproduced; 0 mismatches"
    )

    last = commits[-1]["assignments"]
    try:
        for n, node in nodes.items():
            lo = n * NODE
            expected = {h: [g - lo for g in gpus if lo <= g < lo + NODE] for h, gpus in last.items()}
            expected = {h: local for h, local in expected.items() if local}
            deadline = time.monotonic() + 60
            while node.binder.bound() != expected and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            assert node.binder.bound() == expected, n
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*node_tasks), 60)


def test_the_backlog_is_what_the_test_says():
    events, durations = backlog(seed=3)
    jobs = [e["payload"] for e in events if e["type"] == "job.submitted"]
    assert len(jobs) == JOBS and sum("features" in j for j in jobs) == JOBS // 10
    assert all(len(j["id"]) == 80 for j in jobs) and len(durations) == JOBS
