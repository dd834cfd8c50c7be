"""The Kafka features the agent relies on, against a real broker (see kafka_broker.py).

They pin the broker choice: aiokafka must produce, consume, join groups quickly and run
transactions (exactly-once consume-transform-produce) against the version deploy/kafka fetches.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from support.kafka_broker import FAST_GROUP, unique_topic

pytestmark = pytest.mark.kafka

WAIT_S = 30  # an upper bound for any single broker round trip, so a broken broker fails fast


async def _drain(consumer: AIOKafkaConsumer, count: int) -> list[bytes]:
    """The values of the next `count` messages (fails on time-out instead of hanging)."""
    out: list[bytes] = []

    async def collect() -> None:
        while len(out) < count:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out.extend(r.value for r in records if r.value is not None)

    await asyncio.wait_for(collect(), WAIT_S)
    return out


async def _all_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value in a one-partition topic up to its end offset, read with `isolation`."""
    async with AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
    ) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[bytes] = []

        async def collect() -> None:
            while await consumer.position(tp) < end:
                for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                    out.extend(r.value for r in records if r.value is not None)

        await asyncio.wait_for(collect(), WAIT_S)
        return out


async def test_round_trip(kafka_bootstrap: str) -> None:
    topic = unique_topic("roundtrip")
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as producer:
        for i in range(3):
            await producer.send_and_wait(topic, f"m{i}".encode(), key=b"k")
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, group_id=unique_topic("g"), **FAST_GROUP
    ) as consumer:
        assert await _drain(consumer, 3) == [b"m0", b"m1", b"m2"]


async def test_idempotent_producer(kafka_bootstrap: str) -> None:
    topic = unique_topic("idem")
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True) as producer:
        futures = [await producer.send(topic, f"v{i}".encode()) for i in range(20)]
        metas = await asyncio.wait_for(asyncio.gather(*futures), WAIT_S)
    assert [m.offset for m in metas] == list(range(20))  # no duplicates, no gaps
    assert await _all_values(kafka_bootstrap, topic, "read_uncommitted") == [f"v{i}".encode() for i in range(20)]


async def test_transactions_read_committed(kafka_bootstrap: str) -> None:
    """Consume-transform-produce: outputs and input offsets commit together; aborts stay hidden."""
    src, dst, group = unique_topic("src"), unique_topic("dst"), unique_topic("g")
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as plain:
        for i in range(3):
            await plain.send_and_wait(src, f"in{i}".encode())

    consumer = AIOKafkaConsumer(
        src,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        **FAST_GROUP,
    )
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=unique_topic("txn"))
    async with consumer, producer:
        inputs = await _drain(consumer, 3)
        async with producer.transaction():
            for v in inputs:
                await producer.send_and_wait(dst, v.replace(b"in", b"out"))
            await producer.send_offsets_to_transaction({TopicPartition(src, 0): 3}, group)
        await producer.begin_transaction()
        await producer.send_and_wait(dst, b"aborted")
        await producer.abort_transaction()
        assert await consumer.committed(TopicPartition(src, 0)) == 3

    assert await _all_values(kafka_bootstrap, dst, "read_committed") == [b"out0", b"out1", b"out2"]
    # The aborted record was written (read_uncommitted sees it), read_committed hides it.
    assert b"aborted" in await _all_values(kafka_bootstrap, dst, "read_uncommitted")


async def test_group_join_is_quick(kafka_bootstrap: str) -> None:
    topic = unique_topic("join")
    async with AIOKafkaProducer(bootstrap_servers=kafka_bootstrap) as producer:
        await producer.send_and_wait(topic, b"x")  # auto-creates the topic
    t0 = time.monotonic()
    async with AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, group_id=unique_topic("g"), **FAST_GROUP
    ) as consumer:
        await _drain(consumer, 1)  # a message arrives only once the group assigned the partition
        joined_s = time.monotonic() - t0
        assert consumer.assignment() == {TopicPartition(topic, 0)}
    assert joined_s < 15, f"group join took {joined_s:.1f}s"
