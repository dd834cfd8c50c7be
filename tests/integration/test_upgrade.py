"""An upgrade on a live pool: the release before this one (its commit, its own environment) runs a
pool of 32 GPUs with two apps, a backlog, a default time limit, node agents binding and a
platform completing jobs; it is stopped mid-trace (SIGKILL, or SIGTERM) and this release's agent
takes over the same topics, as docs/operations.md's upgrade procedure says. Across the takeover:
every job is decided exactly once; every commit keeps every running job where it was bound, and
no job leaves a commit unless it completed, failed or was cancelled; no GPU has two holders;
swap caps, app bounds and time limits hold; `seq` rises without a gap; and `gpualloc audit` of
this release reports no mismatch and judges every ledger entry, the previous release's too."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections import Counter

import pytest
from support.kafka_broker import read_all, unique_topic
from support.previous_release import build_previous, ours
from test_audit import publish

from gpualloc.agent.operator.publish import complete_jobs, publish_trace
from gpualloc.bus.topics import Topics
from gpualloc.generators.traces import generate_trace
from gpualloc.solvers.legality import online_violations
from gpualloc.solvers.release import package_version

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

STEP = 0.8  # seconds per step: jobs (at most TIME_LIMIT steps) outlast the new agent's start on a loaded machine
GPUS, NODE = 32, 8
TIME_LIMIT = 5  # the pool's default: jobs longer than this are failed at it
JOBS = 70
HANDOVER_STEP = 20  # of the trace's 48


@pytest.fixture(scope="module")
def previous(tmp_path_factory) -> list[str]:
    return build_previous(tmp_path_factory.mktemp("previous"))


def trace(seed: int) -> list[dict]:
    events = generate_trace(gpus=GPUS, days=2, jobs=JOBS, apps=2, seed=seed, gpus_per_node=NODE)
    config = events[0]
    assert config["type"] == "pool.configured"
    config["payload"]["time_limit"] = TIME_LIMIT
    return events


def flags(bootstrap: str, prefix: str) -> list[str]:
    return ["agent", "--bootstrap", bootstrap, "--topic-prefix", prefix, "--step-seconds", str(STEP)]


def node_agents(bootstrap: str, prefix: str, tmp_path) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            [
                *ours(),
                "node-agent",
                "--bootstrap",
                bootstrap,
                "--topic-prefix",
                prefix,
                "--node",
                str(n),
                "--gpus",
                f"{n * NODE}-{(n + 1) * NODE - 1}",
                "--bind-dir",
                str(tmp_path / f"{prefix}node{n}"),
            ],
            cwd=tmp_path,
            stderr=(tmp_path / f"{prefix}node{n}.log").open("wb"),
        )
        for n in range(GPUS // NODE)
    ]


async def committed(bootstrap: str, topics: Topics, step: int, agent: subprocess.Popen, log) -> None:
    """Wait until `agent` has committed `step` (however long its start takes on a busy machine)."""
    for _ in range(600):
        assert agent.poll() is None, log.read_text()[-3000:]
        commits = await read_all(bootstrap, topics.commits)
        if any(m["payload"]["step"] >= step for m in commits):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"no commit of step {step} in 2 minutes: {log.read_text()[-3000:]}")


async def all_decided(bootstrap: str, topics: Topics, jobs: set[str], agent: subprocess.Popen, log) -> None:
    """Wait until every job of the trace has its decision (the last ones come at the trace's end)."""
    for _ in range(600):
        assert agent.poll() is None, log.read_text()[-3000:]
        if jobs <= {m["payload"]["job_id"] for m in await read_all(bootstrap, topics.decisions)}:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"jobs without a decision after 2 minutes: {log.read_text()[-3000:]}")


