"""A pool's agent in the test's event loop, and the `gpualloc` command run against its topics, for
broker tests that publish to a pool and then read it back as an operator does."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

from gpualloc.agent.service.agent_service import AgentService
from gpualloc.bus.topics import Topics
from gpualloc.schemas.settings import AgentSettings, RollingFullMode
from support.kafka_broker import unique_topic


@contextlib.asynccontextmanager
async def pool_agent(bootstrap: str, topics: Topics, pool: str = "p") -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """An agent for `pool` (1-s steps, no full mode), ready; yields `halt`, which stops it and waits
    for it (so what it published stands still for the commands that read it), as leaving does."""
    settings = AgentSettings(step_seconds=1.0, full_mode=RollingFullMode(every=0), group_id=unique_topic("g"))
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(AgentService(bootstrap, settings, topics, pool=pool).run(stop, ready))

    async def halt() -> None:
        stop.set()
        await asyncio.wait_for(task, 30)

    try:
        await asyncio.wait_for(ready.wait(), 30)
        yield halt
    finally:
        await halt()


def gpualloc_on(bootstrap: str, prefix: str, pool: str = "p") -> Callable[..., subprocess.CompletedProcess]:
    """`gpualloc ARGS --pool POOL --topic-prefix PREFIX` as a user runs it, in a process of its own."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}

    def run(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "gpualloc", *args, "--pool", pool, "--topic-prefix", prefix]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)

    return run
