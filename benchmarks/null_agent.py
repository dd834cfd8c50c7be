"""The floor under `gpualloc bench agent`: an agent that plans nothing.

It reads the pool's inputs as the agent does (partitions assigned by hand, committed data only,
the same short fetch wait) and answers each `job.submitted` with an `allocation.decided` (action
`queued`), one Kafka transaction a poll holding the answers and a ledger record, as the agent's
passes do. What the bench measures through it is what the broker, the clients, the load
generator and the machine cost with no planning at all: `bench agent --null-agent`, run beside
the real one, says how much of an arrival-to-decision figure is the agent's.

Run by the bench: `python -m gpualloc.benchmarks.null_agent BOOTSTRAP TOPIC_PREFIX`.
"""

from __future__ import annotations

import asyncio
import sys
import time

import orjson
from aiokafka import TopicPartition

from gpualloc.bus import clients
from gpualloc.bus.admin import ensure_topics
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import reader
from gpualloc.bus.topics import Topics
from gpualloc.schemas.settings import AgentSettings


async def serve(bootstrap: Broker | str, topics: Topics, pool: str = "default") -> None:
    settings = AgentSettings()
    counts = await ensure_topics(bootstrap, topics, settings.partitions, settings.retention_ms)
    producer = clients.producer(
        bootstrap,
        transactional_id=f"{topics.transactional_id(pool)}-null",
        enable_idempotence=True,
        acks="all",
        linger_ms=1,
    )
    consumer = reader(bootstrap, settings.fetch_wait_ms)
    await clients.started(producer, "null agent: producer")
    await clients.started(consumer, "null agent: reader")
    inputs = [TopicPartition(t, p) for t in topics.inputs for p in range(counts.get(t, 0))]
    consumer.assign(inputs)
    for tp in inputs:
        consumer.seek(tp, 0)
    key, passes = pool.encode(), 0
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=settings.max_wait_ms, max_records=2000)
            if not batch:
                continue
            received, passes = time.perf_counter(), passes + 1
            await producer.begin_transaction()
            for messages in batch.values():
                for m in messages:
                    message = orjson.loads(m.value) if m.value else {}
                    if message.get("type") == "job.submitted":
                        decided = {
                            "job_id": message["payload"]["id"],
                            "action": "queued",
                            "pass_seq": passes,
                            "latency_ms": round((time.perf_counter() - received) * 1000, 3),
                        }
                        await producer.send(
                            topics.decisions, orjson.dumps({"type": "allocation.decided", "payload": decided}), key=key
                        )
            await producer.send(topics.ledger, orjson.dumps({"type": "pass.recorded", "pass": passes}), key=key)
            await producer.commit_transaction()
    finally:
        await clients.close(consumer)
        await clients.close(producer)


def main(argv: list[str] | None = None) -> int:
    bootstrap, prefix = argv if argv is not None else sys.argv[1:]
    try:
        asyncio.run(serve(bootstrap, Topics.with_prefix(prefix)))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
