"""The operator commands: drain, undrain, node-down, cancel, fail, complete, configure, resize,
register-app and submit. Each validates its event as `gpualloc.client` does (bad input exits 2
with one line naming the field and the rule), publishes it through a `Client` (idempotent,
acks=all) and prints one line: the event type, what it is about, the pool,
topic:partition:offset and the event id (`--json`: the whole message, with where it landed).
`configure`, `resize` and `register-app` first take their event on a copy of the live pool, as
the agent will (`operate.taken`): one the agent would refuse exits 2 unpublished; what a
configuration changes is printed, and one that would fail running or queued work without
`--force` exits 2 unpublished. `submit`
exits 4 when the agent's decision is `rejected` (module `gpualloc.agent.cli` lists every code)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

import orjson
from pydantic import BaseModel

from gpualloc.agent.cli.arguments import bootstrap_of, bus_arguments, positive_float, settings_of
from gpualloc.agent.cli.running import run_until_signal
from gpualloc.agent.loading import InputError, read_text
from gpualloc.agent.operator.operate import (
    changes,
    check_node,
    latest_config,
    live_pool,
    published,
    reconfigured,
    taken,
)
from gpualloc.agent.operator.tail import line
from gpualloc.bus.topics import Topics
from gpualloc.client import Client, Rejected, validated
from gpualloc.schemas.events import AppRegistered, JobSubmitted, PoolConfigured
from gpualloc.schemas.published import AllocationDecided

EXIT_OK, EXIT_UNANSWERED, EXIT_REJECTED = 0, 1, 4  # and 2, bad input or a dead letter (`InputError`)
# the set-up window `configure` writes when neither the file nor --setup-seconds gives one: long
# enough for a platform's apps and backlog sent with the configuration to reach the agent, short
# enough that nothing waits noticeably for its first start (docs/operations.md, "Setting a pool up")
SETUP_SECONDS = 5.0

Act = Callable[[Client], Awaitable[str]]  # publishes one event through the client; returns what it is about


def _publish(args: argparse.Namespace, act: Act) -> None:
    """Run `act` on a started client of the configured pool, then print what it published."""
    settings = settings_of(args)
    bootstrap = bootstrap_of(settings)
    topics = Topics.with_prefix(settings.topic_prefix)

    async def body(stop: asyncio.Event) -> None:
        async with Client(bootstrap, settings.pool, topics, source="cli") as client:
            try:
                subject = await act(client)
            except ValueError as e:
                raise InputError(args.command, [str(e)]) from None
            sent = client.last_sent
        if sent is None:  # a submission that found no agent to answer it was not sent
            return
        if args.json:
            where = {"topic": sent.topic, "partition": sent.partition, "offset": sent.offset}
            print(orjson.dumps({**sent.message, **where}).decode())
        else:
            print(published(sent, subject))

    run_until_signal(body, bootstrap)


def _json_object(path: str, what: str) -> dict[str, Any]:
    """A JSON object from file `path` (`-`: stdin)."""
    text = sys.stdin.read() if path == "-" else read_text(path)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise InputError(path, [f"not JSON: {e}"]) from None
    if not isinstance(value, dict):
        raise InputError(path, [f"(document): must be a JSON object ({what})"])
    return value


def cmd_node(args: argparse.Namespace) -> int:
    state = {"drain": "drained", "undrain": "up", "node-down": "down"}[args.command]

    async def act(client: Client) -> str:
        config = await latest_config(client.bootstrap, client.topics, client.pool)
        if config is None:
            print(
                f"gpualloc: {args.command}: note: pool {client.pool!r} has no pool.configured on "
                f"{client.topics.config}: node {args.node} unchecked (the agent dead-letters a node outside "
                "the pool; `gpualloc tail` shows it)",
                file=sys.stderr,
            )
        check_node(args.node, config, client.pool)
        await client.node_status(args.node, state, args.detail)
        return f"node {args.node} {state}"

    _publish(args, act)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    async def act(client: Client) -> str:
        await client.cancel(args.job, args.detail)
        return args.job

    _publish(args, act)
    return EXIT_OK


def cmd_fail(args: argparse.Namespace) -> int:
    async def act(client: Client) -> str:
        await client.fail(args.job, args.detail, reason=args.reason)
        return f"{args.job} ({args.reason})" if args.reason else args.job

    _publish(args, act)
    return EXIT_OK


def cmd_complete(args: argparse.Namespace) -> int:
    usage = {"gpus": args.gpus, "peak_memory_gb": args.peak_memory_gb, "steps": args.steps, "duration": args.duration}
    given = {name: value for name, value in usage.items() if value is not None}

    async def act(client: Client) -> str:
        await client.complete(args.job, given or None, args.detail)
        return args.job

    _publish(args, act)
    return EXIT_OK


def cmd_resize(args: argparse.Namespace) -> int:
    async def act(client: Client) -> str:
        latest = await latest_config(client.bootstrap, client.topics, client.pool)
        if latest is None:
            raise ValueError(
                f"gpus: pool {client.pool!r} has no pool.configured on {client.topics.config} to resize "
                "(an agent started with --config keeps it off the topic: publish the whole configuration)"
            )
        config = {**latest.model_dump(exclude_unset=True), "gpus": args.gpus}
        subject = await _reconfiguration(client, args, config, latest)
        await client.configure(config)
        return subject

    _publish(args, act)
    return EXIT_OK


async def _reconfiguration(
    client: Client, args: argparse.Namespace, config: dict[str, Any], latest: PoolConfigured | None
) -> str:
    """What `config` changes of the live pool, as the printed line names it ("gpus 32 (was 40)"
    per setting it changes). Taken first on a copy of the live pool as the agent will take it
    (`reconfigured`): one the agent would refuse is refused here (ValueError: exit 2), and one that
    fails running jobs or drops queued ones is refused naming them, unless `--force` (then they
    are named on stderr). Without a live pool (no agent has taken a configuration yet), the
    changes are those from the latest `pool.configured` on the topic (`latest`), if any."""
    model = validated(PoolConfigured, config)
    pool = await live_pool(client.bootstrap, client.topics, client.pool)
    if pool is None:
        changed = () if latest is None else changes(latest.model_dump(), model.model_dump())
        return _changed_words(changed, model, latest is None)
    found = reconfigured(pool, model, datetime.now(timezone.utc))
    if found.failed and not args.force:
        raise InputError(
            args.command,
            [f"gpus: refused: it fails {_jobs(len(found.failed))} (give --force to publish it anyway):"]
            + [f"  {what}" for what in found.failed],
        )
    for what in found.failed:
        print(f"gpualloc: {args.command}: warning (--force): fails {what}", file=sys.stderr)
    return _changed_words(found.changes, model, False)


def _jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


def _changed_words(changed: tuple[str, ...], model: PoolConfigured, first: bool) -> str:
    """The line's subject: a first configuration's size and set-up window, else what changed."""
    if first:
        return f"gpus {model.gpus}, set-up window {model.setup_seconds or 0:g} s"
    return ", ".join(changed) or "nothing changed"


def _checked(model: type[BaseModel], value: dict[str, Any], source: str) -> None:
    """`value` refused before any broker is reached, as the client would refuse it (exit 2)."""
    try:
        validated(model, value)
    except ValueError as e:
        raise InputError(source, [str(e)]) from None


def cmd_configure(args: argparse.Namespace) -> int:
    config = {"setup_seconds": SETUP_SECONDS, **_json_object(args.config, "the pool.configured payload")}
    if args.setup_seconds is not None:
        config["setup_seconds"] = args.setup_seconds
    _checked(PoolConfigured, config, args.command)

    async def act(client: Client) -> str:
        latest = await latest_config(client.bootstrap, client.topics, client.pool)
        subject = await _reconfiguration(client, args, config, latest)
        await client.configure(config)
        return subject

    _publish(args, act)
    return EXIT_OK


def _profile(text: str) -> list[Any]:
    """--profile: 24 comma-separated counts, or a file holding a JSON list of them."""
    if "," in text:
        return [_int(part.strip()) for part in text.split(",")]
    try:
        value = orjson.loads(read_text(text))
    except orjson.JSONDecodeError as e:
        raise InputError(text, [f"not JSON: {e}"]) from None
    if not isinstance(value, list):
        raise InputError(text, ["profile: must be a JSON list of 24 GPU counts"])
    return value


def _int(text: str) -> int | str:
    """An integer where the text is one; else the text, for the contract to name."""
    try:
        return int(text)
    except ValueError:
        return text


def cmd_register_app(args: argparse.Namespace) -> int:
    if (args.app is None) == (args.file is None):
        raise InputError("register-app", ["give an app ID with --priority, or --file FILE (the whole app)"])
    flags = (args.priority, args.min_gpus, args.max_gpus, args.swap_cap, args.rps_per_gpu, args.profile)
    if args.file is not None:
        if any(flag is not None for flag in flags):
            raise InputError("register-app", ["--file: holds the whole app; give its fields there, not as flags"])
        app = _json_object(args.file, "the app.registered payload")
    else:
        if args.priority is None:
            raise InputError("register-app", ["priority: give --priority P (a weight > 0)"])
        fields = {
            "id": args.app,
            "priority": args.priority,
            "min_gpus": args.min_gpus,
            "max_gpus": args.max_gpus,
            "swap_cap": args.swap_cap,
            "rps_per_gpu": args.rps_per_gpu,
            "profile": None if args.profile is None else _profile(args.profile),
        }
        app = {name: value for name, value in fields.items() if value is not None}
    _checked(AppRegistered, app, args.command)

    async def act(client: Client) -> str:
        pool = await live_pool(client.bootstrap, client.topics, client.pool)
        if pool is not None:  # refused here what the live pool's agent would dead-letter
            taken(pool, "app.registered", validated(AppRegistered, app), datetime.now(timezone.utc))
        await client.register_app(app)
        return str(app.get("id"))

    _publish(args, act)
    return EXIT_OK


def cmd_submit(args: argparse.Namespace) -> int:
    job = _json_object(args.job, "the job.submitted payload")
    _checked(JobSubmitted, job, args.command)
    answer: list[AllocationDecided | BaseException] = []

    async def act(client: Client) -> str:
        try:
            decision = await client.submit_job(job, wait=not args.no_wait, timeout=args.timeout)
            if decision is not None:
                answer.append(decision)
        except (Rejected, TimeoutError) as e:
            answer.append(e)
        return str(job.get("id"))

    _publish(args, act)
    if not answer:
        return EXIT_OK
    if isinstance(answer[0], Rejected):
        raise InputError("submit", [f"dead-lettered by the agent: {answer[0].reason}"])
    if isinstance(answer[0], BaseException):
        print(f"gpualloc: submit: {answer[0]}", file=sys.stderr)
        return EXIT_UNANSWERED
    decision = answer[0]
    decided = {"type": "allocation.decided", "payload": decision.model_dump(mode="json")}
    print(orjson.dumps(decided).decode() if args.json else line(decided, ""))
    if decision.action == "rejected":
        print(f"gpualloc: submit: job {decision.job_id!r} rejected: {decision.reason}", file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK


def _common(p: argparse.ArgumentParser) -> None:
    bus_arguments(p)
    p.add_argument("--json", action="store_true", help="print the whole message published, and where it landed")


def _force(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="publish it even though it fails running jobs or drops queued ones (they are named on stderr)",
    )


def add_operator_commands(sub: argparse._SubParsersAction) -> None:
    for name, state, what in (
        ("drain", "drained", "drain a node: no new work is placed on it, running work goes on"),
        ("undrain", "up", "bring a drained or down node back: it takes work again"),
        ("node-down", "down", "take a node out: its GPUs leave the pool, its running jobs fail (re-queued)"),
    ):
        p = sub.add_parser(name, help=f"{what} (node.status {state})")
        p.add_argument("node", metavar="NODE", type=int, help="the node's index: GPUs NODE x gpus_per_node onwards")
        p.add_argument("--detail", default="", help="why, for the people reading the pool later")
        _common(p)
        p.set_defaults(func=cmd_node)

    p = sub.add_parser("cancel", help="cancel a job: it leaves the queue, or its GPUs are released (job.cancelled)")
    p.add_argument("job", metavar="JOB", help="the job's id")
    p.add_argument("--detail", default="", help="why, for the people reading the pool later")
    _common(p)
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("fail", help="report a job failed: its GPUs are released, it is re-queued (job.failed)")
    p.add_argument("job", metavar="JOB", help="the job's id")
    p.add_argument(
        "--reason",
        metavar="REASON",
        help="out_of_memory (the pool sizes a job it sized larger), error (re-queued as it was) or time_limit "
        "(ended at a limit of your platform's own: not re-queued); none: as error",
    )
    p.add_argument("--detail", default="", help="what happened (e.g. the error's last line)")
    _common(p)
    p.set_defaults(func=cmd_fail)

    p = sub.add_parser(
        "complete", help="report a job done, with what it used when known: its GPUs are released (job.completed)"
    )
    p.add_argument("job", metavar="JOB", help="the job's id")
    p.add_argument("--gpus", type=int, metavar="N", help="GPUs it ran on")
    p.add_argument("--peak-memory-gb", type=float, metavar="X", help="its peak memory a GPU, GiB")
    p.add_argument("--steps", type=int, metavar="N", help="optimizer or calibration steps it ran")
    p.add_argument("--duration", type=int, metavar="N", help="pool steps it ran")
    p.add_argument("--detail", default="", help="a note for the people reading the pool later")
    _common(p)
    p.set_defaults(func=cmd_complete)

    p = sub.add_parser(
        "configure", help="configure the pool, or reconfigure it: its whole configuration (pool.configured)"
    )
    p.add_argument(
        "config", metavar="FILE", help="the pool.configured payload, JSON (-: stdin): gpus, gpus_per_node, ..."
    )
    p.add_argument(
        "--setup-seconds",
        type=float,
        metavar="S",
        help=f"the pool's set-up window, over the file's setup_seconds (default: the file's, else {SETUP_SECONDS:g}; "
        "0: none): no job starts before it closes, so apps sent with the backlog keep their floors",
    )
    _force(p)
    _common(p)
    p.set_defaults(func=cmd_configure)

    p = sub.add_parser(
        "resize",
        help="resize the pool: its latest pool.configured on the bus again, with GPUS (drain the nodes that leave first)",
    )
    p.add_argument("gpus", metavar="GPUS", type=int, help="the pool's new size: a multiple of gpus_per_node")
    _force(p)
    _common(p)
    p.set_defaults(func=cmd_resize)

    p = sub.add_parser(
        "register-app", help="register a real-time app, or change its priority and bounds (app.registered)"
    )
    p.add_argument("app", metavar="ID", nargs="?", help="the app's id (or give --file)")
    p.add_argument("--file", metavar="FILE", help="the whole app.registered payload, JSON (-: stdin)")
    p.add_argument("--priority", type=float, metavar="P", help="its weight against the jobs' (> 0)")
    p.add_argument("--min-gpus", type=int, metavar="N", help="GPUs it always keeps (default 0)")
    p.add_argument("--max-gpus", type=int, metavar="N", help="GPUs it is given at most (default: the pool)")
    p.add_argument(
        "--swap-cap", type=int, metavar="N", help="GPUs its set may change by in a step (default: the pool's)"
    )
    p.add_argument("--rps-per-gpu", type=float, metavar="X", help="requests a second one GPU serves (default 1)")
    p.add_argument(
        "--profile",
        metavar="LIST|FILE",
        help="GPUs it needs at each hour of the day: 24 comma-separated counts, or a file of a JSON list",
    )
    _common(p)
    p.set_defaults(func=cmd_register_app)

    p = sub.add_parser(
        "submit", help="submit a job and print the agent's decision (job.submitted); exit 4 when it is rejected"
    )
    p.add_argument("job", metavar="FILE", help="the job.submitted payload, JSON (-: stdin)")
    p.add_argument(
        "--no-wait", action="store_true", help="publish only: do not wait for the decision (exit 0 once published)"
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="seconds to wait for the decision (default 30; none in time: exit 1)",
    )
    _common(p)
    p.set_defaults(func=cmd_submit)