async def upgrade(bootstrap: str, previous: list[str], tmp_path, stop: signal.Signals, seed: int) -> dict:
    """Play the trace paced at STEP; the previous release's agent for the first part, then this
    release's. What was published, and the trace's jobs and apps."""
    prefix = unique_topic(stop.name.lower()) + "."
    topics = Topics.with_prefix(prefix)
    events = trace(seed)
    jobs = [e["payload"]["id"] for e in events if e["type"] == "job.submitted"]
    durations = {e["payload"]["id"]: e["payload"]["actual_duration"] for e in events if e["type"] == "job.submitted"}
    log = (tmp_path / f"{prefix}agent.log").open("ab")
    old = subprocess.Popen([*previous, *flags(bootstrap, prefix)], cwd=tmp_path, stderr=log)
    nodes = node_agents(bootstrap, prefix, tmp_path)
    done = asyncio.Event()
    completer = asyncio.create_task(complete_jobs(bootstrap, topics, durations, done))
    publisher = asyncio.create_task(publish_trace(bootstrap, events, topics, STEP))
    new = None
    try:
        # about half the trace: a backlog, jobs running and bound, apps holding
        await committed(bootstrap, topics, HANDOVER_STEP, old, tmp_path / f"{prefix}agent.log")
        old.send_signal(stop)
        code = old.wait(timeout=60)
        assert code == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
        new = subprocess.Popen([*ours(), *flags(bootstrap, prefix)], cwd=tmp_path, stderr=log)
        await publisher
        await committed(bootstrap, topics, HANDOVER_STEP + 20, new, tmp_path / f"{prefix}agent.log")
        await all_decided(bootstrap, topics, set(jobs), new, tmp_path / f"{prefix}agent.log")
        assert new.poll() is None, (tmp_path / f"{prefix}agent.log").read_text()[-3000:]
        new.terminate()
        assert new.wait(timeout=60) == 0
    finally:
        done.set()
        await completer
        for proc in [old, *nodes, *([new] if new else [])]:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
    apps = {
        e["payload"]["id"]: (
            e["payload"].get("min_gpus", 0),
            e["payload"].get("max_gpus") or GPUS,
            e["payload"].get("swap_cap") or 2,
        )
        for e in events
        if e["type"] == "app.registered"
    }
    return {"prefix": prefix, "topics": topics, "jobs": jobs, "apps": apps}


