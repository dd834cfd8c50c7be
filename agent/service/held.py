"""A second agent for a pool on the same host: its metrics port is taken by the first, which says
which pool it serves and since when (`gpualloc_agent_start_time_seconds`), so the second exits
naming the holder instead of with the socket's "address already in use". Agents on other hosts
are not seen here: a second one fences the first (`Topics.transactional_id`), which stops and
says so."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

START_METRIC = "gpualloc_agent_start_time_seconds"


class PortTaken(RuntimeError):
    """The metrics port cannot be served: another agent of the pool holds it, or something else."""


async def holder_since(port: int, pool: str, timeout: float = 2.0) -> datetime | None:
    """When the agent serving metrics on local `port` took `pool` (None: no gpualloc agent of that
    pool answers there)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        await writer.drain()
        text = (await asyncio.wait_for(reader.read(), timeout)).decode("utf-8", "replace")
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
    found = re.search(rf'^{START_METRIC}\{{[^}}]*pool="{re.escape(pool)}"[^}}]*\}} (\S+)$', text, re.MULTILINE)
    return None if found is None else datetime.fromtimestamp(float(found.group(1)), UTC)


async def refuse_taken_port(port: int, pool: str, error: OSError) -> PortTaken:
    """Why the metrics port `port` cannot be served (`error`: the bind's), naming the agent that holds
    `pool` when it is the one there."""
    since = await holder_since(port, pool)
    if since is not None:
        return PortTaken(
            f"pool {pool!r} is held by another agent (since {since.isoformat().replace('+00:00', 'Z')}; it serves "
            f"metrics on port {port} of this host): stop it first, or run this one elsewhere (it would fence that one)"
        )
    return PortTaken(f"metrics_port: port {port} cannot be served: {error.strerror or error}")
