"""The agent on the bus: consume input topics, drive the dispatcher, publish what it returns,
exactly once.

All decisions happen in `dispatcher` (pure); this shell owns the clock, the Kafka clients and
the solver processes. Each pass is one Kafka transaction: poll (waking in time for the next
step boundary), hand the poll's records to the dispatcher in one go, commit every step that is
due (carrying over the plan made ahead of it, `plan_ahead`, and adopting a finished full-mode
plan there or nowhere; a boundary whose plan is still being made waits for it), cut the window
for the next boundary once its time has come (`boundaries`), then publish the outputs, the
pass's ledger entry (the inputs in the order they were used, the commits made, the frontier)
and, when one is due, a snapshot of the pool's state (`snapshotting`), the consumed offsets now
and then (`publishing`), and commit the transaction once every message of it is delivered.
Readers see all of a pass or none of it; what was published is counted once it committed
(`counting`).

On start (and in each new session after the broker was lost or a transaction failed: the
session's clients are dropped, whatever they left open is aborted by the next one) the agent
rebuilds its state from the latest snapshot and the ledger entries after it (`resume`), so
nothing is decided twice and `seq` keeps rising. The transactional id is `gpualloc-<pool>`
(`Topics.transactional_id`): a second agent for the same pool fences the first, and its start
aborts whatever the first left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from dataclasses import dataclass
from datetime import datetime

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError, ProducerFenced

from gpualloc.agent import logs
from gpualloc.agent.metrics import AgentMetrics, HealthServer
from gpualloc.agent.service.boundaries import Boundaries
from gpualloc.agent.service.clock import Clock
from gpualloc.agent.service.counting import AgentStats, Tally, lag
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.heartbeats import Parked
from gpualloc.agent.service.held import refuse_taken_port
from gpualloc.agent.service.internal_errors import dead_lettered, internal_reason
from gpualloc.agent.service.outbox import Output
from gpualloc.agent.service.publishing import PublishFailed, Sending, message_of, stamp
from gpualloc.agent.service.resume import resume
from gpualloc.agent.service.service_setup import ServiceSetup
from gpualloc.agent.service.snapshotting import Snapshotting
from gpualloc.bus import clients
from gpualloc.bus.admin import ensure_topics
from gpualloc.bus.history import reader
from gpualloc.bus.topics import Record, Topics, partition_of
from gpualloc.schemas.settings import AgentSettings
from gpualloc.solvers.planner.node_watch import liveness

log = logging.getLogger("gpualloc.agent")


RETRY_FIRST_S, RETRY_MAX_S = 0.5, 10.0  # backoff between sessions after the broker was lost
# after a pass that can never be published: unready, and a new session (recovering, trying the
# pass again with what arrived since) after this long, doubling; the failure is logged each time
FAILED_RETRY_FIRST_S, FAILED_RETRY_MAX_S = 30.0, 600.0


class AgentFenced(RuntimeError):
    """Another agent took over this pool (same transactional id)."""


@dataclass
class Readiness:
    """What `/readyz` says: ready while a session serves and its passes get published."""

    serving: bool = False  # connected, state restored, consuming
    failure: str | None = None  # why the last pass could not be published, until one is

    def ready(self) -> bool:
        return self.serving and self.failure is None


class AgentService:
    """The pool agent on `bootstrap`, as `settings` say. `initial_config`: a pool.configured
    message to start with (`--config`). `partition`: read only this partition of each input topic
    (a shared group's pool, whose records are keyed by its name); else read them all."""

    def __init__(
        self,
        bootstrap: clients.Broker | str,
        settings: AgentSettings = AgentSettings(),
        topics: Topics = Topics(),
        pool: str = "default",
        initial_config: bytes | None = None,
        partition: int | None = None,
        clock: Clock | None = None,
    ):
        self.setup = ServiceSetup.of(bootstrap, settings, topics, pool, initial_config, partition, clock or Clock())
        self.dispatcher = self.setup.fresh()  # the pool's state (a session's recovery rebuilds it)
        self.tally = Tally()  # stats, and the metrics' counting of what was published (`counting`)
        self.metrics = AgentMetrics(pool)
        self.readiness = Readiness()
        self.health = HealthServer(self.metrics.registry, self.readiness.ready)
        self.boundaries = Boundaries()  # the session's solver processes, for plans made ahead and full mode
        self.sending = Sending()  # the pass under way, and the consumed offsets' last sending (`publishing`)
        self.snapshots = Snapshotting()  # the snapshot being made, and when the next is due
        self.parked = Parked()  # node agents' heartbeats held back for a later pass (`heartbeats`)
        self._watched_at = float("-inf")  # when the node agents' metrics were last set (monotonic s)

    @property
    def stats(self) -> AgentStats:
        return self.tally.stats

    @property
    def ready(self) -> bool:
        """Connected, state restored, consuming (`/readyz` also asks that passes get published)."""
        return self.readiness.serving

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """`serve`, every log line of it carrying the pool, with the metrics and health endpoints
        on `metrics_port` when set."""
        with logs.bind(pool=self.setup.pool):
            if self.setup.settings.metrics_port is None:
                await self.serve(stop, ready)
                return
            try:
                port = await self.health.start(self.setup.settings.metrics_port)
            except OSError as e:
                raise await refuse_taken_port(self.setup.settings.metrics_port, self.setup.pool, e) from None
            log.info("metrics on port %d (/metrics, /healthz, /readyz)", port, extra={"port": port})
            try:
                await self.serve(stop, ready)
            finally:
                await self.health.close()

    async def serve(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Serve the pool until `stop`. Once it has been served, losing the broker (or a
        transaction that cannot complete) ends only the session: its clients are closed and a
        new one starts after a backoff (doubling from RETRY_FIRST_S to RETRY_MAX_S), recovering
        from the last committed state, as after a restart. A start that never reaches the broker
        raises (the CLI exits 2), and so does fencing by another agent."""
        delay, served = RETRY_FIRST_S, asyncio.Event()
        while True:
            began = time.monotonic()
            try:
                await self._session(stop, ready, served)
                return
            except AgentFenced:
                raise
            except PublishFailed as e:
                delay = self._publish_failed(e, delay)
            except (KafkaError, TimeoutError) as e:
                if not served.is_set() or stop.is_set():
                    raise
                delay = RETRY_FIRST_S if time.monotonic() - began > 10 * RETRY_MAX_S else delay
                log.warning(
                    "pool %s: lost the broker (%s: %s); reconnecting in %.1f s",
                    self.setup.pool,
                    type(e).__name__,
                    e,
                    delay,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
                return
            delay = min(2 * delay, FAILED_RETRY_MAX_S if self.readiness.failure is not None else RETRY_MAX_S)

    def _publish_failed(self, e: PublishFailed, delay: float) -> float:
        """A pass that can never be published: nothing of it was (its transaction is aborted), so
        the pool is stuck, not lost. Say so (error log naming the message, metric, `/readyz`
        503) and try again only after FAILED_RETRY_FIRST_S, doubling: a new session recovers the
        state from the bus and plans the pass again with what arrived since. The backoff to use."""
        self.readiness.failure = str(e)
        self.metrics.publish_failed(e.kind)
        delay = max(delay, FAILED_RETRY_FIRST_S)
        log.error(
            "pool %s: a pass cannot be published, nothing of it was: %s; trying again in %.0f s",
            self.setup.pool,
            e,
            delay,
            extra={"message_type": e.message_type, "key": e.key, "bytes": e.size, "kind": e.kind},
        )
        return delay

    async def _session(self, stop: asyncio.Event, ready: asyncio.Event | None, served: asyncio.Event) -> None:
        setup, s = self.setup, self.setup.settings
        pool, topics = setup.pool, setup.topics
        counts = await ensure_topics(
            setup.bootstrap, topics, s.partitions, s.retention_ms, s.replication_factor, s.min_insync_replicas
        )
        producer = clients.producer(
            setup.bootstrap,
            transactional_id=topics.transactional_id(pool),
            enable_idempotence=True,
            acks="all",
            linger_ms=1,
            transaction_timeout_ms=s.transaction_timeout_ms,
        )
        # inputs are assigned by hand and read from the restored frontier
        consumer = reader(setup.bootstrap, s.fetch_wait_ms)
        try:
            await clients.started(producer, f"pool {pool}: producer")
            await clients.started(consumer, f"pool {pool}: reader")
            await producer.begin_transaction()  # takes the transactional id: fences an older agent and
            await producer.commit_transaction()  # aborts what it left open, before its history is read
            resumed = await resume(setup, consumer, counts)
            self.dispatcher = resumed.dispatcher
            ledger, state = (partition_of(pool, counts[topic]) for topic in (topics.ledger, topics.state))
            self.snapshots.recovered(resumed.dispatcher.txn, resumed.replay_s, ledger, state, resumed.ledger_next)
            self.tally.stats.replayed += resumed.replayed
            self.tally.stats.recovery_s = resumed.recovery_s
            if setup.initial_config is not None and self.dispatcher.reads.view is None:  # a restored pool keeps its own
                now = setup.clock.now()
                outputs = self.dispatcher.handle([Record("--config", 0, 0, pool, setup.initial_config)], now)
                await self._transact(producer, outputs, now, time.perf_counter())
            self.boundaries.start(setup)
            if not served.is_set():
                # what start-up made (modules, classes, the recovered state) stays: kept out of the
                # collector's full passes, which walked it all inside a pass (20-45 ms at 64 GPUs)
                gc.freeze()
            served.set()
            if ready is not None:
                ready.set()
            self.readiness.serving = True
            while not stop.is_set():
                await self._pass(consumer, producer)
        except ProducerFenced:
            raise AgentFenced(
                f"pool {pool!r}: another agent took it over (transactional id "
                f"{topics.transactional_id(pool)}); this one stops"
            ) from None
        finally:
            self.readiness.serving = False
            self.snapshots.drop()
            self.boundaries.close()
            await clients.close(consumer)
            await clients.close(producer)

    # ---- one pass, one transaction --------------------------------------------------------------
    async def _pass(self, consumer: AIOKafkaConsumer, producer: AIOKafkaProducer) -> None:
        setup, d, flush_s = self.setup, self.dispatcher, self.setup.settings.heartbeat_flush_s
        wait_ms = self.boundaries.wait_ms(d, setup.clock.now(), setup.settings.max_wait_ms)
        parked_s = self.parked.wait_s(time.monotonic(), flush_s)
        if parked_s is not None:
            wait_ms = min(wait_ms, int(parked_s * 1000))
        batch = await consumer.getmany(timeout_ms=wait_ms, max_records=2000)
        received = time.perf_counter()
        now = setup.clock.now()
        boundary = d.reads.next_boundary()
        records = self.parked.take(
            [
                Record(tp.topic, tp.partition, m.offset, m.key.decode("utf-8", "replace") if m.key else None, m.value)
                for tp, messages in batch.items()
                for m in messages
            ],
            time.monotonic(),
            flush_s,
            due=boundary is not None and boundary <= now,
            bindings=setup.topics.bindings,
        )
        outputs = self._handle(d, records, now) if records else []
        self.boundaries.deliver(d)
        outputs += self.boundaries.commit_due(d, now, setup, self.snapshots)
        self._watched(now)
        self.boundaries.cut(d, now)
        self.tally.stats.records += len(records)
        lag(consumer, d.frontier, self.metrics, setup.pool)
        # a transaction that cannot finish in time ends the session (`run` starts a new one)
        await asyncio.wait_for(
            self._transact(producer, outputs, now, received), setup.settings.transaction_timeout_ms / 1000
        )

    def _watched(self, now: datetime) -> None:
        """The node agents' metrics (`node_watch.liveness`), at most once a second: a pass at the
        contract's limits would otherwise walk 4,096 nodes and their running jobs each time."""
        view, at = self.dispatcher.reads.view, time.monotonic()
        if view is None or not view.heard or at < self._watched_at + 1.0:
            return
        self._watched_at = at
        self.metrics.watched(liveness(view, now.timestamp()))

    def _handle(self, d: Dispatcher, records: list[Record], now: datetime) -> list[Output]:
        """The pass's outputs; a pass the core raises on (a bug: it left the pool as it found it)
        has its records dead-lettered (`internal_errors`), loudly, and the pool goes on."""
        try:
            return d.handle(records, now)
        except Exception as e:
            self.metrics.internal_error(type(e).__name__)
            log.exception(
                "pool %s: the planner failed on a pass of %d records (%s); they are dead-lettered",
                self.setup.pool,
                len(records),
                internal_reason(e),
                extra={"error": type(e).__name__, "records": len(records)},
            )
            return dead_lettered(d, records, e, now)

    async def _transact(
        self, producer: AIOKafkaProducer, outputs: list[Output], now: datetime, received: float
    ) -> None:
        """Publish one pass atomically: outputs, ledger entry, snapshot when due, offsets."""
        d, settings = self.dispatcher, self.setup.settings
        sealed = d.seal(self.setup.run_info)
        entry = sealed[-1] if sealed else None
        ready = self.snapshots.ready()
        if entry is None and not ready:
            return
        await producer.begin_transaction()
        try:
            sent = await self._publish(producer, outputs + sealed[:-1], entry, ready, now, received)
            await self.sending.delivered()
        except PublishFailed:
            with contextlib.suppress(KafkaError, TimeoutError):
                await asyncio.wait_for(producer.abort_transaction(), settings.transaction_timeout_ms / 1000)
            raise
        await producer.commit_transaction()
        if sent is not None:
            self.snapshots.entry_delivered((await sent).offset)  # delivered with the commit
            for o in outputs:
                self.tally.count(o, d, self.metrics)  # counted once published
        self.readiness.failure = None
        self.metrics.published()
        self.tally.stats.transactions += 1

    async def _publish(
        self,
        producer: AIOKafkaProducer,
        outputs: list[Output],
        entry: Output | None,
        ready: bool,
        now: datetime,
        received: float,
    ) -> asyncio.Future | None:
        """Send the pass's messages (in its open transaction): the snapshot made, when `ready`,
        its outputs and its ledger `entry`; then start the next snapshot when one is due, and
        send the consumed offsets. The ledger entry's delivery."""
        d, sending = self.dispatcher, self.sending

        async def send(o: Output) -> tuple[int, asyncio.Future]:
            return await sending.send(producer, o)

        sending.begin()
        if ready:
            await self.snapshots.send(d, self.setup.pool, send)
        if entry is None:
            return None
        for o in outputs:
            stamp(o, received)
            await send(o)
        size, sent = await send(entry)
        self.snapshots.written(size)
        committed = any(message_of(o)["type"] == "plan.committed" for o in outputs)
        self.snapshots.start_if_due(d, committed, self.setup.settings.snapshot_every, now)
        await sending.send_offsets(producer, d.frontier, self.setup.group_id, committed)
        return sent