def whole_commits(messages: list[dict]) -> list[dict]:
    """The non-reactive commits, in seq order (the pool is small: one part each)."""
    commits = [m["payload"] for m in messages if not m["payload"].get("reactive")]
    assert all(c.get("parts", 1) == 1 for c in commits)
    return sorted(commits, key=lambda c: c["seq"])


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_an_upgrade_keeps_every_bound_job_where_it_was_bound(kafka_bootstrap, tmp_path, previous, stop):
    run = await upgrade(kafka_bootstrap, previous, tmp_path, stop, seed=11)
    topics = run["topics"]
    decisions = [m["payload"] for m in await read_all(kafka_bootstrap, topics.decisions)]
    per_job = Counter(d["job_id"] for d in decisions)
    assert set(per_job) == set(run["jobs"]) and max(per_job.values()) == 1, per_job.most_common(3)
    messages = await read_all(kafka_bootstrap, topics.commits)
    seqs = sorted(m["payload"]["seq"] for m in messages)
    assert seqs == list(range(1, len(seqs) + 1))
    commits = whole_commits(messages)
    # the online rules over every commit of both agents: one holder per GPU, no running job moved,
    # apps within their bounds and swap caps (reactive grants folded into their step)
    grants: dict[int, dict[str, list[int]]] = {}
    for m in messages:
        if m["payload"].get("reactive"):
            grants.setdefault(m["payload"]["step"], {}).update(m["payload"]["assignments"])
    steps = [
        type(
            "Step",
            (),
            {
                "step": c["step"],
                "assignments": {k: tuple(v) for k, v in {**c["assignments"], **grants.get(c["step"], {})}.items()},
            },
        )
        for c in commits
    ]
    restarts: dict[str, list[int]] = {}
    for c in commits:
        for job_id in c["started"]:
            restarts.setdefault(job_id, []).append(c["step"])
    apps = run["apps"]
    assert online_violations(steps, apps, set(apps), failed=restarts, node_size=NODE) == []
    # nothing dropped: a job leaves the commits only once it completed, failed or was cancelled
    ended: dict[str, int] = {}  # job -> the last step it may still be held in
    jobs = await read_all(kafka_bootstrap, topics.jobs)
    for m in jobs:
        if m["type"] in ("job.completed", "job.failed", "job.cancelled"):
            ended.setdefault(m["payload"]["id"], 0)
    limited = [m["payload"] for m in jobs if m["type"] == "job.failed" and m["payload"].get("reason") == "time_limit"]
    for before, after in zip(commits, commits[1:]):
        for job_id in before["assignments"]:
            if job_id in apps or job_id in after["assignments"]:
                continue
            assert job_id in ended, f"{job_id} was held at step {before['step']} and dropped at {after['step']}"
    # time limits: a job runs at most its limit's steps from its start, then it is failed once
    held_steps = Counter(job_id for c in commits for job_id in c["assignments"] if job_id not in apps)
    assert max(held_steps.values()) <= TIME_LIMIT + 1  # the step it is failed at is no longer held
    assert limited and len({p["id"] for p in limited}) == len(limited)
    # the takeover happened with work bound: jobs of the previous release's last commit run on in
    # this release's first, on the same GPUs (those that left it ended, as checked above)
    ledger = [m["payload"] for m in await read_all(kafka_bootstrap, topics.ledger) if m["type"] == "pass.recorded"]
    theirs = [e for e in ledger if "version" not in e["run"]]
    mine = [e for e in ledger if e["run"].get("version") == package_version()]
    assert theirs and mine and len(theirs) + len(mine) == len(ledger)
    assert all(e.get("facts") is None for e in theirs) and all(e["facts"] is not None for e in mine)
    last_old = max(c["seq"] for e in theirs for c in e["commits"])
    old_commit = next(c for c in commits if c["seq"] == last_old)
    new_commit = next(c for c in commits if c["seq"] > last_old)
    kept = [j for j in old_commit["assignments"] if j not in apps and j in new_commit["assignments"]]
    assert kept, "no job ran across the takeover"
    assert all(new_commit["assignments"][j] == old_commit["assignments"][j] for j in kept)
    audit = subprocess.run(
        [*ours(), "audit", "--bootstrap", kafka_bootstrap, "--topic-prefix", run["prefix"], "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert audit.returncode == 0, (audit.stdout[-3000:], audit.stderr[-2000:])
    report = json.loads(audit.stdout)
    assert report["mismatches"] == [] and report["illegal"] == [] and report["ok"], report
    # the previous release's entries (rules 1) judged by the contract, this release's replayed exactly
    assert (report["judged"], report["replayed"]) == (len(theirs), len(mine)), report


async def test_an_agent_refuses_a_ledger_a_newer_release_wrote(kafka_bootstrap, tmp_path):
    """A made-up newer release's entry on the pool's ledger: the agent exits 2 naming its
    versions, and publishes nothing."""
    prefix = unique_topic("newer") + "."
    topics = Topics.with_prefix(prefix)
    entry = {"txn": 1, "now": "2026-12-07T00:00:00Z", "run": {"policy": "heuristic", "rules": 99, "schema": 9}}
    message = {
        "event_id": "default:pass:1",
        "type": "pass.recorded",
        "occurred_at": "2026-12-07T00:00:00Z",
        "pool": "default",
        "schema_version": 1,
        "payload": entry,
    }
    await publish(kafka_bootstrap, topics.ledger, [json.dumps(message).encode()], key=b"default")
    agent = subprocess.run(
        [*ours(), *flags(kafka_bootstrap, prefix)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert agent.returncode == 2, agent.stderr[-3000:]
    assert "ledger entry 1: written by a newer release (schema 9, rules 99)" in agent.stderr
    assert await read_all(kafka_bootstrap, topics.commits) == []
