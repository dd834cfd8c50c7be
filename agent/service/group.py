"""Pools shared among agent processes: one consumer group, one owner per pool.

The input topics are keyed by pool and have one partition count, so all of a pool's records
share one partition number `i` on every input topic. The members of the consumer group
`settings.group` split the input partitions with Kafka's range assignor, which hands one member
partition `i` of every input topic (equal counts give equal ranges): that member owns every pool
of partition `i` and runs an `AgentService` for each, reading partition `i` under the pool's own
transactional id. A rebalance that takes partition `i` away stops those pools (each ends its
pass and closes its producer); the new owner restores them from their snapshots and ledgers, and
its producers fence any old owner that has not stopped yet (one killed before its session ended,
or one still ending its pass).

This member's own consumer only watches its partitions: a `pool.configured` of a pool not running
yet starts it (snapshots on the state topic name the pools that were running before), and a
record whose key cannot be its pool (none, or one that lands on another partition) is
dead-lettered, since no pool's agent would ever read it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, fields
from datetime import datetime, timezone

from aiokafka import AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from prometheus_client import CollectorRegistry

from gpualloc.agent.loading import InputError
from gpualloc.agent.metrics import HealthServer, PoolsCollector
from gpualloc.agent.service.agent_service import AgentFenced, AgentService
from gpualloc.agent.service.counting import AgentStats
from gpualloc.agent.service.outbox import rejection
from gpualloc.bus import clients
from gpualloc.bus.admin import ensure_topics
from gpualloc.bus.history import read_range, reader
from gpualloc.bus.topics import Record, Topics, decode, encode, partition_of
from gpualloc.schemas.settings import AgentSettings

log = logging.getLogger("gpualloc.agent")


@dataclass
class _Running:
    service: AgentService
    stop: asyncio.Event
    task: asyncio.Task
    partition: int


class GroupAgent:
    """This process's share of the pools of consumer group `settings.group` on `bootstrap`."""

    def __init__(self, bootstrap: clients.Broker | str, settings: AgentSettings, topics: Topics = Topics()):
        if not settings.group:
            raise ValueError("a group agent needs settings.group")
        self.bootstrap, self.settings, self.topics = bootstrap, settings, topics
        self.running: dict[str, _Running] = {}
        self.taken: list[str] = []  # pools taken up, in order (a pool taken back appears again)
        self._done = AgentStats()  # what the pools stopped so far did
        self._width = 0  # partitions per input topic
        self._assigned: set[int] = set()  # partition numbers this member owns
        self._unexplored: set[int] = set()  # ...whose pools are still to be found
        self._joined = False  # the group gave this member its first assignment
        self.registry = CollectorRegistry()  # every running pool's metrics, on `metrics_port`
        self.registry.register(PoolsCollector(lambda: [r.service.metrics.registry for r in self.running.values()]))
        self.health = HealthServer(self.registry, lambda: self.ready)

    @property
    def ready(self) -> bool:
        """`/readyz`: in the group, its partitions explored, and every pool it runs ready."""
        return self._joined and not self._unexplored and all(r.service.ready for r in self.running.values())

    @property
    def stats(self) -> AgentStats:
        """Totals over every pool this process ran."""
        total = AgentStats(**{f.name: getattr(self._done, f.name) for f in fields(AgentStats)})
        for r in self.running.values():
            _add(total, r.service.stats)
        return total

    async def run(self, stop: asyncio.Event) -> None:
        """`serve`, with the members' pools' metrics and health on `metrics_port` when set."""
        if self.settings.metrics_port is None:
            return await self.serve(stop)
        port = await self.health.start(self.settings.metrics_port)
        log.info(
            "metrics on port %d (/metrics, /healthz, /readyz) for the pools of group %s",
            port,
            self.settings.group,
            extra={"port": port},
        )
        try:
            await self.serve(stop)
        finally:
            await self.health.close()

    async def serve(self, stop: asyncio.Event) -> None:
        s = self.settings
        counts = await ensure_topics(
            self.bootstrap, self.topics, s.partitions, s.retention_ms, s.replication_factor, s.min_insync_replicas
        )
        self._width = _shared_width(counts, self.topics)
        consumer = clients.consumer(
            bootstrap=self.bootstrap,
            group_id=s.group,
            group_instance_id=s.member,
            partition_assignment_strategy=(RangePartitionAssignor,),
            session_timeout_ms=s.session_timeout_ms,
            heartbeat_interval_ms=max(100, s.session_timeout_ms // 4),
            enable_auto_commit=True,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        producer = clients.producer(self.bootstrap, enable_idempotence=True, acks="all")
        try:
            await clients.started(producer, f"group {s.group}: producer")
            await clients.started(consumer, f"group {s.group}: consumer")
            consumer.subscribe(list(self.topics.inputs), listener=_Handover(self))
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=s.max_wait_ms)
                if self._unexplored:
                    await self._explore(counts)
                for tp, messages in batch.items():
                    for m in messages:
                        await self._watch(producer, tp, m)
                self._reap()
        finally:
            await self.release(list(self.running))
            await clients.close(consumer)  # leaves the group (unless static): the others take the pools at once
            await clients.close(producer)

    # ---- ownership ------------------------------------------------------------------------------
    async def assign(self, partitions: set[int]) -> None:
        """Take up a new assignment: stop the pools of partitions it leaves out, and mark the new
        ones for the loop to explore. Pools that stay keep running through the rebalance."""
        await self.release([pool for pool, r in self.running.items() if r.partition not in partitions])
        self._unexplored |= partitions - self._assigned
        self._unexplored &= partitions
        self._assigned = partitions
        self._joined = True

    async def release(self, pools: list[str]) -> None:
        """Stop `pools`: each ends its pass and closes its clients before another member starts it."""
        stopping = [self.running.pop(pool) for pool in pools]
        for r in stopping:
            r.stop.set()
        for pool, r in zip(pools, stopping):
            try:
                await r.task
            except AgentFenced:
                pass  # its new owner started first
            except Exception:
                log.exception("pool %s: its agent failed while stopping", pool)
            _add(self._done, r.service.stats)
            log.info("pool %s: handed over (partition %d)", pool, r.partition)

    def _start(self, pool: str, partition: int) -> None:
        if pool in self.running or partition not in self._assigned:
            return
        stop = asyncio.Event()
        member = self.settings.model_copy(update={"metrics_port": None})  # the member's port serves them all
        service = AgentService(self.bootstrap, member, self.topics, pool, partition=partition)
        task = asyncio.create_task(service.run(stop), name=f"gpualloc pool {pool}")
        self.running[pool] = _Running(service, stop, task, partition)
        self.taken.append(pool)
        log.info("pool %s: taken up (partition %d)", pool, partition)

    def _reap(self) -> None:
        """Drop pools whose agent ended: fenced means another member owns the pool now; anything
        else is a fault that stops this process (its pools then move to the other members)."""
        for pool, r in list(self.running.items()):
            if r.task.done():
                del self.running[pool]
                _add(self._done, r.service.stats)
                error = r.task.exception()
                if isinstance(error, AgentFenced):
                    log.warning("pool %s: %s", pool, error)
                elif error is not None:
                    raise error

    async def _explore(self, counts: dict[str, int]) -> None:
        """Start the pools of the newly assigned partitions: those with a snapshot, and those
        with a pool.configured on the config topic."""
        wanted, self._unexplored = self._unexplored, set()
        state = counts.get(self.topics.state, 0)
        starts = {TopicPartition(self.topics.state, p): 0 for p in range(state) if state != self._width or p in wanted}
        starts |= {TopicPartition(self.topics.config, p): 0 for p in wanted}
        history = await clients.started(reader(self.bootstrap), "group history reader")
        try:
            records = await read_range(history, starts)
        finally:
            await clients.close(history)
        for r in records:
            pool = r.key.decode("utf-8", "replace") if r.key is not None else None
            if pool is not None and r.value is not None and _names_pool(r.value, pool):
                home = partition_of(pool, self._width)
                if home in wanted:
                    self._start(pool, home)

    # ---- this member's watch over its partitions --------------------------------------------------
    async def _watch(self, producer: AIOKafkaProducer, tp: TopicPartition, m) -> None:
        key = m.key.decode("utf-8", "replace") if m.key is not None else None
        if key is None or partition_of(key, self._width) != tp.partition:
            rec = Record(tp.topic, tp.partition, m.offset, key, m.value)
            where = (
                "missing"
                if key is None
                else (f"{key!r} belongs on partition {partition_of(key, self._width)}, not {tp.partition}")
            )
            reason = (
                f"key: {where}; the input topics are keyed by pool (Kafka's default partitioner), "
                "and a shared group reads a pool's records on its key's partition only"
            )
            out = rejection(
                self.topics,
                rec,
                reason,
                datetime.now(timezone.utc),
                _pool_named(m.value) or key or "",
                source=f"group:{self.settings.group}",
            )
            assert out.message is not None  # a dead letter, never a tombstone
            await producer.send_and_wait(out.topic, encode(out.message), key=out.key.encode())
            log.warning("dead-lettered %s[%d]@%d: %s", tp.topic, tp.partition, m.offset, reason)
        elif tp.topic == self.topics.config and m.value is not None and _names_pool(m.value, key):
            self._start(key, tp.partition)


class _Handover(ConsumerRebalanceListener):
    """Rebalances, as the new assignment arrives (awaited by aiokafka): pools that moved away stop;
    the pools of new partitions are found and started by the member's loop, where a fault is seen.
    Kafka's rebalance revokes every partition first, but pools that stay are not stopped for it:
    a moved pool's new owner fences this member's producer for it if it starts first."""

    def __init__(self, agent: GroupAgent):
        self.agent = agent

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self.agent.assign({tp.partition for tp in assigned if tp.topic == self.agent.topics.config})


def _shared_width(counts: dict[str, int], topics: Topics) -> int:
    """The input topics' one partition count (InputError when they differ)."""
    widths = {topic: counts.get(topic, 0) for topic in topics.inputs}
    if len(set(widths.values())) != 1:
        listed = ", ".join(f"{topic} {n}" for topic, n in widths.items())
        raise InputError(
            "partitions",
            [
                f"the input topics of a shared group need one partition count, "
                f"found {listed} (a pool's records share a partition number)"
            ],
        )
    return widths[topics.config]


def _names_pool(value: bytes, pool: str) -> bool:
    return _pool_named(value) == pool


def _pool_named(value: bytes | None) -> str | None:
    """The `pool` of a message that is a JSON object ("default" when it names none), else None."""
    try:
        message = decode(value) if value is not None else None
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    pool = message.get("pool", "default")
    return pool if isinstance(pool, str) else None


def _add(total: AgentStats, more: AgentStats) -> None:
    for f in fields(AgentStats):
        if f.name != "recovery_s":
            setattr(total, f.name, getattr(total, f.name) + getattr(more, f.name))
