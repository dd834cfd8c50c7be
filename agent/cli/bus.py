"""The bus commands of `gpualloc`: agent, node-agent, publish and tail (argparse + asyncio).

Each runs until it is done or SIGTERM/SIGINT arrives, then closes its Kafka clients cleanly. A
broker that cannot be reached or a bad option is reported in one line (exit 2), no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from datetime import datetime, timezone

import orjson
from aiokafka.errors import KafkaConnectionError
from pydantic import ValidationError

from gpualloc.agent.loading import InputError, read_text
from gpualloc.agent.topics import Topics
from gpualloc.schemas.errors import describe
from gpualloc.schemas.events import PoolConfigured, envelope

EXIT_OK, EXIT_INPUT = 0, 2


def _run_until_signal(body) -> None:
    """Run `body(stop)` with SIGTERM/SIGINT setting `stop` (the body finishes its pass and closes)."""
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await body(stop)

    try:
        asyncio.run(main())
    except KafkaConnectionError as e:
        raise InputError("--bootstrap", [f"cannot reach Kafka: {e}"]) from None


def _initial_config(path: str | None, pool: str) -> bytes | None:
    """--config FILE (the pool.configured payload: gpus, gpus_per_node, horizon, ...) as a message."""
    if path is None:
        return None
    try:
        payload = PoolConfigured.model_validate(orjson.loads(read_text(path)))
    except orjson.JSONDecodeError as e:
        raise InputError(path, [f"not JSON: {e}"]) from None
    except ValidationError as e:
        raise InputError(path, describe(e)) from None
    message = envelope("pool.configured", payload, datetime.now(timezone.utc), f"{pool}:--config", pool)
    return orjson.dumps(message)


def cmd_agent(args: argparse.Namespace) -> int:
    from gpualloc.agent.service.kafka_loop import AgentService, AgentSettings

    settings = AgentSettings(args.bootstrap, args.pool, Topics.with_prefix(args.topic_prefix), args.step_seconds,
                             full_mode_every=args.full_mode_every, full_mode_time_limit=args.full_mode_time_limit,
                             initial_config=_initial_config(args.config, args.pool))
    service = AgentService(settings)
    _run_until_signal(service.run)
    s = service.stats
    print(f"agent stopped: {s.records} records, {s.decisions} decisions, {s.commits} commits, "
          f"{s.rejected} dead-lettered", file=sys.stderr)
    return EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    from gpualloc.agent.traces import read_trace_messages
    from gpualloc.agent.upstream import publish_trace

    events = read_trace_messages(args.trace)

    async def body(stop: asyncio.Event) -> None:
        task = asyncio.create_task(publish_trace(args.bootstrap, events, Topics.with_prefix(args.topic_prefix), args.step_seconds, args.complete))
        await asyncio.wait([task, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
        else:
            print(f"published {task.result()} events", file=sys.stderr)

    _run_until_signal(body)
    return EXIT_OK


def cmd_tail(args: argparse.Namespace) -> int:
    from gpualloc.agent.upstream import tail

    _run_until_signal(lambda stop: tail(args.bootstrap, Topics.with_prefix(args.topic_prefix), stop, args.from_beginning, sys.stdout))
    return EXIT_OK


def _checked(convert, ok, what: str):
    """An argparse type: `convert` the text, or an error naming the rule it breaks."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value
    return parse


_nonnegative_int = _checked(int, lambda v: v >= 0, "an integer >= 0")
_positive_float = _checked(float, lambda v: v > 0, "a number > 0")


def _bus_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="Kafka bootstrap servers")
    p.add_argument("--topic-prefix", default="", help="prefix for every topic name (isolated runs)")


def add_bus_commands(sub) -> None:
    from gpualloc.agent.node import kafka_loop as node_agent

    p = sub.add_parser("agent", help="run the allocation agent on Kafka (decisions per arrival, a commit per step)")
    _bus_arguments(p)
    p.add_argument("--pool", default="default", help="the pool this agent plans (default: default)")
    p.add_argument("--config", help="JSON file of pool.configured fields to start with (else wait for the topic)")
    p.add_argument("--step-seconds", type=_positive_float, help="compressed clock: seconds per step (default: step_minutes)")
    p.add_argument("--full-mode-every", type=_nonnegative_int, default=1, help="steps between full-mode runs (0: off; default 1)")
    p.add_argument("--full-mode-time-limit", type=_positive_float, help="seconds per full-mode run (default: half a step, at most 60)")
    p.set_defaults(func=cmd_agent)

    node_agent.add_parser(sub)

    p = sub.add_parser("publish", help="publish a trace of contract events to their topics")
    p.add_argument("trace", help="JSONL file of contract events (see `gpualloc trace`)")
    _bus_arguments(p)
    p.add_argument("--step-seconds", type=_positive_float, help="pace the trace on a compressed clock, stamping send times")
    p.add_argument("--complete", action="store_true", help="also play the platform: complete each job its actual duration after it starts")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("tail", help="print decisions, commits, bindings and dead letters as readable lines")
    _bus_arguments(p)
    p.add_argument("--from-beginning", action="store_true")
    p.set_defaults(func=cmd_tail)
