"""A pass's messages sent into its open transaction: each stamped and sent, all of them delivered
before the transaction commits, and the consumed offsets now and then.

A message that no retry can publish (over the producer's `max_request_size` or the broker's
limit, or not serializable) raises PublishFailed naming it, so the pass is aborted whole.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError

from gpualloc.agent.service.outbox import Output
from gpualloc.bus.topics import encode

# the consumed offsets go to the agent's group at most this often (a consumer's auto-commit
# interval): they serve lag monitoring only, and each sending costs a transaction two round trips
OFFSETS_EVERY_S = 5.0


class PublishFailed(RuntimeError):
    """A message of the pass that no retry can publish: over the producer's `max_request_size`
    (or the broker's limit), or not serializable. `kind` labels the metric."""

    def __init__(self, kind: str, message_type: str, key: str, size: int | None, detail: str):
        self.kind, self.message_type, self.key, self.size = kind, message_type, key, size
        size_text = "" if size is None else f" of {size:,} bytes"
        super().__init__(f"{message_type} (key {key!r}){size_text} cannot be published: {detail}")


@dataclass(frozen=True)
class Sent:
    """One message sent into the pass's transaction."""

    kind: str  # its type (the topic's name for a message without one, "tombstone" for none)
    key: str
    size: int  # its bytes
    delivery: asyncio.Future  # its record's metadata once the broker has it


@dataclass
class Sending:
    """What sending passes keeps: the messages of the pass under way, and when the consumed
    offsets last went to the group."""

    sent: list[Sent] = field(default_factory=list)  # the pass's messages, in the order sent
    offsets_sent: float = float("-inf")  # monotonic

    def begin(self) -> None:
        """A pass's transaction opens: nothing of it sent yet."""
        self.sent = []

    async def send(self, producer: AIOKafkaProducer, o: Output) -> tuple[int, asyncio.Future]:
        """Send one message of the pass; its size and delivery. One that no retry can publish
        (not serializable, over `max_request_size`) raises PublishFailed naming it."""
        kind = o.message.get("type", o.topic) if o.message is not None else "tombstone"
        try:
            body = encode(o.message) if o.message is not None else None
        except TypeError as e:  # orjson's JSONEncodeError
            raise PublishFailed("unserializable", kind, o.key, None, str(e)) from None
        try:
            delivery = await producer.send(o.topic, body, key=o.key.encode(), partition=o.partition)
        except MessageSizeTooLargeError as e:
            raise PublishFailed("too_large", kind, o.key, len(body or b""), str(e)) from None
        size = len(body) if body is not None else 0
        self.sent.append(Sent(kind, o.key, size, delivery))
        return size, delivery

    async def delivered(self) -> None:
        """Every message of the pass delivered into its transaction. The broker refuses one over
        its own limit (`max.message.bytes`, below the producer's) in its delivery alone, and the
        transaction would commit without it (a commit's part, a snapshot's): PublishFailed then,
        naming it, so the pass is aborted whole."""
        results = await asyncio.gather(*(s.delivery for s in self.sent), return_exceptions=True)
        for s, result in zip(self.sent, results):
            if isinstance(result, (MessageSizeTooLargeError, RecordTooLargeError)):
                raise PublishFailed("too_large", s.kind, s.key, s.size, f"the broker refused it ({result})")
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def send_offsets(
        self, producer: AIOKafkaProducer, frontier: dict[str, int], group_id: str, committed: bool
    ) -> None:
        """The consumed offsets into the transaction, for lag monitoring (recovery resumes from
        the ledger's own frontier), at most every OFFSETS_EVERY_S; not in a pass that commits a
        step (`committed`), which holds up the arrivals behind it."""
        if frontier and not committed and time.monotonic() - self.offsets_sent >= OFFSETS_EVERY_S:
            await producer.send_offsets_to_transaction(_offsets(frontier), group_id)
            self.offsets_sent = time.monotonic()


def stamp(o: Output, received: float) -> None:
    """A decision's latency: from its poll's records received to its sending."""
    message = message_of(o)
    if message["type"] == "allocation.decided":
        message["payload"]["latency_ms"] = round((time.perf_counter() - received) * 1000, 3)


def message_of(o: Output) -> dict[str, Any]:
    """The message of one of a pass's outputs: they all carry one (only a snapshot's records
    clear keys, with tombstones, and those are sent apart)."""
    assert o.message is not None, f"a tombstone for {o.key!r} on {o.topic} among a pass's outputs"
    return o.message


def _offsets(frontier: dict[str, int]) -> dict[TopicPartition, int]:
    out = {}
    for key, offset in frontier.items():
        topic, partition = key.rsplit(":", 1)
        out[TopicPartition(topic, int(partition))] = offset
    return out
