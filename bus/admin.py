"""Topic administration: the bus's topics created as the agent needs them, replicated as the
cluster it runs against allows, and partition counts read once every partition has a leader."""

from __future__ import annotations

import asyncio
import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from gpualloc.bus import clients
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics
from gpualloc.schemas.settings import AgentSettings

log = logging.getLogger("gpualloc.agent")

LEADER_WAIT_S = 15.0


async def ensure_topics(
    bootstrap: Broker | str,
    topics: Topics,
    partitions: int,
    retention_ms: int,
    replication_factor: int = AgentSettings().replication_factor,
    min_insync_replicas: int = AgentSettings().min_insync_replicas,
) -> dict[str, int]:
    """Create the bus's topics that do not exist yet, all with `partitions` partitions (a pool's
    records share one partition number on every input topic): the state topic compacted, the
    ledger and the inputs kept `retention_ms` (-1: forever), as long as audits and recovery must
    reach back; each with `replication_factor` replicas (at most one per broker), taking acks=all
    writes while `min_insync_replicas` of them (at most all) are in sync (`replicas`). Returns
    every bus topic's partition count."""
    admin = await clients.started(clients.admin(bootstrap), "agent admin")
    try:
        existing = set(await admin.list_topics())
        brokers = len((await admin.describe_cluster())["brokers"])
        factor, in_sync = replicas(replication_factor, min_insync_replicas, brokers)
        kept = {"retention.ms": str(retention_ms)}
        durable = {"min.insync.replicas": str(in_sync)}
        wanted = [NewTopic(topics.state, partitions, factor, topic_configs={**durable, "cleanup.policy": "compact"})]
        wanted += [
            NewTopic(t, partitions, factor, topic_configs={**durable, **kept}) for t in (topics.ledger, *topics.inputs)
        ]
        wanted += [
            NewTopic(t, partitions, factor, topic_configs=durable)
            for t in (topics.decisions, topics.commits, topics.deadletter)
        ]
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            log.info(
                "creating %d topics: replication factor %d, min.insync.replicas %d (%d brokers)",
                len(missing),
                factor,
                in_sync,
                brokers,
            )
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:  # another agent made them meanwhile
                pass
        return await _led(admin, [t.name for t in wanted])
    finally:
        await admin.close()


def replicas(replication_factor: int, min_insync_replicas: int, brokers: int) -> tuple[int, int]:
    """The replication factor and min.insync.replicas a topic can have on `brokers` brokers: no
    more replicas than brokers, no more in sync required than replicas (on one broker: 1 and 1,
    so acks=all writes never wait for replicas that cannot exist)."""
    factor = max(1, min(replication_factor, brokers))
    return factor, min(min_insync_replicas, factor)


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
