"""The operator's verbs (`gpualloc drain`, `cancel`, `fail`, `resize`, ...): what they read of a
pool before they publish, and the line they print. Each verb publishes one contract event
through a `gpualloc.client.Client`, which validates it as the agent would.

A pool's configuration is the latest `pool.configured` of the pool on the config topic, read from
the pool's partition of it (its configurations and node statuses, and those of pools sharing the
partition; one the agent refused counts too): what `resize` republishes with a new size, and
what node indices are checked against. An agent started with `--config` keeps its first configuration off the topic; without
one there, node indices go unchecked (the agent dead-letters one outside the pool) and `resize`
has nothing to resize.

A configuration or an app is judged against the live pool (`live_pool`: its latest snapshot and
the ledger after it, replayed as `gpualloc status` and a restarted agent do): a copy of it takes
the event as the agent will (`taken`), so the CLI refuses what the agent would dead-letter and,
for a configuration, names what it changes and the running jobs it would fail and the queued
jobs it would drop (`reconfigured`), before anything is published.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from aiokafka import TopicPartition
from pydantic import BaseModel

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.recovery import rebuild
from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import read_history, read_range, reader
from gpualloc.bus.topics import Topics, decode, partition_of
from gpualloc.client import Sent
from gpualloc.schemas.events import EventType, PoolConfigured
from gpualloc.solvers.planner.effects import Effect, Event, Failed, Rejected
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import SnapshotError
from gpualloc.solvers.problem import bits_of

# a configuration's history of time limits: how the planner keeps the default, not a setting
_HISTORY = ("previous_time_limit", "time_limit_since")


async def latest_config(bootstrap: Broker | str, topics: Topics, pool: str) -> PoolConfigured | None:
    """The latest valid `pool.configured` of `pool` on the config topic (None: none there)."""
    counts = await partition_counts(bootstrap, [topics.config])
    if not counts:
        return None
    home = TopicPartition(topics.config, partition_of(pool, counts[topics.config]))
    consumer = await clients.started(reader(bootstrap), "config reader")
    try:
        records = await read_range(consumer, {home: 0})
    finally:
        await consumer.stop()
    latest = None
    for r in records:
        try:
            message = decode(r.value) if r.value is not None else None
            if isinstance(message, dict) and message.get("type") == "pool.configured" and message.get("pool") == pool:
                latest = PoolConfigured.model_validate(message["payload"])
        except (ValueError, KeyError):  # not JSON, or a configuration the agent dead-letters
            continue
    return latest


def check_node(node: int, config: PoolConfigured | None, pool: str) -> None:
    """ValueError when `config` is known and has no node `node` (negative ones are the
    contract's to refuse)."""
    if config is None or node < 0:
        return
    size = config.gpus_per_node or config.gpus
    if node >= config.gpus // size:
        raise ValueError(
            f"node: must be a node of pool {pool!r}, 0 to {config.gpus // size - 1} "
            f"({config.gpus} GPUs in nodes of {size}; got {node})"
        )


def published(sent: Sent, subject: str) -> str:
    """One line for a published message: its type, what it is about, its pool, where it landed
    (topic:partition:offset) and its event id."""
    m = sent.message
    return (
        f"{m['type']} {subject}: pool {m['pool']}, {sent.topic}:{sent.partition}:{sent.offset}, event {m['event_id']}"
    )


async def live_pool(bootstrap: Broker | str, topics: Topics, pool: str) -> Pool | None:
    """The pool as its last committed transaction left it (its latest snapshot and the ledger
    after it, replayed through the planner; the whole ledger where this release cannot read the
    snapshot); None when the ledger has never seen the pool configured."""
    counts = await partition_counts(bootstrap, [topics.state, topics.ledger, *topics.inputs])
    if not counts.get(topics.ledger):
        return None
    consumer = await clients.started(reader(bootstrap), "pool reader")
    try:
        for use_snapshot in (True, False):
            history = await read_history(consumer, topics, counts, pool, use_snapshot)
            dispatcher = Dispatcher(pool, topics, Pool())
            try:
                rebuild(dispatcher, history)
                break
            except SnapshotError:
                continue
    finally:
        await clients.close(consumer)
    return dispatcher.interpreter if dispatcher.interpreter.planner is not None else None


@dataclass(frozen=True)
class Reconfigured:
    """What a new configuration does to a pool: each setting it changes ("gpus 32 (was 40)"),
    and the jobs it fails, "running job 'a' on GPUs 32-39: why" or "queued job 'b': why"."""

    changes: tuple[str, ...]
    failed: tuple[str, ...]


def reconfigured(pool: Pool, config: PoolConfigured, now: datetime) -> Reconfigured:
    """`config` taken as the agent takes it (`Pool.apply`, at `now`) by `pool`, a copy read for
    the purpose (it is changed); ValueError with the agent's reason where the agent would
    dead-letter it."""
    planner = pool.planner
    assert planner is not None  # `live_pool` returns configured pools only
    before, running = planner.config, {job_id: entry.mask for job_id, entry in planner.running.items()}
    effects = taken(pool, EventType.POOL_CONFIGURED, config, now)
    failed = tuple(
        f"running job {e.job_id!r} on GPUs {_span(running[e.job_id])}: {e.detail}"
        if e.job_id in running
        else f"queued job {e.job_id!r}: {e.detail}"
        for e in effects
        if isinstance(e, Failed)
    )
    after = {k: v for k, v in asdict(planner.config).items() if k not in _HISTORY}
    return Reconfigured(changes({k: v for k, v in asdict(before).items() if k not in _HISTORY}, after), failed)


def taken(pool: Pool, type: str, payload: BaseModel, now: datetime) -> list[Effect]:
    """What `payload` (an input event of `type`) does to `pool`, a copy read for the purpose (it
    is changed), taken as the agent takes it (`Pool.apply`, at `now`); ValueError with the
    agent's reason where the agent would dead-letter it."""
    effects = pool.apply([Event(type, payload, now)], now)
    refused = [e.reason for e in effects if isinstance(e, Rejected)]
    if refused:
        raise ValueError("; ".join(refused))
    return effects


def changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, ...]:
    """Each setting whose value `after` changes from `before`, as "name new (was old)"; the
    unchanged ones are not named."""
    return tuple(
        f"{name} {_value(value)} (was {_value(before.get(name))})"
        for name, value in after.items()
        if value != before.get(name)
    )


def _value(value: object) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _span(mask: int) -> str:
    gpus = list(bits_of(mask))
    return f"{gpus[0]}-{gpus[-1]}" if len(gpus) > 1 else str(gpus[0])
