"""`gpualloc.client`: what an upstream platform needs to talk to a pool agent over Kafka, without
the agent's internals. Every message is validated against the contract's model before it is
sent (a `ValueError` naming the field and the rule, as the agent would dead-letter it), keyed as
the contract says, and sent by an idempotent producer with `acks=all`.

    async with Client("kafka:9092", pool="a100") as client:
        decision = await client.submit_job({"id": "train-1", "kind": "training", "priority": 3,
                                            "gpus": 8, "duration": 6})
        print(decision.action, decision.gpus, decision.start_step)
        await client.complete("train-1")

A broker that wants TLS or a SASL login takes `security=KafkaSecurity(...)`
(`gpualloc.schemas.settings`; e.g. `security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
sasl_username=..., sasl_password=...`); without it the client speaks PLAINTEXT.

`submit_job` awaits the job's `allocation.decided` (or raises `Rejected` when the agent
dead-letters the submission, `TimeoutError` when no answer comes in time). To hear answers it
reads the decisions and dead-letter topics from their end as they were at its first such call
(partitions assigned by hand: no consumer group, so any number of clients may run), which
needs those topics to exist: an agent creates them when it starts.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import BaseModel, ValidationError

from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics, decode, encode, key_of
from gpualloc.schemas.errors import describe, near_misses
from gpualloc.schemas.events import (
    PAYLOADS,
    AppRegistered,
    Envelope,
    JobCompleted,
    JobFailed,
    JobRef,
    JobSubmitted,
    JobUsage,
    NodeStatus,
    PoolConfigured,
    TrafficObserved,
    envelope,
)
from gpualloc.schemas.features import FEATURES
from gpualloc.schemas.published import AllocationDecided
from gpualloc.schemas.settings import KafkaSecurity

log = logging.getLogger("gpualloc.client")

TOPIC_WAIT_S = 0.5  # between looks for the answer topics, while no agent has created them


class Rejected(Exception):
    """The agent dead-lettered a message of this client: `reason` names the field and the rule."""

    def __init__(self, event_id: str, reason: str) -> None:
        super().__init__(f"{event_id}: {reason}")
        self.event_id, self.reason = event_id, reason


@dataclass(frozen=True)
class Sent:
    """A message the broker acknowledged, and where it landed."""

    message: dict[str, Any]
    topic: str
    partition: int
    offset: int


class Client:
    """A producer of one pool's input events, and a listener for the answers to its submissions.
    Use it as an async context manager (or `start` / `stop`). `bootstrap`: the broker's
    `HOST:PORT[,...]` (or a `Broker`); `security`: how to log in to it (TLS, SASL), PLAINTEXT
    when not given."""

    def __init__(
        self,
        bootstrap: Broker | str,
        pool: str = "default",
        topics: Topics = Topics(),
        source: str = "client",
        security: KafkaSecurity | None = None,
    ) -> None:
        self.bootstrap = clients.broker(bootstrap, security)
        self.pool, self.topics, self.source = pool, topics, source
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._listening = False
        self._listen_lock = asyncio.Lock()  # concurrent submissions set the listener up once
        self._reader: asyncio.Task | None = None
        self._decisions: dict[str, asyncio.Future[AllocationDecided]] = {}  # by job id
        self._events: dict[str, str] = {}  # submission event id -> job id, for dead letters
        self.last_sent: Sent | None = None  # the last message acknowledged (what a command prints)

    async def __aenter__(self) -> "Client":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Connect the producer (retrying an unreachable broker as every gpualloc client does);
        the listener connects at the first submission that waits for its decision."""
        self._producer = await clients.started(
            clients.producer(self.bootstrap, enable_idempotence=True, acks="all", linger_ms=5), "client producer"
        )

    async def stop(self) -> None:
        """Flush what was sent and close; submissions still waiting get `asyncio.CancelledError`."""
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        for future in self._decisions.values():
            future.cancel()
        for client in (self._producer, self._consumer):
            if client is not None:
                await clients.close(client)
        self._producer = self._consumer = None

    # ---- the events ----------------------------------------------------------------------------
    async def submit_job(
        self, job: JobSubmitted | Mapping[str, Any], *, wait: bool = True, timeout: float = 30.0
    ) -> AllocationDecided | None:
        """Publish `job.submitted` and, with `wait`, return the agent's decision for it. Raises
        `ValueError` for a job the contract refuses, `Rejected` if the agent dead-letters it,
        `TimeoutError` if no decision comes within `timeout` seconds (the job may still be decided
        later: `gpualloc tail --job ID` shows it)."""
        model = validated(JobSubmitted, job)
        if not wait:
            await self.send("job.submitted", model)
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await self._listen():  # the answer topics must exist before the job is sent
            if loop.time() >= deadline:
                raise TimeoutError(
                    f"{self.topics.decisions}: no such topic after {timeout:.0f} s "
                    "(is an agent running? it creates the topics)"
                )
            await asyncio.sleep(TOPIC_WAIT_S)
        if model.id in self._decisions:
            raise ValueError(f"id: job {model.id!r} already awaits its decision in this client")
        future: asyncio.Future[AllocationDecided] = loop.create_future()
        self._decisions[model.id] = future
        try:
            event_id = await self.send("job.submitted", model)
            self._events[event_id] = model.id
            return await asyncio.wait_for(asyncio.shield(future), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"job {model.id!r}: no decision within {timeout:.0f} s (is the pool "
                f"{self.pool!r} configured and its agent running?)"
            ) from None
        finally:
            self._decisions.pop(model.id, None)

    async def cancel(self, job_id: str, detail: str = "") -> str:
        """`job.cancelled`: a queued job leaves the queue, a running one is released."""
        return await self.send("job.cancelled", validated(JobRef, {"id": job_id, "detail": detail}))

    async def complete(self, job_id: str, used: JobUsage | Mapping[str, Any] | None = None, detail: str = "") -> str:
        """`job.completed`, with what the job used when known (the forecasters learn from it)."""
        return await self.send("job.completed", validated(JobCompleted, {"id": job_id, "detail": detail, "used": used}))

    async def fail(self, job_id: str, detail: str = "", *, reason: str | None = None) -> str:
        """`job.failed`: the job stopped on its own; its GPUs are released. `reason`:
        `out_of_memory` (the pool re-sizes a job it sized), `error` or None (re-queued as it was),
        `time_limit` (ended at a limit of the platform's own: not re-queued)."""
        return await self.send("job.failed", validated(JobFailed, {"id": job_id, "detail": detail, "reason": reason}))

    async def node_status(self, node: int, state: str, detail: str = "") -> str:
        """`node.status`: a node `drained` (no new work; running work goes on), `down` (its jobs
        fail) or `up` again."""
        return await self.send("node.status", validated(NodeStatus, {"node": node, "state": state, "detail": detail}))

    async def configure(self, config: PoolConfigured | Mapping[str, Any]) -> str:
        """`pool.configured`: the pool's whole configuration (a later one reconfigures it, its size
        included)."""
        return await self.send("pool.configured", validated(PoolConfigured, config))

    async def register_app(self, app: AppRegistered | Mapping[str, Any]) -> str:
        """`app.registered`: a real-time app, its priority and GPU bounds."""
        return await self.send("app.registered", validated(AppRegistered, app))

    async def report_traffic(self, app: str, *, gpus: int | None = None, requests_per_s: float | None = None) -> str:
        """`traffic.observed`: an app's GPUs needed now, or its request rate."""
        return await self.send(
            "traffic.observed", validated(TrafficObserved, {"app": app, "gpus": gpus, "requests_per_s": requests_per_s})
        )

    async def send(
        self,
        type: str,
        payload: BaseModel | Mapping[str, Any],
        event_id: str | None = None,
        occurred_at: datetime | None = None,
    ) -> str:
        """Publish any contract event of this pool on its topic, stamped now unless
        `occurred_at` is given; returns its event id (a fresh one unless given)."""
        message = envelope(
            type,
            payload if isinstance(payload, BaseModel) else dict(payload),
            occurred_at or datetime.now(timezone.utc),
            event_id or f"{self.source}-{uuid.uuid4().hex}",
            self.pool,
        )
        await self.publish(message)
        return message["event_id"]

    async def publish(self, message: dict[str, Any], acknowledged: bool = True) -> None:
        """Publish a whole contract message as given (its own pool, time and id) on its topic.
        Without `acknowledged`, return once it is queued (batched with the next ones: for
        streams; `flush` waits for them all)."""
        if self._producer is None:
            raise RuntimeError("Client: not started (use `async with Client(...)` or `await client.start()`)")
        misspelt = message_near_misses(message)
        if misspelt:
            raise ValueError("; ".join(misspelt))
        sent = await self._producer.send(
            self.topics.of_type(message["type"]), encode(message), key=key_of(message).encode()
        )
        if acknowledged:
            where = await sent
            self.last_sent = Sent(message, where.topic, where.partition, where.offset)

    async def flush(self) -> None:
        """Wait until everything published so far is acknowledged."""
        if self._producer is not None:
            await self._producer.flush()

    # ---- the answers ---------------------------------------------------------------------------
    async def _listen(self) -> bool:
        """Are the answer topics read? Once both exist, read them from their current end on."""
        async with self._listen_lock:
            return self._listening or await self._start_listening()

    async def _start_listening(self) -> bool:
        if self._consumer is None:
            self._consumer = await clients.started(
                clients.consumer(
                    bootstrap=self.bootstrap,
                    isolation_level="read_committed",
                    enable_auto_commit=False,
                    auto_offset_reset="earliest",
                ),
                "client consumer",
            )
        names = (self.topics.decisions, self.topics.deadletter)
        counts = await partition_counts(self.bootstrap, list(names))
        if len(counts) < len(names):
            return False
        parts = [TopicPartition(name, p) for name in names for p in range(counts[name])]
        self._consumer.assign(parts)
        await self._consumer.seek_to_end(*parts)
        for tp in parts:  # resolve the end offsets now, before anything is sent
            await self._consumer.position(tp)
        self._listening = True
        self._reader = asyncio.create_task(self._read(), name="gpualloc-client-reader")
        return True

    async def _read(self) -> None:
        assert self._consumer is not None  # started by _start_listening once the consumer is; stop() cancels it first
        while True:
            batch = await self._consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for record in records:
                    try:
                        self._answer(decode(record.value))
                    except (ValueError, KeyError, TypeError, ValidationError) as e:
                        log.debug("unreadable answer on %s:%d:%d: %s", tp.topic, tp.partition, record.offset, e)

    def _answer(self, message: dict[str, Any]) -> None:
        if message.get("pool") != self.pool:
            return
        if message.get("type") == "allocation.decided":
            decision = AllocationDecided.model_validate(message["payload"])
            future = self._decisions.get(decision.job_id)
            if future is not None and not future.done():
                future.set_result(decision)
        elif message.get("type") == "input.rejected":
            reason = message["payload"]["reason"]
            event_id = orjson.loads(message["payload"]["original"]).get("event_id")
            future = self._decisions.get(self._events.get(event_id, ""))
            if future is not None and not future.done():
                future.set_exception(Rejected(event_id, reason))


