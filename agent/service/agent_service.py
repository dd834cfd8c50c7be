"""The agent on the bus: consume input topics, drive the dispatcher, publish what it returns,
exactly once.

All decisions happen in `dispatcher` (pure); this shell owns the clock, the Kafka clients and
the full-mode process. Each pass is one Kafka transaction: poll (waking in time for the next
step boundary), hand the poll's records to the dispatcher in one go, commit every step that is
due (carrying over the plan made ahead of it, `plan_ahead`, and adopting a finished full-mode
plan there or nowhere; a boundary whose plan is still being made waits for it), cut the window
for the next boundary once its time has come, then publish the outputs, the pass's ledger entry
(the inputs in the order they were used, the commits made, the frontier) and, when one is due, a
snapshot of the pool's state (once replaying the ledger since the last would cost about what
reading it does, in bytes or in plans), the consumed offsets at most every `OFFSETS_EVERY_S`
outside passes that commit a step, and commit the transaction once every message of it is
delivered. Readers see all of a pass or none of it.

On start (and in each new session after the broker was lost or a transaction failed: the
session's clients are dropped, whatever they left open is aborted by the next one) the agent
rebuilds its state from the latest snapshot and the ledger entries after it (`recovery`), so
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
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, ProducerFenced, RecordTooLargeError

from gpualloc.agent import logs
from gpualloc.agent.metrics import AgentMetrics, HealthServer
from gpualloc.agent.service.clock import Clock
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.full_mode_worker import FullModeWorker
from gpualloc.agent.service.ledger import run_settings
from gpualloc.agent.service.outbox import Output
from gpualloc.agent.service.plan_ahead import PlanAhead
from gpualloc.agent.service.reads import step_of
from gpualloc.agent.service.recovery import rebuild
from gpualloc.agent.service.snapshot_due import SinceSnapshot
from gpualloc.bus import clients
from gpualloc.bus.admin import ensure_topics
from gpualloc.bus.history import partitions, read_history, reader
from gpualloc.bus.topics import Record, Topics, encode, partition_of
from gpualloc.schemas.commits import Parts, folded
from gpualloc.schemas.published import FullModeReport, FullModeSolve
from gpualloc.schemas.settings import AgentSettings
from gpualloc.solvers.planner.full_mode import next_due
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import SnapshotError
from gpualloc.solvers.policies import online_policy

log = logging.getLogger("gpualloc.agent")


RETRY_FIRST_S, RETRY_MAX_S = 0.5, 10.0  # backoff between sessions after the broker was lost
# after a pass that can never be published: unready, and a new session (recovering, trying the
# pass again with what arrived since) after this long, doubling; the failure is logged each time
FAILED_RETRY_FIRST_S, FAILED_RETRY_MAX_S = 30.0, 600.0
# the consumed offsets go to the agent's group at most this often (a consumer's auto-commit
# interval): they serve lag monitoring only, and each sending costs a transaction two round trips
OFFSETS_EVERY_S = 5.0
AWAIT_POLL_MS = 20  # a poll's wait while a boundary waits for its plan made ahead


class AgentFenced(RuntimeError):
    """Another agent took over this pool (same transactional id)."""


class PublishFailed(RuntimeError):
    """A message of the pass that no retry can publish: over the producer's `max_request_size`
    (or the broker's limit), or not serializable. `kind` labels the metric."""

    def __init__(self, kind: str, message_type: str, key: str, size: int | None, detail: str):
        self.kind, self.message_type, self.key, self.size = kind, message_type, key, size
        size_text = "" if size is None else f" of {size:,} bytes"
        super().__init__(f"{message_type} (key {key!r}){size_text} cannot be published: {detail}")


@dataclass
class AgentStats:
    records: int = 0
    decisions: int = 0
    commits: int = 0
    rejected: int = 0
    transactions: int = 0
    replayed: int = 0  # ledger entries replayed by recoveries
    recovery_s: float = 0.0  # the last recovery's time, from its start to ready


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
        self.bootstrap, self.settings, self.topics, self.pool = bootstrap, settings, topics, pool
        self.initial_config, self.partition = initial_config, partition
        self.clock = clock or Clock()
        self.policy = online_policy(settings.policy)
        self.run_info = run_settings(settings)
        self.group_id = settings.group_id or f"gpualloc-agent-{pool}"
        self.dispatcher = self._fresh()
        self.stats = AgentStats()
        self.metrics = AgentMetrics(pool)
        self.ready = False  # connected, state restored, consuming (`/readyz`)
        self.failure: str | None = None  # why the last pass could not be published, until one is
        self.health = HealthServer(self.metrics.registry, lambda: self.ready and self.failure is None)
        self.worker: FullModeWorker | None = None
        self.ahead: PlanAhead | None = None  # the boundaries' plans, made ahead of them (`plan_ahead`)
        self._snapshot: asyncio.Future | None = None  # a snapshot being compressed, sent with the next transaction
        self._since = SinceSnapshot()  # what was written and planned since the last snapshot: when one is due
        self._ledger_next: int | None = None  # at or before the offset of the pool's next ledger entry
        self._offsets_sent = float("-inf")  # when the consumed offsets last went to the group (monotonic)
        self._counts: dict[str, int] = {}
        self._sent: list[tuple[str, str, int, asyncio.Future]] = []  # the pass's messages: type, key, bytes, delivery
        self._skip_said = False  # full mode's last launch was skipped and the log said why
        self._parts = Parts()  # a split commit's parts, counted once whole
        self._step_commit: dict | None = None  # the current step's commit as published, its reactive ones folded in

    def _fresh(self) -> Dispatcher:
        d = Dispatcher(self.pool, self.topics, Pool(pending_limit=self.settings.pending_limit))
        d.use(self.run_info)
        return d

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """`serve`, every log line of it carrying the pool, with the metrics and health endpoints
        on `metrics_port` when set."""
        with logs.bind(pool=self.pool):
            if self.settings.metrics_port is None:
                await self.serve(stop, ready)
                return
            port = await self.health.start(self.settings.metrics_port)
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
                    "pool %s: lost the broker (%s: %s); reconnecting in %.1f s", self.pool, type(e).__name__, e, delay
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
                return
            delay = min(2 * delay, FAILED_RETRY_MAX_S if self.failure is not None else RETRY_MAX_S)

    def _publish_failed(self, e: PublishFailed, delay: float) -> float:
        """A pass that can never be published: nothing of it was (its transaction is aborted), so
        the pool is stuck, not lost. Say so (error log naming the message, metric, `/readyz`
        503) and try again only after FAILED_RETRY_FIRST_S, doubling: a new session recovers the
        state from the bus and plans the pass again with what arrived since. The backoff to use."""
        self.failure = str(e)
        self.metrics.publish_failed(e.kind)
        delay = max(delay, FAILED_RETRY_FIRST_S)
        log.error(
            "pool %s: a pass cannot be published, nothing of it was: %s; trying again in %.0f s",
            self.pool,
            e,
            delay,
            extra={"message_type": e.message_type, "key": e.key, "bytes": e.size, "kind": e.kind},
        )
        return delay

    async def _session(self, stop: asyncio.Event, ready: asyncio.Event | None, served: asyncio.Event) -> None:
        s = self.settings
        self._counts = await ensure_topics(
            self.bootstrap, self.topics, s.partitions, s.retention_ms, s.replication_factor, s.min_insync_replicas
        )
        producer = clients.producer(
            self.bootstrap,
            transactional_id=self.topics.transactional_id(self.pool),
            enable_idempotence=True,
            acks="all",
            linger_ms=1,
            transaction_timeout_ms=s.transaction_timeout_ms,
        )
        # inputs are assigned by hand and read from the restored frontier
        consumer = reader(self.bootstrap, self.settings.fetch_wait_ms)
        try:
            await clients.started(producer, f"pool {self.pool}: producer")
            await clients.started(consumer, f"pool {self.pool}: reader")
            await producer.begin_transaction()  # takes the transactional id: fences an older agent and
            await producer.commit_transaction()  # aborts what it left open, before its history is read
            await self._recover(consumer)
            if self.initial_config is not None and self.dispatcher.reads.view is None:  # a restored pool keeps its own
                now = self.clock.now()
                outputs = self.dispatcher.handle([Record("--config", 0, 0, self.pool, self.initial_config)], now)
                await self._transact(producer, outputs, now, time.perf_counter())
            if s.plan_ahead:
                self.ahead = PlanAhead(self.run_info["policy"], self.run_info["effort"])
            if not served.is_set():
                # what start-up made (modules, classes, the recovered state) stays: kept out of the
                # collector's full passes, which walked it all inside a pass (20-45 ms at 64 GPUs)
                gc.freeze()
            served.set()
            if ready is not None:
                ready.set()
            self.ready = True
            while not stop.is_set():
                await self._pass(consumer, producer)
        except ProducerFenced:
            raise AgentFenced(
                f"pool {self.pool!r}: another agent took it over (transactional id "
                f"{self.topics.transactional_id(self.pool)}); this one stops"
            ) from None
        finally:
            self.ready = False
            self._snapshot = None  # its transaction may not have committed: the next session snapshots afresh
            for process in (self.worker, self.ahead):
                if process is not None:
                    process.close()
            self.worker = self.ahead = None
            await clients.close(consumer)
            await clients.close(producer)

    # ---- recovery -------------------------------------------------------------------------------
    async def _recover(self, consumer: AIOKafkaConsumer) -> None:
        """Rebuild the pool's state from its snapshot and ledger, then consume from the frontier."""
        began = time.perf_counter()
        history_reader = await clients.started(reader(self.bootstrap), f"pool {self.pool}: history reader")
        try:
            for use_snapshot in (True, False):
                history = await read_history(history_reader, self.topics, self._counts, self.pool, use_snapshot)
                self.dispatcher = self._fresh()
                try:
                    replayed = rebuild(self.dispatcher, history)
                    break
                except SnapshotError as e:
                    log.warning("pool %s: %s; rebuilding the state from the whole ledger", self.pool, e)
            self.dispatcher.use(self.run_info)
        finally:
            await clients.close(history_reader)
        inputs = [
            tp
            for topic in self.topics.inputs
            for tp in partitions(self._counts, topic)
            if self.partition in (None, tp.partition)
        ]
        consumer.assign(inputs)
        for tp in inputs:
            consumer.seek(tp, self.dispatcher.frontier.get(f"{tp.topic}:{tp.partition}", 0))
        # what the next recovery replays again, at least
        self._since = replace(self._since, txn=self.dispatcher.txn, replay_s=time.perf_counter() - began)
        ledger = TopicPartition(self.topics.ledger, partition_of(self.pool, self._counts[self.topics.ledger]))
        self._ledger_next = (await consumer.end_offsets([ledger]))[ledger]  # this session's entries come after it
        self.stats.replayed += replayed
        self.stats.recovery_s = time.perf_counter() - began
        if history.snapshot is not None or replayed:
            log.info(
                "pool %s: recovered at transaction %d, seq %d (%d replayed) in %.2f s",
                self.pool,
                self.dispatcher.txn,
                self.dispatcher.seq,
                replayed,
                self.stats.recovery_s,
            )

    # ---- one pass, one transaction --------------------------------------------------------------
    async def _pass(self, consumer: AIOKafkaConsumer, producer: AIOKafkaProducer) -> None:
        batch = await consumer.getmany(timeout_ms=self._wait_ms(), max_records=2000)
        received = time.perf_counter()
        records = [
            Record(tp.topic, tp.partition, m.offset, m.key.decode("utf-8", "replace") if m.key else None, m.value)
            for tp, messages in batch.items()
            for m in messages
        ]
        now = self.clock.now()
        outputs = self.dispatcher.handle(records, now) if records else []
        if self.ahead is not None:
            self.ahead.deliver(self.dispatcher)
            self.ahead.resume(self.dispatcher)
        outputs += self._boundaries(now)
        self._cut(now)
        self.stats.records += len(records)
        self._lag(consumer)
        # a transaction that cannot finish in time ends the session (`run` starts a new one)
        await asyncio.wait_for(
            self._transact(producer, outputs, now, received), self.settings.transaction_timeout_ms / 1000
        )

    async def _transact(
        self, producer: AIOKafkaProducer, outputs: list[Output], now: datetime, received: float
    ) -> None:
        """Publish one pass atomically: outputs, ledger entry, snapshot when due, offsets."""
        d = self.dispatcher
        entry = d.seal(self.run_info)
        ready = self._snapshot is not None and self._snapshot.done()
        if entry is None and not ready:
            return
        await producer.begin_transaction()
        try:
            sent = await self._publish(producer, outputs, entry, ready, now, received)
            await self._delivered()
        except PublishFailed:
            with contextlib.suppress(KafkaError, TimeoutError):
                await asyncio.wait_for(producer.abort_transaction(), self.settings.transaction_timeout_ms / 1000)
            raise
        await producer.commit_transaction()
        if sent is not None:
            self._ledger_next = (await sent).offset + 1  # delivered with the commit
            for o in outputs:
                self._count(o)  # counted once published
        self.failure = None
        self.metrics.published()
        self.stats.transactions += 1

    async def _publish(
        self,
        producer: AIOKafkaProducer,
        outputs: list[Output],
        entry: Output | None,
        ready: bool,
        now: datetime,
        received: float,
    ) -> asyncio.Future | None:
        """Send the pass's messages (in its open transaction); the ledger entry's delivery."""
        d = self.dispatcher
        self._sent = []
        if ready:  # the state after an earlier transaction: recovery replays the ledger entries after it
            assert self._snapshot is not None  # ready: a snapshot was made
            records, self._snapshot = d.snapshot_taken(self._snapshot.result()), None  # the snapshot, then its parts
            sent_bytes = 0
            try:
                try:
                    for snap in records:
                        sent_bytes += (await self._send(producer, snap))[0]
                finally:
                    self._since = self._since.sent(sent_bytes)
            except PublishFailed as e:  # the pool goes on; a restart replays the ledger further
                log.error("pool %s: %s; a restart replays the ledger further", self.pool, e)
        if entry is None:
            return None
        for o in outputs:
            _stamp(o, received)
            await self._send(producer, o)
        size, sent = await self._send(producer, entry)
        self._since = self._since.written(size)
        committed = any(_message(o)["type"] == "plan.committed" for o in outputs)
        due = self._since.due(d.txn, committed, self.settings.snapshot_every)
        # events waiting for the pool's configuration stay in the ledger; one snapshot at a time;
        # none while a cut waits for its boundary (a snapshot holds no plan made ahead)
        if due and d.reads.view is not None and not d.reads.cut_pending and self._snapshot is None:
            # where recovery reads the ledger from: at or before this entry (it skips the
            # entries the snapshot holds by their txn), known without waiting for this entry's
            # offset, a round trip inside the pass that commits a step
            assert self._ledger_next is not None  # found by `_recover`, before the first pass
            job = d.snapshot_job(
                now,
                partition_of(self.pool, self._counts[entry.topic]),
                self._ledger_next,
                partition_of(self.pool, self._counts[self.topics.state]),
            )
            self._snapshot = asyncio.get_running_loop().run_in_executor(None, job)  # compressed off the loop
            self._since = self._since.taken(d.txn)
        # for lag monitoring (recovery resumes from the ledger's own frontier); not in a pass that
        # commits a step, which holds up the arrivals behind it
        if d.frontier and not committed and time.monotonic() - self._offsets_sent >= OFFSETS_EVERY_S:
            await producer.send_offsets_to_transaction(_offsets(d.frontier), self.group_id)
            self._offsets_sent = time.monotonic()
        return sent

    async def _delivered(self) -> None:
        """Every message of the pass delivered into its transaction. The broker refuses one over
        its own limit (`max.message.bytes`, below the producer's) in its delivery alone, and the
        transaction would commit without it (a commit's part, a snapshot's): PublishFailed then,
        naming it, so the pass is aborted whole."""
        results = await asyncio.gather(*(f for *_, f in self._sent), return_exceptions=True)
        for (kind, key, size, _), result in zip(self._sent, results):
            if isinstance(result, (MessageSizeTooLargeError, RecordTooLargeError)):
                raise PublishFailed("too_large", kind, key, size, f"the broker refused it ({result})")
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _send(self, producer: AIOKafkaProducer, o: Output) -> tuple[int, asyncio.Future]:
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
        self._sent.append((kind, o.key, size, delivery))
        return size, delivery

    def _count(self, o: Output) -> None:
        message = _message(o)
        kind, p = message["type"], message["payload"]
        if kind == "allocation.decided":
            self.stats.decisions += 1
            self.metrics.decided(p["action"], p["latency_ms"] / 1000)
            log.debug(
                "job %s: %s",
                p["job_id"],
                p["action"],
                extra={"job_id": p["job_id"], "action": p["action"], "event_id": p["input_event_id"]},
            )
        elif kind == "plan.committed":
            if (p := self._parts.add(p)) is None:
                return  # the commit's other parts follow in this transaction
            self.stats.commits += not p.get("reactive")  # a step's, not its reactive ones
            self._committed(p)
            log.info(
                "plan for step %d (seq %d, %s)",
                p["step"],
                p["seq"],
                p["source"],
                extra={"step": p["step"], "seq": p["seq"], "source": p["source"]},
            )
        elif kind == "input.rejected":
            self.stats.rejected += 1
            self.metrics.dead_lettered(p["reason"])
            log.warning(
                "dead-lettered %s: %s",
                message["event_id"],
                p["reason"],
                extra={"event_id": message["event_id"], "input": f"{p['topic']}:{p['partition']}@{p['offset']}"},
            )

    def _committed(self, payload: dict) -> None:
        planner, commit = self.dispatcher.reads.view, self.dispatcher.last_commit
        assert planner is not None  # a pool that commits is configured
        if payload.get("reactive"):
            if self._step_commit is None or self._step_commit["step"] != payload["step"]:
                return  # its step's commit came before this agent was watching
            payload = {**folded(self._step_commit, payload), "reactive": True}
        self._step_commit = payload
        demand = (
            {app.id: app.demand[0] for app in commit.window.realtime}
            if commit is not None and commit.step == payload["step"]
            else dict.fromkeys(planner.apps, 0)
        )
        for app_id, app in planner.apps.items():  # what a reactive grant answered
            demand[app_id] = max(demand.get(app_id, 0), app.observed.get(payload["step"], 0))
        self.metrics.committed(payload, planner.config.gpus, planner.down.bit_count(), len(planner.queued), demand)

    def _lag(self, consumer: AIOKafkaConsumer) -> None:
        """Records on each input partition past the frontier (what arrived and is not yet read)."""
        for tp in consumer.assignment():
            end = consumer.highwater(tp)
            if end is not None:
                lag = max(0, end - self.dispatcher.frontier.get(f"{tp.topic}:{tp.partition}", 0))
                self.metrics.lag.labels(self.pool, tp.topic, str(tp.partition)).set(lag)

    def _wait_ms(self) -> int:
        """How long a poll may wait: until the next boundary, or the cut before it."""
        longest = self.settings.max_wait_ms
        d, now = self.dispatcher, self.clock.now()
        wake = self._cut_time() or d.reads.next_boundary()
        if wake is None:
            return longest
        if wake <= now and self.ahead is not None and self.ahead.awaited(d, wake, d.reads.step_length, now):
            return AWAIT_POLL_MS  # the boundary waits for its plan: noticed soon after it is made
        ahead = (wake - now).total_seconds() * 1000
        return int(min(longest, max(0.0, ahead)))

    def _cut_time(self) -> datetime | None:
        """When the window is to be cut for the next boundary's plan (None: not to be, or cut)."""
        d = self.dispatcher
        boundary = d.reads.next_boundary()
        if self.ahead is None or boundary is None or d.reads.cut_pending or self.ahead.process.busy:
            return None
        return self.ahead.cut_time(boundary, d.reads.step_length)

    def _cut(self, now: datetime) -> None:
        """Cut the window for the next boundary's plan once its time has come (not when the
        boundary has too: a pool behind its clock replans)."""
        at, ahead, boundary = self._cut_time(), self.ahead, self.dispatcher.reads.next_boundary()
        # `_cut_time` gives a time only with plans made ahead and a boundary to come
        if at is not None and ahead is not None and boundary is not None and at <= now < boundary:
            ahead.launch(self.dispatcher, now)

    def _boundaries(self, now: datetime) -> list[Output]:
        """Commit the steps whose start has come, at most `catch_up_steps` a pass (a pool found
        far behind its clock, after a restart or a stall, catches up over several passes while
        arrivals keep being decided); full mode is collected and launched here."""
        out: list[Output] = []
        d, steps = self.dispatcher, 0
        while (boundary := d.reads.next_boundary()) is not None and boundary <= now:
            if steps == self.settings.catch_up_steps:
                behind = int((now - boundary) / d.reads.step_length) + 1
                log.warning("pool %s: %d steps behind the clock; committing %d a pass", self.pool, behind, steps)
                break
            if self.ahead is not None and self.ahead.awaited(d, boundary, d.reads.step_length, now):
                break  # its plan made ahead is on its way: arrivals go on being decided meanwhile
            plan, ended = self.worker.collect() if self.worker is not None else (None, None)
            if ended is not None and ended.outcome in ("failed", "timed_out"):
                log.warning("pool %s: full mode failed: %s", self.pool, ended.detail)
            skipped = self.worker.skipped if self.worker is not None else None
            said = f"skipped: {skipped}" if skipped is not None else None
            if ended is not None and plan is None:
                said = f"{'not adopted' if ended.outcome == 'not_better' else 'failed'}: {ended.detail}"
            carried, began = d.reads.ahead_ready(), time.perf_counter()
            out += d.commit(now, plan, full_mode=said, report=self._full_mode_report(ended))  # its parts
            # what replaying this commit will cost: its pass, and the plan made ahead that it carried
            self._since = self._since.planned(
                time.perf_counter() - began + (self.ahead.plan_s if carried and self.ahead else 0.0)
            )
            steps += 1
            if d.reads.full_mode_due() and not (boundary + d.reads.step_length <= now):  # not while catching up
                self._launch_full_mode()
            elif self.worker is not None and not d.reads.full_mode_due():
                self.worker.release()  # idle until a later step: its memory is not held meanwhile
        return out

    def _full_mode_report(self, ended: FullModeSolve | None) -> FullModeReport | None:
        """What became of full mode since the last commit, for the commit being made (None: the
        policy has none): `ended`, the solve collected at this boundary."""
        d, worker = self.dispatcher, self.worker
        every, step = d.reads.full_mode_every, step_of(d.reads)
        if not every or step is None:
            return None
        last = ended or (d.full_mode_report.last if d.full_mode_report is not None else None)
        report = FullModeReport(state="not_due", last=last, next_step=next_due(step + 1, every))
        if ended is not None:
            return report.model_copy(update={"state": "ran"})
        if worker is not None and worker.busy:
            return report.model_copy(update={"state": "running", "running_since": worker.solving})
        if worker is not None and worker.skipped is not None:
            return report.model_copy(update={"state": "skipped", "detail": worker.skipped})
        return report

    def _launch_full_mode(self) -> None:
        s = self.settings
        if self.worker is None:
            full_mode = self.policy.full_mode
            assert full_mode is not None  # full mode is due only for a policy that has one (`Pool.use`)
            limit = s.full_mode_time_limit(self.dispatcher.reads.step_length.total_seconds())
            memory = None if s.full_mode_memory_mb is None else s.full_mode_memory_mb << 20
            self.worker = FullModeWorker(
                s.full_mode.options.model_copy(update={"time_limit": limit}),
                s.full_mode.max_jobs,
                full_mode.name,
                memory,
                s.full_mode_max_nonzeros,
            )
        self.worker.launch(self.dispatcher.reads.full_mode_problem(self.worker.max_jobs))
        if self.worker.skipped is not None and not self._skip_said:  # each commit says it after this
            log.warning("pool %s: full mode not started: %s", self.pool, self.worker.skipped)
        self._skip_said = self.worker.skipped is not None


def _stamp(o: Output, received: float) -> None:
    """A decision's latency: from its poll's records received to its sending."""
    message = _message(o)
    if message["type"] == "allocation.decided":
        message["payload"]["latency_ms"] = round((time.perf_counter() - received) * 1000, 3)


def _message(o: Output) -> dict[str, Any]:
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
