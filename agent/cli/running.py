"""Running a long-lived command (agent, node agent, publish, tail, audit, explain) until it is
done or told to stop, with the one exit-code rule of the CLI for a broker that cannot be reached
or refuses the login: bad input (exit 2), named by the option or setting to fix."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Awaitable, Callable

from aiokafka.errors import KafkaConnectionError

from gpualloc.agent.loading import InputError
from gpualloc.bus.clients import Broker, Refused


def run_until_signal(body: Callable[[asyncio.Event], Awaitable[None]], bootstrap: Broker | str) -> None:
    """Run `body(stop)`; SIGTERM/SIGINT set `stop`, and the body finishes its pass and closes its
    clients. A broker that cannot be reached (after the retries of `clients.started`) or
    that refuses the login or TLS setup is bad input (exit 2)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await body(stop)

    try:
        asyncio.run(main())
    except KafkaConnectionError as e:
        raise InputError("--bootstrap", [f"cannot reach Kafka at {bootstrap}: {e}"]) from None
    except Refused as e:
        raise InputError(e.setting, [f"Kafka at {bootstrap}: {e.detail}"]) from None


def agent_argv(bootstrap: Broker | str, prefix: str, *flags: str) -> list[str]:
    """The command line that starts `gpualloc agent` in a process of its own (as benches and
    tests run it) on `bootstrap` with topic prefix `prefix`, and `flags`."""
    return [sys.executable, "-m", "gpualloc", "agent", "--bootstrap", str(bootstrap), "--topic-prefix", prefix, *flags]