def validated(model: type[BaseModel], value: BaseModel | Mapping[str, Any]) -> Any:
    """`value` as `model`, or ValueError with one "field: rule" line per problem; a field that
    nearly names a known one is refused too (`near_misses`), though the contract would ignore
    it, since it is most likely a misspelling that would otherwise go unnoticed."""
    if isinstance(value, model):
        return value
    fields = value.model_dump() if isinstance(value, BaseModel) else dict(value)
    misspelt = near_misses(model, fields, nested=_nested(model, fields))
    if misspelt:
        raise ValueError("; ".join(misspelt))
    try:
        return model.model_validate(fields)
    except ValidationError as e:
        raise ValueError("; ".join(describe(e))) from None


def message_near_misses(message: Mapping[str, Any]) -> list[str]:
    """The near misses (`near_misses`) of a whole contract message: its envelope's fields, and
    its payload's by its type's model (a type the contract has no input model for: none)."""
    payload, model = message.get("payload"), PAYLOADS.get(str(message.get("type")))
    inner = near_misses(model, payload, "payload.", _nested(model, payload)) if model is not None else []
    return near_misses(Envelope, message) + inner


def _nested(model: type[BaseModel], fields: object) -> dict[str, type[BaseModel]]:
    """The model of a field typed as a plain object: a job's `features`, its kind's feature set."""
    kind = fields.get("kind") if isinstance(fields, Mapping) else None
    return {"features": FEATURES[kind]} if model is JobSubmitted and kind in FEATURES else {}
