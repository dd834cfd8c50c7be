"""Topic administration: the bus's topics created as the agent needs them, and partition counts
read once every partition has a leader."""

from __future__ import annotations

import asyncio

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from gpualloc.agent.bus import clients
from gpualloc.agent.bus.clients import Broker
from gpualloc.agent.bus.topics import Topics

LEADER_WAIT_S = 15.0


async def ensure_topics(bootstrap: Broker | str, topics: Topics, partitions: int, retention_ms: int) -> dict[str, int]:
    """Create the bus's topics that do not exist yet, all with `partitions` partitions (a pool's
    records share one partition number on every input topic): the state topic compacted, the
    ledger and the inputs kept `retention_ms` (-1: forever), as long as audits and recovery must
    reach back. Returns every bus topic's partition count."""
    admin = await clients.started(clients.admin(bootstrap), "agent admin")
    try:
        existing = set(await admin.list_topics())
        kept = {"retention.ms": str(retention_ms)}
        wanted = [NewTopic(topics.state, partitions, 1, topic_configs={"cleanup.policy": "compact"})]
        wanted += [NewTopic(name, partitions, 1, topic_configs=kept) for name in (topics.ledger, *topics.inputs)]
        wanted += [NewTopic(name, partitions, 1) for name in (topics.decisions, topics.commits, topics.deadletter)]
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:  # another agent made them meanwhile
                pass
        return await _led(admin, [t.name for t in wanted])
    finally:
        await admin.close()


async def partition_counts(bootstrap: Broker | str, names: list[str]) -> dict[str, int]:
    """How many partitions each existing topic of `names` has (absent ones are left out)."""
    admin = await clients.started(clients.admin(bootstrap), "admin")
    try:
        return await _counts(admin, names)
    finally:
        await admin.close()


async def _counts(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    described = await admin.describe_topics(names)
    return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0 and t["partitions"]}


async def _led(admin: AIOKafkaAdminClient, names: list[str], seconds: float = LEADER_WAIT_S) -> dict[str, int]:
    """Partition counts once every partition of `names` has a leader: a topic created a moment
    ago answers reads and writes with NotLeaderForPartition until then."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        described = await admin.describe_topics(names)
        ready = all(
            t["error_code"] == 0 and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"])
            for t in described
        )
        if ready or asyncio.get_running_loop().time() > deadline:
            return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0 and t["partitions"]}
        await asyncio.sleep(0.1)
