"""The bus commands: agent, node-agent, publish, tail, audit, status and explain. Each runs
until it is done or SIGTERM/SIGINT arrives, then closes its Kafka clients cleanly
(`running.run_until_signal`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from datetime import datetime, timezone

import orjson
from pydantic import ValidationError

from gpualloc.agent import logs
from gpualloc.agent.cli.arguments import (
    bootstrap_of,
    bus_arguments,
    gpu_range,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    setting,
    settings_of,
)
from gpualloc.agent.cli.running import run_until_signal
from gpualloc.agent.loading import InputError, read_text
from gpualloc.agent.service.held import PortTaken
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics
from gpualloc.client import message_near_misses
from gpualloc.schemas.errors import describe, near_misses
from gpualloc.schemas.events import PoolConfigured, envelope
from gpualloc.solvers.policies import online_policy
from gpualloc.solvers.release import NewerRelease, heuristic_implementation, release, release_words

EXIT_OK, EXIT_FAILED = 0, 1


def _initial_config(path: str | None, pool: str) -> bytes | None:
    """--config FILE (the pool.configured payload: gpus, gpus_per_node, horizon, ...) as a message."""
    if path is None:
        return None
    try:
        value = orjson.loads(read_text(path))
    except orjson.JSONDecodeError as e:
        raise InputError(path, [f"not JSON: {e}"]) from None
    misspelt = near_misses(PoolConfigured, value)
    if misspelt:
        raise InputError(path, misspelt)
    try:
        payload = PoolConfigured.model_validate(value)
    except ValidationError as e:
        raise InputError(path, describe(e)) from None
    message = envelope("pool.configured", payload, datetime.now(timezone.utc), f"{pool}:--config", pool)
    return orjson.dumps(message)


def _log_arguments(p: argparse.ArgumentParser) -> None:
    setting(p, "--log-level", path="log.level", choices=("debug", "info", "warning", "error"), help="log level")
    setting(
        p,
        "--log-format",
        path="log.format",
        choices=("auto", "json", "console"),
        help="log lines: JSON objects, console text, or auto (console on a terminal)",
    )


def cmd_agent(args: argparse.Namespace) -> int:
    from gpualloc.agent.service.agent_service import AgentService
    from gpualloc.agent.service.group import GroupAgent

    settings = settings_of(args)
    try:
        online_policy(settings.agent.policy)
    except ValueError as e:
        raise InputError("--policy", [str(e)]) from None
    bootstrap = bootstrap_of(settings)
    topics = Topics.with_prefix(settings.topic_prefix)
    service: AgentService | GroupAgent
    if settings.agent.group:
        if args.config:
            raise InputError(
                "--config", [f"configures one pool; the pools of a --group are configured on the {topics.config} topic"]
            )
        service = GroupAgent(bootstrap, settings.agent, topics)
    else:
        service = AgentService(
            bootstrap, settings.agent, topics, settings.pool, initial_config=_initial_config(args.config, settings.pool)
        )
    logs.configure(settings.log.level, settings.log.format)
    log = logging.getLogger("gpualloc.agent")
    pool = settings.pool if not settings.agent.group else None
    log.info("%s", release_words(), extra={"release": release(), "pool": pool})
    if heuristic_implementation() == "python":
        log.warning(
            "the heuristic runs as the Python reference, 16-60x slower than the compiled one: decisions and "
            "boundaries miss their latency targets at scale (`make native` builds it; it needs cargo)",
            extra={"pool": pool},
        )
    try:
        run_until_signal(service.run, bootstrap)
    except NewerRelease as e:  # its records mean what this release cannot know: refused, untouched
        raise InputError(f"pool {settings.pool}", [str(e)]) from None
    except PortTaken as e:  # another agent of the pool on this host, or another server on its port
        raise InputError("agent", [str(e)]) from None
    s = service.stats
    log.info(
        "agent stopped: %d records, %d decisions, %d commits, %d dead-lettered",
        s.records,
        s.decisions,
        s.commits,
        s.rejected,
        extra={
            "records": s.records,
            "decisions": s.decisions,
            "commits": s.commits,
            "dead_lettered": s.rejected,
            "pool": pool,
        },
    )
    return EXIT_OK


def cmd_node_agent(args: argparse.Namespace) -> int:
    """Bind this node's GPUs until SIGTERM or SIGINT."""
    from gpualloc.agent.node.binders import Binder, FileBinder, HookBinder
    from gpualloc.agent.node.node_agent import NodeAgent

    if not args.bind_dir and not args.hook:
        raise InputError("node-agent", ["give --bind-dir DIR, --hook CMD [ARG ...], or both"])
    settings = settings_of(args)
    bootstrap = bootstrap_of(settings)
    binder: Binder = HookBinder(args.hook, state_dir=args.bind_dir) if args.hook else FileBinder(args.bind_dir)
    if args.hook and not args.bind_dir:
        print(
            "gpualloc: node-agent: note: without --bind-dir the hook's record is in memory only; "
            "a restart cannot release what it bound before",
            file=sys.stderr,
        )
    logs.configure(settings.log.level, settings.log.format)
    agent = NodeAgent(
        bootstrap,
        args.node,
        args.gpus,
        binder,
        pool=settings.pool,
        topics=Topics.with_prefix(settings.topic_prefix),
        settings=settings.node_agent,
    )
    run_until_signal(agent.run, bootstrap)
    return EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    from gpualloc.agent.operator.publish import publish_trace
    from gpualloc.agent.traces import read_trace_messages

    settings = settings_of(args)
    bootstrap = bootstrap_of(settings)
    events = read_trace_messages(args.trace)
    misspelt = [f"event {k}: {line}" for k, e in enumerate(events) for line in message_near_misses(e)]
    if misspelt:
        raise InputError(args.trace, misspelt)

    async def body(stop: asyncio.Event) -> None:
        task = asyncio.create_task(
            publish_trace(
                bootstrap, events, Topics.with_prefix(settings.topic_prefix), args.step_seconds, args.complete
            )
        )
        await asyncio.wait([task, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
        else:
            print(f"published {task.result()} events", file=sys.stderr)

    run_until_signal(body, bootstrap)
    return EXIT_OK


def cmd_tail(args: argparse.Namespace) -> int:
    from gpualloc.agent.operator.tail import tail

    settings = settings_of(args)
    bootstrap = bootstrap_of(settings)
    topics = Topics.with_prefix(settings.topic_prefix)
    run_until_signal(
        lambda stop: tail(bootstrap, topics, stop, args.from_beginning, sys.stdout, args.json, args.job), bootstrap
    )
    return EXIT_OK


def _step_or_time(text: str) -> int | datetime:
    """`--from`/`--to`: a step number or an ISO time with its zone."""
    try:
        return nonnegative_int(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a step number or an ISO time, got {text!r}") from None
    if at.tzinfo is None:
        raise argparse.ArgumentTypeError(f"must name its time zone (e.g. {text}Z), got {text!r}")
    return at


def cmd_audit(args: argparse.Namespace) -> int:
    from gpualloc.agent.operator.audit import Bounds, audit

    settings = settings_of(args)
    bootstrap = bootstrap_of(settings)
    result = None

    async def body(stop: asyncio.Event) -> None:
        nonlocal result
        result = await audit(
            bootstrap, Topics.with_prefix(settings.topic_prefix), settings.pool, Bounds(args.first, args.last)
        )

    run_until_signal(body, bootstrap)
    if result is None:
        return EXIT_FAILED
    if args.json:
        sys.stdout.write(orjson.dumps(result.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print("\n".join(result.lines()))
    return EXIT_OK if result.ok else EXIT_FAILED


def cmd_explain(args: argparse.Namespace) -> int:
    from gpualloc.agent.operator.explain import explain_app_lines, explain_lines, history_of, is_app
    from gpualloc.agent.operator.status import read_status

    settings = settings_of(args)
    bootstrap = bootstrap_of(settings)
    topics = Topics.with_prefix(settings.topic_prefix)
    messages: list = []
    found: list = []

    async def body(stop: asyncio.Event) -> None:
        messages.extend(await history_of(bootstrap, topics, settings.pool, args.job))
        if is_app(args.job, messages):  # what the live pool holds of it, as `status` says
            found.append(await read_status(bootstrap, topics, settings.pool, listed=0))

    run_until_signal(body, bootstrap)
    if found:
        row = next((a for a in (found[0] or {}).get("apps", ()) if a["id"] == args.job), None)
        lines = explain_app_lines(args.job, messages, row)
    else:
        lines = explain_lines(args.job, messages)
    if not lines:
        raise InputError(args.job, [f"no job or app of pool {settings.pool!r} by this id on the bus"])
    print("\n".join(lines))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from gpualloc.agent.operator.status import LISTED, SHOWN, lines, read_status

    settings = settings_of(args)
    bootstrap = bootstrap_of(settings)
    found: list = []

    async def body(stop: asyncio.Event) -> None:
        found.append(
            await read_status(
                bootstrap,
                Topics.with_prefix(settings.topic_prefix),
                settings.pool,
                args.width,
                args.gpus,
                None if args.all else LISTED,
            )
        )

    run_until_signal(body, bootstrap)
    if not found:  # stopped by a signal before the bus was read
        return EXIT_FAILED
    if found[0] is None:
        return _no_pool(bootstrap, Topics.with_prefix(settings.topic_prefix), settings.pool)
    if args.json:
        sys.stdout.write(orjson.dumps(found[0], option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print("\n".join(lines(found[0], None if args.all else SHOWN)))
    return EXIT_FAILED if found[0]["stalled"] else EXIT_OK


def _gpu_range(text: str) -> tuple[int, int]:
    """`A-B` (or `A`): GPUs A to B, both included, as [A, B + 1)."""
    first, _, last = text.partition("-")
    try:
        lo, hi = int(first), int(last or first)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: must be A-B, GPU indices with A <= B (e.g. 0-63)") from None
    if not 0 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"{text!r}: must be A-B, GPU indices with 0 <= A <= B (e.g. 0-63)")
    return lo, hi + 1


def _no_pool(bootstrap: Broker, topics: Topics, pool: str) -> int:
    """`status` of a pool no transaction of whose agent is on the bus: stalled when inputs for it
    are (exit 1), else bad input (no such pool)."""
    from gpualloc.agent.operator.audit import stalled_line, waiting_inputs

    waiting: list[int] = []

    async def body(stop: asyncio.Event) -> None:
        waiting.append(await waiting_inputs(bootstrap, topics, pool))

    run_until_signal(body, bootstrap)
    if waiting and waiting[0]:
        print(stalled_line(pool, waiting[0]), file=sys.stderr)
        return EXIT_FAILED
    raise InputError("--pool", [f"no pool {pool!r} on the bus (its agent has recorded no transaction)"])


def add_bus_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agent", help="run the allocation agent on Kafka (decisions per arrival, a commit per step)")
    bus_arguments(p)
    _log_arguments(p)
    setting(
        p,
        "--metrics-port",
        path="agent.metrics_port",
        type=nonnegative_int,
        shown="off",
        help="serve /metrics, /healthz and /readyz on this port (with --group: every pool it runs)",
    )
    p.add_argument(
        "--config",
        help="JSON file of pool.configured fields to start with (else wait for the topic); "
        "a pool restored from the bus keeps its configuration",
    )
    setting(
        p,
        "--group",
        path="agent.group",
        metavar="NAME",
        help="share the pools with the other agents of this consumer group (found on the bus; --pool is "
        "not used; the input topics must be keyed by pool)",
    )
    setting(
        p,
        "--member",
        path="agent.member",
        metavar="NAME",
        help="static membership in --group: restarted under the same name, it keeps its pools without a rebalance",
    )
    setting(
        p,
        "--partitions",
        path="agent.partitions",
        type=positive_int,
        help="partitions of the topics the agent creates (the most agents a --group can spread its pools over)",
    )
    setting(
        p,
        "--step-seconds",
        path="agent.step_seconds",
        type=positive_float,
        shown="the pool's step_minutes",
        help="compressed clock: seconds per step",
    )
    setting(p, "--policy", path="agent.policy", help="the online policy: HOT or HOT+FULL, registered names")
    setting(
        p,
        "--full-mode-every",
        path="agent.full_mode.every",
        type=nonnegative_int,
        help="steps between full-mode solves (0: off)",
    )
    setting(
        p,
        "--full-mode-time-limit",
        path="agent.full_mode.options.time_limit",
        type=positive_float,
        shown="half a step, at most agent.full_mode_time_cap",
        help="seconds per full-mode solve",
    )
    setting(
        p,
        "--full-mode-jobs",
        path="agent.full_mode.max_jobs",
        type=positive_int,
        help="queued jobs full mode plans (the most valuable)",
    )
    p.set_defaults(func=cmd_agent)

    p = sub.add_parser(
        "node-agent",
        help="bind this node's GPUs as the agent's decisions and commits say",
        description="Follow the pool's decisions and commits on Kafka and bind/release this "
        "node's GPUs through env files (--bind-dir) and/or a hook command (--hook).",
    )
    p.add_argument(
        "--node", type=nonnegative_int, required=True, help="this node's id (the key of its binding reports)"
    )
    p.add_argument(
        "--gpus",
        type=gpu_range,
        required=True,
        metavar="FIRST-LAST",
        help="this node's pool-global GPU indices, inclusive (e.g. 8-15 for node 1 of 8-GPU nodes)",
    )
    bus_arguments(p)
    _log_arguments(p)
    setting(
        p,
        "--metrics-port",
        path="node_agent.metrics_port",
        type=nonnegative_int,
        shown="off",
        help="serve /metrics, /healthz and /readyz on this port",
    )
    setting(
        p,
        "--heartbeat-seconds",
        path="node_agent.heartbeat_s",
        type=nonnegative_float,
        help="send node.heartbeat this often (the agent places new work only on nodes it hears; "
        "0: none, for a pool only some of whose nodes run a node agent)",
    )
    p.add_argument("--bind-dir", metavar="DIR", help="one env file per bound job (with --hook: the hook's record)")
    p.add_argument(
        "--hook",
        nargs="+",
        metavar=("CMD", "ARG"),
        help="run CMD [ARG ...] bind JOB LOCAL_IDS / release JOB (no shell)",
    )
    p.set_defaults(func=cmd_node_agent)

    p = sub.add_parser("publish", help="publish a trace of contract events to their topics")
    p.add_argument("trace", help="JSONL file of contract events (see `gpualloc trace`)")
    bus_arguments(p, pool=False)
    p.add_argument(
        "--step-seconds", type=positive_float, help="pace the trace on a compressed clock, stamping send times"
    )
    p.add_argument(
        "--complete",
        action="store_true",
        help="also play the platform: complete each job its actual duration after it starts",
    )
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser(
        "tail",
        help="print decisions, commits, bindings, dead letters and operators' inputs as readable lines, "
        "each with its record's Kafka timestamp",
    )
    bus_arguments(p, pool=False)
    p.add_argument(
        "--from-beginning", action="store_true", help="from the topics' start, merged in time order, not their end"
    )
    p.add_argument("--json", action="store_true", help="each message as it was published, with its topic, a line")
    p.add_argument(
        "--job",
        metavar="ID",
        help="only what concerns this job or app: its decision, bindings, the "
        "commits that hold or start it, dead letters naming it",
    )
    p.set_defaults(func=cmd_tail)

    p = sub.add_parser("audit", help="replay a pool's ledger and check every decision and commit is reproduced")
    bus_arguments(p)
    p.add_argument(
        "--from",
        dest="first",
        type=_step_or_time,
        metavar="STEP|TIME",
        help="report from this step (or the step of this time) on",
    )
    p.add_argument("--to", dest="last", type=_step_or_time, metavar="STEP|TIME", help="report up to this step")
    p.add_argument("--json", action="store_true", help="print the result as JSON (mismatches, illegal steps, counts)")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser(
        "status",
        help="the live pool: the committed plan by node groups, running jobs, the queue "
        "with reasons and promised starts, apps' demand against what they hold, "
        "node health",
    )
    bus_arguments(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="the status as one JSON object (the first 1,000 running and queued jobs; under 2 MB)",
    )
    p.add_argument(
        "--all", action="store_true", help="every running and queued job (default: the first 20, --json 1,000)"
    )
    p.add_argument("--width", type=positive_int, default=48, help="steps of the plan shown (default 48)")
    p.add_argument(
        "--gpus",
        type=_gpu_range,
        metavar="A-B",
        help="also who holds each of GPUs A to B, step by step (default: the plan by groups of nodes only)",
    )
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "explain",
        help="a job's or an app's history and where it stands now (a waiting job: what holds its block; "
        "an app: its registration, observed need, holdings and forecast)",
    )
    p.add_argument("job", metavar="ID", help="the job or app id")
    bus_arguments(p)
    p.set_defaults(func=cmd_explain)
