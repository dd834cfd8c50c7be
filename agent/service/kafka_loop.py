"""The agent on the bus: consume input topics, drive the dispatcher, publish what it returns.

All decisions happen in `dispatcher` (pure); this shell owns the clock, the Kafka clients
and the full-mode process. One loop: poll (waking in time for the next step boundary), hand the
poll's records to the dispatcher in one go (one planning pass for its arrivals), commit every
step that is due (adopting a finished full-mode plan there or nowhere), publish, then commit
the consumer's offsets: a crash replays unacknowledged input, and outputs carry deterministic
event ids so downstream de-duplicates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from gpualloc.agent.service.dispatcher import Dispatcher, Output, Record
from gpualloc.agent.service.full_mode_worker import FullModeWorker
from gpualloc.agent.topics import Topics, encode
from gpualloc.schemas.config import AgentSettings, SolveOptions
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.policies import online_policy

log = logging.getLogger("gpualloc.agent")


@dataclass
class AgentStats:
    records: int = 0
    decisions: int = 0
    commits: int = 0
    rejected: int = 0


class AgentService:
    """The pool agent on `bootstrap`, as `settings` say. `initial_config`: a pool.configured
    message to start with (`--config`); `client`: extra consumer settings (tests: fast joins)."""

    def __init__(self, bootstrap: str, settings: AgentSettings = AgentSettings(), topics: Topics = Topics(),
                 pool: str = "default", initial_config: bytes | None = None, client: dict | None = None):
        self.bootstrap, self.settings, self.topics, self.pool = bootstrap, settings, topics, pool
        self.initial_config, self.client = initial_config, client or {}
        self.policy = online_policy(settings.policy)
        hot_path = self.policy.hot.bind(SolveOptions(effort=settings.hot_path_effort))
        every = settings.full_mode.every if self.policy.full_mode is not None else 0
        interpreter = Pool(hot_path, settings.step_seconds, every, settings.pending_limit)
        self.dispatcher = Dispatcher(self.pool, topics, interpreter, settings.seen_limit)
        self.stats = AgentStats()
        self.worker: FullModeWorker | None = None
        self._unacked: list[asyncio.Future] = []
        self._uncommitted = False
        self._committed_at = 0.0

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        s, t = self.settings, self.topics
        options = {"auto_offset_reset": "earliest", **self.client, "enable_auto_commit": False,
                   "isolation_level": "read_committed"}
        consumer = AIOKafkaConsumer(t.config, t.jobs, t.traffic, t.bindings, bootstrap_servers=self.bootstrap,
                                    group_id=s.group_id or f"gpualloc-agent-{self.pool}", **options)
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True, acks="all",
                                    linger_ms=1)
        await producer.start()
        await consumer.start()
        try:
            if self.initial_config is not None:
                await self._publish(producer, self.dispatcher.handle(
                    [Record("--config", 0, 0, self.pool, self.initial_config)], _now()), time.perf_counter())
            if ready is not None:
                ready.set()
            while not stop.is_set():
                await self._pass(consumer, producer)
            await self._commit_offsets(consumer, force=True)
        finally:
            if self.worker is not None:
                self.worker.close()
            await consumer.stop()  # leaves the group; offsets were committed after each pass
            await producer.stop()

    async def _pass(self, consumer: AIOKafkaConsumer, producer: AIOKafkaProducer) -> None:
        batch = await consumer.getmany(timeout_ms=self._wait_ms(), max_records=2000)
        received = time.perf_counter()
        records = [Record(tp.topic, tp.partition, m.offset, m.key.decode("utf-8", "replace") if m.key else None, m.value)
                   for tp, messages in batch.items() for m in messages]
        now = _now()
        outputs = self.dispatcher.handle(records, now) if records else []
        outputs += self._boundaries(now)
        self.stats.records += len(records)
        await self._publish(producer, outputs, received)
        self._uncommitted |= bool(records)
        await self._commit_offsets(consumer)

    async def _commit_offsets(self, consumer: AIOKafkaConsumer, force: bool = False) -> None:
        """Commit consumed offsets once every output of theirs is acknowledged: a crash before
        that replays the input, and outputs' deterministic ids make the replay harmless."""
        if not force and time.monotonic() - self._committed_at < self.settings.commit_every_s:
            return
        acks, self._unacked = self._unacked, []
        if acks:
            await asyncio.gather(*acks)
        if self._uncommitted:
            await consumer.commit()
        self._uncommitted, self._committed_at = False, time.monotonic()

    def _wait_ms(self) -> int:
        longest = self.settings.max_wait_ms
        boundary = self.dispatcher.next_boundary()
        if boundary is None:
            return longest
        ahead = (boundary - _now()).total_seconds() * 1000
        return int(min(longest, max(0.0, ahead)))

    def _boundaries(self, now: datetime) -> list[Output]:
        """Commit every step whose start has come; full mode is collected and launched here."""
        out = []
        d = self.dispatcher
        while (boundary := d.next_boundary()) is not None and boundary <= now:
            plan = self.worker.take() if self.worker is not None else None
            if self.worker is not None and self.worker.last_error:
                log.warning("full mode failed: %s", self.worker.last_error)
                self.worker.last_error = None
            out.append(d.commit(now, plan))
            if d.full_mode_due() and not (boundary + d.step_length <= now):  # not while catching up
                self._launch_full_mode()
        return out

    def _launch_full_mode(self) -> None:
        s = self.settings
        if self.worker is None:
            limit = s.full_mode_time_limit(self.dispatcher.step_length.total_seconds())
            self.worker = FullModeWorker(s.full_mode.options.model_copy(update={"time_limit": limit}),
                                         s.full_mode.max_jobs, self.policy.full_mode.name)
        self.worker.launch(self.dispatcher.planner)

    async def _publish(self, producer: AIOKafkaProducer, outputs: list[Output], received: float) -> None:
        """Hand every output to the producer; their acknowledgements are awaited before the
        offsets are committed, not here, so the next poll is not held up by a round trip."""
        for o in outputs:
            kind = o.message["type"]
            if kind == "allocation.decided":
                o.message["payload"]["latency_ms"] = round((time.perf_counter() - received) * 1000, 3)
                self.stats.decisions += 1
            elif kind == "plan.committed":
                self.stats.commits += 1
            elif kind == "input.rejected":
                self.stats.rejected += 1
                log.warning("dead-lettered %s: %s", o.message["event_id"], o.message["payload"]["reason"])
            self._unacked.append(await producer.send(o.topic, encode(o.message), key=o.key.encode()))


def _now() -> datetime:
    return datetime.now(timezone.utc)
