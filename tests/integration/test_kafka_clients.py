"""Starting Kafka clients: an unreachable broker is retried with backoff and then exits 2 naming
--bootstrap, the same for every long-lived command; a refused login is not retried; a client
that did not start is always closed (no "Unclosed AIOKafka..." warning)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed

from gpualloc.bus.clients import FIRST_BACKOFF_S, Refused, Unreachable, started

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "benchmarks" / "traces" / "week-64gpu-1000jobs.jsonl"


class FakeClient:
    """A client whose first `failures` starts fail as aiokafka's do, logging `cause` first."""

    def __init__(self, failures: int, cause: BaseException | None = None) -> None:
        self.failures, self.cause = failures, cause
        self.starts: list[float] = []
        self.stopped = False

    async def start(self) -> None:
        self.starts.append(asyncio.get_running_loop().time())
        if len(self.starts) <= self.failures:
            if self.cause is not None:
                logging.getLogger("aiokafka").error('Unable connect to "%s:%s": %s', "127.0.0.1", 1, self.cause)
            raise KafkaConnectionError("Unable to bootstrap from [...]")

    async def stop(self) -> None:
        self.stopped = True


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
async def test_a_start_backs_off_exponentially_until_it_connects():
    client = FakeClient(failures=3)
    assert await started(client, "test", deadline_s=10) is client
    gaps = [b - a for a, b in zip(client.starts, client.starts[1:])]
    for gap, wanted in zip(gaps, [0.25, 0.5, 1.0], strict=True):
        assert wanted - 0.01 <= gap < wanted + 0.2
    assert not client.stopped


async def test_a_start_that_runs_out_of_time_closes_the_client(caplog):
    client = FakeClient(failures=100, cause=ConnectionRefusedError(111, "Connect call failed"))
    began = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(Unreachable, match="Connect call failed") as raised:
        await started(client, "test", deadline_s=0.6)
    assert isinstance(raised.value, KafkaConnectionError) and "connect_timeout_s" in str(raised.value)
    assert 0.6 <= time.monotonic() - began < 1.0 and len(client.starts) == 3 and client.stopped
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("retrying" in line for line in lines)  # once per retry, aiokafka's kept


async def test_a_refused_login_is_not_retried():
    client = FakeClient(failures=1, cause=SaslAuthenticationFailed("invalid credentials"))
    with pytest.raises(Refused, match="invalid credentials") as raised:
        await started(client, "test", deadline_s=10)
    assert raised.value.setting == "kafka.sasl_password" and len(client.starts) == 1 and client.stopped


async def test_a_cancelled_start_closes_the_client():
    class Hanging(FakeClient):
        async def start(self) -> None:
            await asyncio.sleep(60)

    client = Hanging(failures=0)
    task = asyncio.create_task(started(client, "test"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.stopped


def test_aiokafka_logs_pass_outside_a_start(caplog):
    with caplog.at_level(logging.ERROR):
        logging.getLogger("aiokafka").error('Unable connect to "%s:%s": %s', "h", 1, OSError("down"))
    assert [r.getMessage() for r in caplog.records] == ['Unable connect to "h:1": down']


@pytest.mark.parametrize(
    "command",
    [
        ["agent", "--policy", "heuristic"],
        ["agent", "--group", "g", "--policy", "heuristic"],
        ["node-agent", "--node", "0", "--gpus", "0-7", "--bind-dir", "{tmp}/node"],
        ["publish", str(TRACE)],
        ["tail"],
        ["audit"],
        ["explain", "job-1"],
    ],
    ids=lambda c: " ".join(c[:3]) if c[0] == "agent" else c[0],
)
@pytest.mark.slow
def test_an_unreachable_broker_exits_2_naming_bootstrap_after_retrying(command, tmp_path):
    env = {**os.environ, "GPUALLOC_KAFKA__CONNECT_TIMEOUT_S": "1"}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gpualloc", *args, "--bootstrap", f"127.0.0.1:{closed_port()}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - began
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("retrying in") >= 2 and took >= 1.0 > FIRST_BACKOFF_S
    assert "gpualloc: --bootstrap: cannot reach Kafka at 127.0.0.1:" in proc.stderr
    assert "Unclosed" not in proc.stderr and "Traceback" not in proc.stderr


async def test_tasks_a_start_spawned_log_as_usual(caplog):
    class Spawning(FakeClient):
        async def start(self) -> None:
            self.context = contextvars.copy_context()  # what a task it spawned would inherit

    client = Spawning(failures=0)
    await started(client, "test")

    async def later() -> None:
        logging.getLogger("aiokafka").warning("Metadata update failed using %s: %s", 1, OSError("gone"))

    with caplog.at_level(logging.WARNING):
        await asyncio.get_running_loop().create_task(later(), context=client.context)
    assert [r.getMessage() for r in caplog.records] == ["Metadata update failed using 1: gone"]
