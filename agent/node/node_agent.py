"""The node agent: binds and releases one node's GPUs as the planner's decisions and commits say.

An asyncio shell around `gpualloc.agent.node.core.NodeState` (the rules) and an `gpualloc.agent.node.binders.Binder`
(the node). On start it resyncs: the latest `plan.committed` of its pool (read from the tail of
every commits partition) against the binder's own record, releasing stale bindings and binding
missing ones. Then it follows decisions and commits from their ends, reporting every bind and
release as `binding.reported` (key: node id).

Partitions are assigned manually, without a consumer group: every node agent must see every
message of its pool (a shared group would split them), offsets need no committing (the resync
rebuilds the state from the latest commit and the binder's record), and there is no group
join or rebalance on start. Partitions added to a topic later need a restart.

`job.failed` (key: job id, source "node-agent:<node>") follows a failed bind unless the id is a
known real-time app. Apps never appear as jobs: an id is a job once it appeared in an
`allocation.decided` or a commit's `started` list, and an app when it first appeared in the
assignments of a commit this agent applied after an earlier one without either. Ids the agent
cannot tell (assigned before it started watching) get `job.failed` with a note in the detail;
the planner ignores `job.failed` for ids it does not run as jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError, KafkaTimeoutError
from pydantic import ValidationError

from gpualloc.agent import logs
from gpualloc.agent.metrics import HealthServer, NodeMetrics
from gpualloc.agent.node.binders import Binder
from gpualloc.agent.node.core import Action, NodeState, read_commit
from gpualloc.bus import clients
from gpualloc.bus.clients import Broker
from gpualloc.bus.topics import Topics, decode, encode
from gpualloc.schemas.commits import Parts, current
from gpualloc.schemas.events import BindingReported, JobRef, NodeHeartbeat, envelope
from gpualloc.schemas.published import PlanCommitted
from gpualloc.schemas.settings import NodeAgentSettings

log = logging.getLogger("gpualloc.node_agent")


class NodeAgent:
    """One node's agent. `gpus_range` is the node's pool-global GPU indices (range(8, 16) for
    node 1 of 8-GPU nodes); `step` is the step reported until a decision or commit names one.
    `ready` is set once the resync is done and the agent follows the topics."""

    def __init__(
        self,
        bootstrap: Broker | str,
        node: int,
        gpus_range: range,
        binder: Binder,
        pool: str = "default",
        topics: Topics = Topics(),
        step: int | None = None,
        settings: NodeAgentSettings = NodeAgentSettings(),
    ) -> None:
        if gpus_range.step != 1 or len(gpus_range) == 0 or gpus_range.start < 0:
            raise ValueError(f"gpus_range: must be a non-empty range of indices >= 0 with step 1, got {gpus_range}")
        self.bootstrap, self.binder, self.topics = bootstrap, binder, topics
        self.state = NodeState(node, gpus_range.start, len(gpus_range), pool)
        self.step = step
        self.settings = settings
        self.ready = asyncio.Event()
        self.metrics = NodeMetrics(pool, node)
        self.health = HealthServer(self.metrics.registry, self.ready.is_set)
        self._producer: AIOKafkaProducer | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """`serve`, every log line of it carrying the node and the pool, with the metrics and
        health endpoints on `metrics_port` when set."""
        with logs.bind(node=self.state.node, pool=self.state.pool):
            if self.settings.metrics_port is None:
                await self.serve(stop)
                return
            port = await self.health.start(self.settings.metrics_port)
            log.info("metrics on port %d (/metrics, /healthz, /readyz)", port, extra={"port": port})
            try:
                await self.serve(stop)
            finally:
                await self.health.close()

    async def serve(self, stop: asyncio.Event) -> None:
        """Resync, then follow decisions and commits until `stop` is set; closes its clients."""
        name = f"gpualloc-node-{self.state.node}"
        producer = clients.producer(self.bootstrap, client_id=name, enable_idempotence=True, acks="all")
        consumer = clients.consumer(
            bootstrap=self.bootstrap,
            client_id=name,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="latest",
            isolation_level="read_committed",  # the agent commits in transactions
            fetch_max_wait_ms=self.settings.fetch_wait_ms,
        )
        try:
            self._producer = await clients.started(producer, f"{name} producer")
            await clients.started(consumer, f"{name} consumer")
            await self._follow(consumer, stop)
        finally:
            self._producer = None
            await clients.close(consumer)
            await clients.close(producer)

    # ---- start-up -------------------------------------------------------------------------
    async def _partitions(self, topic: str, stop: asyncio.Event) -> list[TopicPartition] | None:
        """The topic's partitions (waiting for it to exist); None if stopped meanwhile."""
        assert self._producer is not None
        while not stop.is_set():
            try:  # bounded, so a `stop` set meanwhile is noticed
                found = await asyncio.wait_for(self._producer.partitions_for(topic), self.settings.partitions_wait_s)
                return [TopicPartition(topic, p) for p in sorted(found)]
            except (KafkaTimeoutError, TimeoutError):
                log.warning("node %d: topic %s not available yet; retrying", self.state.node, topic)
        return None

    async def _follow(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        commits = await self._partitions(self.topics.commits, stop)
        decisions = await self._partitions(self.topics.decisions, stop)
        if commits is None or decisions is None:
            return
        consumer.assign(commits + decisions)
        for tp, end in (await consumer.end_offsets(decisions)).items():
            consumer.seek(tp, end)  # decisions older than the latest commit are in it
        latest = await self._latest_commit(consumer, commits, stop)
        record = await asyncio.to_thread(self.binder.bound)
        commit, event_id = (latest[1], latest[0]) if latest else (None, None)
        log.info(
            "node %d: resync with %s against %d bound",
            self.state.node,
            f"commit seq {commit.seq} (step {commit.step})" if commit else "no commit",
            len(record),
        )
        await self._execute(self.state.resync(record, commit, event_id))
        self.ready.set()
        beating = asyncio.create_task(self._beat(stop) if self.settings.heartbeat_s else stop.wait())
        try:
            while not stop.is_set():
                for records in (await consumer.getmany(timeout_ms=self.settings.poll_ms)).values():
                    for r in records:
                        await self._handle(r)
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def _beat(self, stop: asyncio.Event) -> None:
        """A `node.heartbeat` every `heartbeat_s` while it follows the topics: the pool agent
        places new work only on nodes whose agent it hears (`node_watch`), and a start this node
        bound is confirmed by it, should its `binding.reported` have been lost (`heartbeat_s` 0: none)."""
        interval = self.settings.heartbeat_s
        while not stop.is_set():
            try:
                payload = NodeHeartbeat(
                    node=self.state.node, interval_seconds=interval, holders=sorted(self.state.bound)
                )
            except ValueError as e:
                log.error("node %d: cannot send a heartbeat: %s", self.state.node, e)
            else:
                await self._publish(self.topics.bindings, "node.heartbeat", payload)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)

    async def _latest_commit(
        self, consumer: AIOKafkaConsumer, tps: list[TopicPartition], stop: asyncio.Event
    ) -> tuple[str, PlanCommitted] | None:
        """What holds now (`commits.current`: the latest whole commit, the reactive ones of its step
        applied) among the last `resync_depth` messages of each commits partition (a commit whose
        first parts lie before them is passed over); leaves each partition positioned at its end
        (nothing is skipped)."""
        ends = await consumer.end_offsets(tps)
        begins = await consumer.beginning_offsets(tps)
        for tp in tps:
            consumer.seek(tp, max(begins[tp], ends[tp] - self.settings.resync_depth))
        pending = {tp for tp in tps if ends[tp] > begins[tp]}
        wholes: dict[int, tuple[str, dict[str, Any]]] = {}  # seq -> (event id, whole commit)
        parts = Parts(keep=len(tps) * self.settings.resync_depth)
        deadline = asyncio.get_running_loop().time() + self.settings.resync_timeout_s
        while pending and not stop.is_set():
            for records in (await consumer.getmany(*pending, timeout_ms=self.settings.poll_ms)).values():
                for r in records:
                    found = self._commit_of(r)
                    whole = parts.add(found[1]) if found else None
                    if whole is not None:
                        assert found is not None  # `whole` came from it
                        wholes[whole["seq"]] = found[0], whole
            pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
            if asyncio.get_running_loop().time() > deadline:
                log.warning("node %d: resync read timed out; using the latest commit found", self.state.node)
                break
        now = current(whole for _, whole in wholes.values())
        return None if now is None else (wholes[now["seq"]][0], PlanCommitted.model_validate(now))

    def _commit_of(self, r: ConsumerRecord) -> tuple[str, dict[str, Any]] | None:
        try:
            return read_commit(decode(r.value), self.state.pool) if r.value is not None else None
        except (ValueError, TypeError) as e:
            self._skip(r, e)
            return None

    def _skip(self, r: ConsumerRecord, e: Exception) -> None:
        """Log a malformed message briefly (which fields, which rule) and go on."""
        if isinstance(e, ValidationError):
            why = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'message'}: {err['msg']}" for err in e.errors()[:5])
        else:
            why = str(e)
        log.warning(
            "node %d: skipping malformed message %s[%d]@%d: %s", self.state.node, r.topic, r.partition, r.offset, why
        )

    # ---- messages and actions ---------------------------------------------------------------
    async def _handle(self, r: ConsumerRecord) -> None:
        """One decision or commit; a malformed one is logged and skipped."""
        try:
            if r.value is None:
                raise ValueError("empty value")
            message = decode(r.value)
            if not isinstance(message, dict):
                raise ValueError(f"not a JSON object: {type(message).__name__}")
            actions = self.state.on_message(message)
        except (ValueError, TypeError) as e:
            self._skip(r, e)
            return
        if self.state.last is not None:
            self.step = self.state.last[0]
        await self._execute(actions)

    async def _execute(self, actions: list[Action]) -> None:
        """Do each action through the binder (off the event loop) and report it."""
        for a in actions:
            began = time.perf_counter()
            try:
                if a.kind == "bind":
                    await asyncio.to_thread(self.binder.bind, a.job_id, list(a.local_ids), list(a.global_ids))
                elif a.kind == "shrink":
                    await asyncio.to_thread(self.binder.shrink, a.job_id, list(a.local_ids))
                else:
                    await asyncio.to_thread(self.binder.release, a.job_id)
                self.metrics.did(a.kind, True, time.perf_counter() - began, self._bound_gpus())
            except Exception as e:  # any binder failure is reported, never fatal
                detail = f"{a.kind}: {e}"
                log.error(
                    "node %d: %s of %r failed: %s", self.state.node, a.kind, a.job_id, e, extra={"job_id": a.job_id}
                )
                self.state.failed(a)
                self.metrics.did(a.kind, False, time.perf_counter() - began, self._bound_gpus())
                if a.kind == "bind":
                    await self._release_quietly(a.job_id)
                await self._report(a, "failed", detail)
                if a.kind == "bind":
                    await self._job_failed(a.job_id, detail)
                continue
            await self._report(a, "bound" if a.kind == "bind" else "released", "")

    def _bound_gpus(self) -> int:
        return sum(len(gpus) for gpus in self.state.bound.values())

    async def _release_quietly(self, job_id: str) -> None:
        """After a failed bind nothing should stay half-bound (the state says unbound)."""
        try:
            await asyncio.to_thread(self.binder.release, job_id)
        except Exception as e:
            log.warning("node %d: release after a failed bind of %r failed too: %s", self.state.node, job_id, e)

    async def _report(self, a: Action, status: Literal["bound", "released", "failed"], detail: str) -> None:
        step = a.step if a.step is not None else self.step
        try:
            payload = BindingReported(
                node=self.state.node, job_id=a.job_id, gpus=list(a.global_ids), status=status, step=step, detail=detail
            )
        except ValueError as e:
            log.error("node %d: cannot report %s of %r: %s", self.state.node, status, a.job_id, e)
            return
        await self._publish(self.topics.bindings, "binding.reported", payload)

    async def _job_failed(self, job_id: str, detail: str) -> None:
        kind = self.state.is_app(job_id)
        if kind is True:
            return  # a real-time app: not a job upstream could fail
        if kind is None:
            detail += " (the node agent could not tell this id from a real-time app)"
        try:
            payload = JobRef(id=job_id, detail=detail, source=f"node-agent:{self.state.node}")
        except ValueError as e:
            log.error("node %d: cannot publish job.failed for %r: %s", self.state.node, job_id, e)
            return
        await self._publish(self.topics.jobs, "job.failed", payload)

    async def _publish(self, topic: str, kind: str, payload: Any) -> None:
        """Publish a notice keyed by the pool, as the contract keys the input topics."""
        assert self._producer is not None
        message = envelope(kind, payload, datetime.now(UTC), uuid.uuid4().hex, pool=self.state.pool)
        try:
            await self._producer.send_and_wait(topic, encode(message), key=self.state.pool.encode())
        except KafkaError as e:  # reports are notices: a lost one must not stop the binding
            log.error("node %d: publishing %s to %s failed: %s", self.state.node, kind, topic, e)
