"""Prometheus metrics and health endpoints of the agents, on one HTTP port (`--metrics-port`):
`/metrics` (the text format), `/healthz` (200 while the event loop turns: the same loop serves
it, so a stuck loop cannot answer) and `/readyz` (200 once connected, state restored and
consuming; 503 before, and while a lost broker is being reconnected; a node agent: once resynced).

Each agent keeps its own registry, so several in one process (tests, a group) do not collide."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Callable, get_args

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpualloc.agent.service.held import START_METRIC
from gpualloc.schemas.published import FullModeOutcome, FullModeReport
from gpualloc.solvers.metrics import app_moves, idle_moves
from gpualloc.solvers.planner.full_mode import outcome
from gpualloc.solvers.planner.node_watch import Liveness
from gpualloc.solvers.release import release

ACTIONS = ("start", "planned", "queued", "rejected")  # of allocation.decided
GPU_STATES = ("batch", "realtime", "down", "idle")
NODE_AGENT_STATES = ("live", "silent", "never", "waiting")  # of `gpualloc_node_agents`
PUBLISH_FAILURES = ("too_large", "unserializable")  # a pass no retry can publish (`publishing.PublishFailed`)
# what became of full mode at a commit: how its solve ended, or its state (`full_mode.outcome`)
FULL_MODE_OUTCOMES = (*get_args(FullModeOutcome), "running", "skipped", "not_due")
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def reason_label(reason: str) -> str:
    """A dead letter's reason as a bounded label: the field it names ("priority", "features.epochs")
    or the kind of refusal ("not JSON"), never the free text after it."""
    head = reason.split(":", 1)[0].split("(", 1)[0].strip()
    return re.sub(r"[^A-Za-z0-9_.\[\] -]", "", head)[:40] or "other"


def gpu_states(assignments: dict[str, list[int]], apps, gpus: int, down: int) -> dict[str, int]:
    """A commit's GPUs by state (`GPU_STATES`): held by batch jobs, by the real-time `apps`,
    on nodes that are down, and idle."""
    held = {owner: len(ids) for owner, ids in assignments.items()}
    realtime = sum(n for owner, n in held.items() if owner in apps)
    batch = sum(held.values()) - realtime
    return dict(zip(GPU_STATES, (batch, realtime, down, max(0, gpus - batch - realtime - down))))


class AgentMetrics:
    """The pool agent's metrics, labelled by pool."""

    def __init__(self, pool: str) -> None:
        self.registry, self.pool = CollectorRegistry(), pool
        r, p = self.registry, ["pool"]
        self.decisions = Counter("gpualloc_decisions", "Allocation decisions published", p + ["action"], registry=r)
        self.latency = Histogram(
            "gpualloc_decision_latency_seconds",
            "Arrival received to its decision published",
            p,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.dead_letters = Counter("gpualloc_dead_letters", "Input records dead-lettered", p + ["reason"], registry=r)
        self.queue = Gauge("gpualloc_queue_depth", "Jobs queued (not running)", p, registry=r)
        self.gpus = Gauge(
            "gpualloc_gpus", "GPUs of the pool in the last committed step, by state", p + ["state"], registry=r
        )
        self.utilization = Gauge(
            "gpualloc_utilization", "Share of the pool's GPUs assigned in the last commit", p, registry=r
        )
        self.shortfall = Gauge(
            "gpualloc_realtime_shortfall_gpus",
            "Real-time observed need (within each app's ceiling) not held in the last commit",
            p,
            registry=r,
        )
        self.moves = Counter(
            "gpualloc_realtime_moves",
            "GPUs real-time apps moved between consecutive committed steps (a release and a bind each; "
            "divide by gpualloc_realtime_app_steps for moves per app-step)",
            p,
            registry=r,
        )
        self.app_steps = Counter(
            "gpualloc_realtime_app_steps", "App-steps whose move count is in gpualloc_realtime_moves", p, registry=r
        )
        self.idle_moves = Counter(
            "gpualloc_realtime_idle_moves",
            "Of gpualloc_realtime_moves, those no work needed: every GPU the app left stayed idle, its node up",
            p,
            registry=r,
        )
        # (step, its app sets, every holder's sets, its GPUs of nodes down or drained, the app sets of the step before)
        self._steps: tuple[
            int | None, dict[str, tuple[int, ...]], dict[str, list[int]], int, dict[str, tuple[int, ...]]
        ] = (
            None,
            {},
            {},
            0,
            {},
        )
        self.gap = Gauge(
            "gpualloc_full_mode_gap", "Relative gap of the last adopted full-mode plan to its bound", p, registry=r
        )
        self.adopted = Counter("gpualloc_full_mode_adopted", "Commits whose plan came from full mode", p, registry=r)
        self.full_mode = Counter(
            "gpualloc_full_mode_outcomes",
            "Commits by what became of full mode since the previous one (how a solve ended, or running, "
            "skipped, not_due)",
            p + ["outcome"],
            registry=r,
        )
        self.commits = Counter("gpualloc_commits", "Steps committed", p, registry=r)
        self.reactive = Counter(
            "gpualloc_reactive_commits", "Reactive commits: idle GPUs granted to apps within a step", p, registry=r
        )
        self.lag = Gauge(
            "gpualloc_consumer_lag", "Input records not consumed yet", p + ["topic", "partition"], registry=r
        )
        self.publish_failures = Counter(
            "gpualloc_publish_failures", "Passes that could not be published, by why", p + ["kind"], registry=r
        )
        self.internal_errors = Counter(
            "gpualloc_internal_errors",
            "Passes the planner core raised on, their records dead-lettered, by exception",
            p + ["error"],
            registry=r,
        )
        self.publish_failing = Gauge(
            "gpualloc_publish_failing", "1 from a pass that could not be published until one is", p, registry=r
        )
        self.node_agents = Gauge(
            "gpualloc_node_agents",
            "Nodes by what the pool knows of their agent (live; silent; never: not reported within a silence bound "
            "of the pool's first heartbeat; waiting: not yet); all 0 until a node agent reports",
            p + ["state"],
            registry=r,
        )
        self.starts_unbound = Gauge(
            "gpualloc_starts_unbound",
            "Jobs started and not bound by their nodes' agents past bind_confirm_seconds",
            p,
            registry=r,
        )
        self.jobs_unconfirmed = Gauge(
            "gpualloc_jobs_unconfirmed", "Running jobs on nodes whose agent is silent or never reported", p, registry=r
        )
        self.starts_requeued = Counter(
            "gpualloc_starts_requeued",
            "Starts no node agent bound within bind_requeue_seconds, re-queued as never run",
            p,
            registry=r,
        )
        self.started = Gauge(
            START_METRIC,
            "When this agent took the pool (Unix time): a second agent on the host names it",
            p,
            registry=r,
        )
        self.started.labels(pool).set(time.time())
        self.release = Info(
            "gpualloc_release",
            "The agent's release: package version, planning rules, ledger schema, heuristic (compiled or python)",
            p,
            registry=r,
        )
        self.release.labels(pool).info({k: str(v) for k, v in release().items()})
        # Every series whose labels are known is there from the start (at 0), so a dashboard or an
        # alert sees it before its first event, and rate() sees the first one.
        for action in ACTIONS:
            self.decisions.labels(pool, action)
        for state in GPU_STATES:
            self.gpus.labels(pool, state)
        for kind in PUBLISH_FAILURES:
            self.publish_failures.labels(pool, kind)
        for word in FULL_MODE_OUTCOMES:
            self.full_mode.labels(pool, word)
        for state in NODE_AGENT_STATES:
            self.node_agents.labels(pool, state)
        for metric in (
            self.latency,
            self.queue,
            self.utilization,
            self.shortfall,
            self.gap,
            self.adopted,
            self.commits,
            self.reactive,
            self.publish_failing,
            self.starts_unbound,
            self.jobs_unconfirmed,
            self.starts_requeued,
        ):
            metric.labels(pool)

    def decided(self, action: str, latency_s: float) -> None:
        self.decisions.labels(self.pool, action).inc()
        self.latency.labels(self.pool).observe(latency_s)

    def watched(self, now: Liveness) -> None:
        """What the pool knows of its node agents (`node_watch.liveness`)."""
        counts = {
            "live": len(now.live),
            "silent": len(now.silent),
            "never": len(now.never),
            "waiting": len(now.waiting),
        }
        for state, n in counts.items():
            self.node_agents.labels(self.pool, state).set(n)
        self.starts_unbound.labels(self.pool).set(len(now.unbound))
        self.jobs_unconfirmed.labels(self.pool).set(len(now.unconfirmed))

    def requeued_unbound(self) -> None:
        self.starts_requeued.labels(self.pool).inc()

    def publish_failed(self, kind: str) -> None:
        self.publish_failures.labels(self.pool, kind).inc()
        self.publish_failing.labels(self.pool).set(1)

    def internal_error(self, error: str) -> None:
        self.internal_errors.labels(self.pool, error).inc()

    def published(self) -> None:
        self.publish_failing.labels(self.pool).set(0)

    def dead_lettered(self, reason: str) -> None:
        self.dead_letters.labels(self.pool, reason_label(reason)).inc()

    def committed(
        self, payload: dict, gpus: int, down: int, queued: int, demand: dict[str, int], unavailable: int = 0
    ) -> None:
        """A `plan.committed` payload (a reactive one folded into its step's: `commits.folded`)
        and the pool's state after it; `demand`: each app's observed need in the committed step
        within its ceiling (`need.needs`, what `status` reports), the shortfall counted against; `unavailable`:
        the GPUs of nodes down or drained (a mask), which apps leave for a reason."""
        assignments = payload["assignments"]
        states = gpu_states(assignments, demand, gpus, down)
        shortfall = sum(max(0, need - len(assignments.get(app, ()))) for app, need in demand.items())
        for state, n in states.items():
            self.gpus.labels(self.pool, state).set(n)
        self.utilization.labels(self.pool).set((states["batch"] + states["realtime"]) / gpus if gpus else 0.0)
        self.queue.labels(self.pool).set(queued)
        self.shortfall.labels(self.pool).set(shortfall)
        self._count_moves(
            payload["step"], {app: tuple(assignments.get(app, ())) for app in demand}, assignments, unavailable
        )
        if payload.get("reactive"):  # folded into its step's commit, already counted
            self.reactive.labels(self.pool).inc()
            return
        self.commits.labels(self.pool).inc()
        if payload.get("full_mode_report") is not None:
            self.full_mode.labels(self.pool, outcome(FullModeReport.model_validate(payload["full_mode_report"]))).inc()
        if payload["source"] == "milp":
            self.adopted.labels(self.pool).inc()
            bound = payload.get("bound")
            if bound:
                self.gap.labels(self.pool).set(max(0.0, (bound - payload["objective"]) / abs(bound)))

    def _count_moves(
        self, step: int, sets: dict[str, tuple[int, ...]], assignments: dict[str, list[int]], unavailable: int
    ) -> None:
        """Keep `step`'s app sets, every holder's sets and the GPUs unavailable in it (a reactive
        commit's replace its step's); when a later step comes, count the moves of the step before
        it as it ended, against the one before that: all of them, and those for nothing
        (`metrics.idle_moves`)."""
        current, ended, ended_all, ended_dead, before = self._steps
        if current is not None and step != current:
            for app, gpus in ended.items():
                if app in before:
                    self.moves.labels(self.pool).inc(app_moves(before[app], gpus))
                    self.idle_moves.labels(self.pool).inc(idle_moves(before[app], gpus, ended_all.values(), ended_dead))
                    self.app_steps.labels(self.pool).inc()
            before = ended
        self._steps = (step, sets, assignments, unavailable, before)


class NodeMetrics:
    """A node agent's metrics, labelled by pool and node."""

    def __init__(self, pool: str, node: int) -> None:
        self.registry, self.labels = CollectorRegistry(), (pool, str(node))
        r, p = self.registry, ["pool", "node"]
        self.binds = Counter(
            "gpualloc_node_binds", "Binds and releases done, by outcome", p + ["action", "status"], registry=r
        )
        self.latency = Histogram(
            "gpualloc_node_bind_latency_seconds",
            "A bind or release through the binder",
            p + ["action"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.bound = Gauge("gpualloc_node_bound_gpus", "GPUs of the node bound to jobs and apps", p, registry=r)
        for action in ("bind", "release", "shrink"):
            self.latency.labels(*self.labels, action)
            for status in ("ok", "failed"):
                self.binds.labels(*self.labels, action, status)
        self.bound.labels(*self.labels)

    def did(self, action: str, ok: bool, seconds: float, bound_gpus: int) -> None:
        self.binds.labels(*self.labels, action, "ok" if ok else "failed").inc()
        self.latency.labels(*self.labels, action).observe(seconds)
        self.bound.labels(*self.labels).set(bound_gpus)


class PoolsCollector(Collector):
    """The metrics of every pool a group member runs now, merged into one family per name (an
    exposition may name each family once), and how many pools that is. A pool handed over leaves
    with its series; its counters restart at its new owner, which Prometheus reads as a reset."""

    def __init__(self, registries: Callable[[], list[CollectorRegistry]]) -> None:
        self.registries = registries

    def collect(self):
        registries = self.registries()
        owned = GaugeMetricFamily("gpualloc_group_pools", "Pools this group member runs now")
        owned.add_metric([], len(registries))
        yield owned
        merged: dict[str, Metric] = {}
        for registry in registries:
            for family in registry.collect():
                into = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type))
                into.samples.extend(family.samples)
        yield from merged.values()


class HealthServer:
    """`/metrics`, `/healthz` and `/readyz` on `port`, served by the running event loop."""

    def __init__(self, registry: CollectorRegistry, ready: Callable[[], bool]) -> None:
        self.registry, self.ready = registry, ready
        self._server: asyncio.Server | None = None

    async def start(self, port: int, host: str = "0.0.0.0") -> int:
        """Listen; the port bound (`port` 0: any free one)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            path = request.split()[1].decode("ascii", "replace") if len(request.split()) > 1 else "/"
            while (await asyncio.wait_for(reader.readline(), 5)).strip():
                pass  # headers: nothing here needs them
            status, kind, body = self._answer(path.split("?", 1)[0])
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    def _answer(self, path: str) -> tuple[str, str, bytes]:
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path == "/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == "/readyz":
            return (
                ("200 OK", "text/plain", b"ready\n")
                if self.ready()
                else ("503 Service Unavailable", "text/plain", b"not ready: connecting or restoring state\n")
            )
        return "404 Not Found", "text/plain", b"/metrics, /healthz, /readyz\n"
