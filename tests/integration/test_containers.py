"""The deployment in containers: deploy/docker-compose.yml started with Docker (Kafka, the agent,
two node agents, the demo publisher playing a day), checked from the host through the broker's
published port: every started job was bound on the node its GPUs belong to, and released;
the agent's /metrics, its JSON logs and `gpualloc status` tell the same story.

The images are the local ones `deploy/docker/build-images.sh` builds (or KAFKA_IMAGE and
GPUALLOC_IMAGE); without a Docker engine or those images the test skips with a message, and
under CI=true it fails (`.ci/run` installs and starts the engine and builds the images).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from support.kafka_broker import _free_ports, read_all

from gpualloc.schemas.export import export_schemas

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "docker-compose.yml"
IMAGES = {"KAFKA_IMAGE": "gpualloc-local/kafka:4.1.2", "GPUALLOC_IMAGE": "gpualloc:latest"}
DAY_TIMEOUT_S = 300


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"containers in CI: {reason}", pytrace=False)
    pytest.skip(f"containers: {reason}")


def _compose_command() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.fixture(scope="module")
def stack():
    """The compose stack, up under a fresh project name and free host ports; down (volumes too) after."""
    if not shutil.which("docker") or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        _unavailable("no Docker engine answers (apt-get install docker.io; dockerd)")
    images = {name: os.environ.get(name, default) for name, default in IMAGES.items()}
    for image in images.values():
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
            _unavailable(f"image {image} not built (deploy/docker/build-images.sh)")
    compose = _compose_command()
    if compose is None:
        _unavailable("neither `docker compose` nor docker-compose is installed")
    kafka, agent, node0, node1 = _free_ports(4)
    env = {
        **os.environ,
        **images,
        "KAFKA_HOST_PORT": str(kafka),
        "AGENT_METRICS_PORT": str(agent),
        "NODE0_METRICS_PORT": str(node0),
        "NODE1_METRICS_PORT": str(node1),
        "STEP_SECONDS": "1",
        "DEMO_JOBS": "30",
        "DEMO_DAYS": "1",
    }
    project = f"gpualloc-test-{uuid.uuid4().hex[:8]}"
    run = [*compose, "-p", project, "-f", str(COMPOSE)]
    up = subprocess.run([*run, "up", "-d", "--no-build"], env=env, capture_output=True, text=True, timeout=300)
    try:
        assert up.returncode == 0, up.stderr
        yield {
            "run": run,
            "env": env,
            "bootstrap": f"localhost:{kafka}",
            "agent_port": agent,
            "node_ports": (node0, node1),
            "project": project,
        }
    finally:
        subprocess.run([*run, "down", "-v", "--timeout", "30"], env=env, capture_output=True, timeout=300)


def _container(stack, service: str) -> str:
    out = subprocess.run([*stack["run"], "ps", "-q", service], env=stack["env"], capture_output=True, text=True)
    return out.stdout.strip()


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def _wait_for_the_day(stack) -> None:
    """Until the publisher (which completes the jobs too) has exited; it must exit 0."""
    deadline = time.monotonic() + DAY_TIMEOUT_S
    while time.monotonic() < deadline:
        cid = _container(stack, "publisher")
        if cid:
            state = json.loads(
                subprocess.run(
                    ["docker", "inspect", "-f", "{{json .State}}", cid], capture_output=True, text=True
                ).stdout
            )
            if state["Status"] == "exited":
                logs = subprocess.run(["docker", "logs", cid], capture_output=True, text=True)
                assert state["ExitCode"] == 0, logs.stdout + logs.stderr
                return
        time.sleep(2)
    pytest.fail(f"the demo day did not end within {DAY_TIMEOUT_S} s")


@pytest.mark.kafka
async def test_a_day_through_the_containers_binds_every_started_job_on_its_node(stack):
    import asyncio

    await asyncio.to_thread(_wait_for_the_day, stack)
    bootstrap = stack["bootstrap"]
    commits = [m["payload"] for m in await read_all(bootstrap, "gpualloc.commits")]
    started = {job for c in commits for job in c.get("started", [])}
    assert len(commits) >= 24 and len(started) >= 10, (len(commits), len(started))
    held = {}
    for c in commits:
        for job in c.get("started", []):
            held.setdefault(job, c["assignments"][job])
    await asyncio.sleep(3)  # the node agents' last reports
    reports = [m["payload"] for m in await read_all(bootstrap, "gpualloc.bindings") if m["type"] == "binding.reported"]
    for job, gpus in held.items():
        for node in {g // 8 for g in gpus}:
            bound = [r for r in reports if r["job_id"] == job and r["node"] == node and r["status"] == "bound"]
            assert bound, f"{job} on node {node}: never bound"
            # bound on the GPUs its start commit gives it (a `start` decision the next arrival of the
            # same step moved is bound at once and then rebound to the commit's GPUs)
            assert {g for g in gpus if g // 8 == node} in [set(r["gpus"]) for r in bound], (job, bound)
    ended = {r["job_id"] for r in reports if r["status"] == "released"}
    assert set(held) <= ended  # the publisher exits once every job completed

    envelope = Draft202012Validator(export_schemas()["envelope.json"])
    for topic in ("jobs", "traffic", "config", "decisions", "commits", "bindings", "ledger", "state"):
        for message in await read_all(bootstrap, f"gpualloc.{topic}"):
            assert not list(envelope.iter_errors(message)), f"{message['type']} on {topic} breaks the schema"
    assert not await read_all(bootstrap, "gpualloc.deadletter")  # the demo's inputs are all valid

    metrics = await asyncio.to_thread(_get, stack["agent_port"], "/metrics")
    decided = sum(
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith("gpualloc_decisions_total{")
    )
    decisions = await read_all(bootstrap, "gpualloc.decisions")
    assert decided == len(decisions) == 30
    assert "gpualloc_consumer_lag" in metrics and await asyncio.to_thread(_get, stack["agent_port"], "/readyz")
    node_metrics = await asyncio.to_thread(_get, stack["node_ports"][0], "/metrics")
    assert "gpualloc_node_binds_total" in node_metrics

    logs = subprocess.run(["docker", "logs", _container(stack, "agent")], capture_output=True, text=True)
    lines = [json.loads(line) for line in logs.stderr.splitlines() + logs.stdout.splitlines() if line.startswith("{")]
    assert lines and all(line["pool"] == "default" and "level" in line for line in lines)

    status = subprocess.run(
        [sys.executable, "-m", "gpualloc", "status", "--bootstrap", bootstrap, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    view = json.loads(status.stdout)
    assert view["gpus"] == 16 and [n["node"] for n in view["nodes"]] == [0, 1]
    assert all(n["last_report"] is not None for n in view["nodes"])
