"""A second agent of a pool on the same host exits naming the agent that holds it, not with the
socket's "address already in use"; a port taken by something else is named as such."""

from __future__ import annotations

import asyncio
import errno

import pytest

from gpualloc.agent.metrics import AgentMetrics, HealthServer
from gpualloc.agent.service.held import refuse_taken_port

IN_USE = OSError(errno.EADDRINUSE, "address already in use")


async def test_a_second_agent_of_the_pool_on_the_host_is_told_which_agent_holds_it_and_since_when():
    first = HealthServer(AgentMetrics("pool-a").registry, lambda: True)
    port = await first.start(0, "127.0.0.1")
    try:
        with pytest.raises(OSError):
            await asyncio.start_server(lambda r, w: None, "127.0.0.1", port)
        said = str(await refuse_taken_port(port, "pool-a", IN_USE))
        assert said.startswith("pool 'pool-a' is held by another agent (since 20") and f"port {port}" in said
        other = str(await refuse_taken_port(port, "pool-b", IN_USE))  # an agent of another pool
        assert other == f"metrics_port: port {port} cannot be served: address already in use"
    finally:
        await first.close()


async def test_a_port_nothing_answers_on_is_named_with_the_sockets_error():
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        said = str(await refuse_taken_port(port, "p", IN_USE))
        assert said == f"metrics_port: port {port} cannot be served: address already in use"
    finally:
        server.close()
        await server.wait_closed()
