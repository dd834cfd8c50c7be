"""A session's start on the bus: the pool's state rebuilt from its latest snapshot and the ledger
entries after it (`recovery`), and the input partitions assigned from the frontier it restored,
so nothing is decided twice and `seq` keeps rising."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.recovery import rebuild
from gpualloc.agent.service.service_setup import ServiceSetup
from gpualloc.bus import clients
from gpualloc.bus.history import partitions, read_history, reader
from gpualloc.bus.topics import partition_of
from gpualloc.solvers.planner.snapshot import SnapshotError

log = logging.getLogger("gpualloc.agent")


@dataclass(frozen=True)
class Resumed:
    """The pool as the last committed transaction left it, and what recovering it took."""

    dispatcher: Dispatcher
    replayed: int  # ledger entries replayed
    replay_s: float  # the time to rebuild the state (what the next recovery replays again, at least)
    recovery_s: float  # the time from the start to ready
    ledger_next: int  # the ledger's end: this session's entries come after it


async def resume(setup: ServiceSetup, consumer: AIOKafkaConsumer, counts: dict[str, int]) -> Resumed:
    """Rebuild the pool's state from its snapshot and ledger (`counts`: each topic's partitions),
    then assign `consumer` the pool's input partitions from the frontier. A snapshot this
    release cannot read is passed over: the whole ledger is replayed."""
    began = time.perf_counter()
    pool, topics = setup.pool, setup.topics
    history_reader = await clients.started(reader(setup.bootstrap), f"pool {pool}: history reader")
    try:
        for use_snapshot in (True, False):
            history = await read_history(history_reader, topics, counts, pool, use_snapshot)
            dispatcher = setup.fresh()
            try:
                replayed = rebuild(dispatcher, history)
                break
            except SnapshotError as e:
                log.warning("pool %s: %s; rebuilding the state from the whole ledger", pool, e)
        dispatcher.use(setup.run_info)
    finally:
        await clients.close(history_reader)
    inputs = [
        tp for topic in topics.inputs for tp in partitions(counts, topic) if setup.partition in (None, tp.partition)
    ]
    consumer.assign(inputs)
    for tp in inputs:
        consumer.seek(tp, dispatcher.frontier.get(f"{tp.topic}:{tp.partition}", 0))
    replay_s = time.perf_counter() - began
    ledger = TopicPartition(topics.ledger, partition_of(pool, counts[topics.ledger]))
    ledger_next = (await consumer.end_offsets([ledger]))[ledger]
    recovery_s = time.perf_counter() - began
    if history.snapshot is not None or replayed:
        log.info(
            "pool %s: recovered at transaction %d, seq %d (%d replayed) in %.2f s",
            pool,
            dispatcher.txn,
            dispatcher.seq,
            replayed,
            recovery_s,
        )
    return Resumed(dispatcher, replayed, replay_s, recovery_s, ledger_next)
