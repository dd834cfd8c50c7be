"""The operator's verbs (`gpualloc drain`, `cancel`, `fail`, `resize`, ...): what they read of a
pool before they publish, and the line they print. Each verb publishes one contract event
through a `gpualloc.client.Client`, which validates it as the agent would.

A pool's configuration is the latest `pool.configured` of the pool on the config topic, read from
the pool's partition of it (its configurations and node statuses, and those of pools sharing the
partition; one the agent refused counts too): what `resize` republishes with a new size, and
what node indices are checked against. An agent started with `--config` keeps its first configuration off the topic; without
one there, node indices go unchecked (the agent dead-letters one outside the pool) and `resize`
has nothing to resize.
"""

from __future__ import annotations

from aiokafka import TopicPartition

from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import read_range, reader
from gpualloc.bus.topics import Topics, decode, partition_of
from gpualloc.client import Sent
from gpualloc.schemas.events import PoolConfigured


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
