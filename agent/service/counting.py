"""What the agent counts: its stats, and the metrics and log lines of each message it published,
once its transaction committed (a commit split into parts counted once whole, a reactive commit
folded into its step's), and the consumer lag of each input partition."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer

from gpualloc.agent.metrics import AgentMetrics
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.outbox import Output, is_unbound_requeue
from gpualloc.agent.service.publishing import message_of
from gpualloc.schemas.commits import Parts, folded
from gpualloc.solvers.planner.need import needs

log = logging.getLogger("gpualloc.agent")


@dataclass
class AgentStats:
    records: int = 0  # input records consumed
    decisions: int = 0  # allocation.decided published
    commits: int = 0  # steps committed (a step's reactive commits not counted)
    rejected: int = 0  # records dead-lettered
    transactions: int = 0  # transactions committed (a pass's outputs, a snapshot)
    replayed: int = 0  # ledger entries replayed by recoveries
    recovery_s: float = 0.0  # the last recovery's time, from its start to ready


@dataclass
class Tally:
    """The agent's stats, and what counting a commit needs of those before it."""

    stats: AgentStats = field(default_factory=AgentStats)
    parts: Parts = field(default_factory=Parts)  # a split commit's parts, counted once whole
    step_commit: dict | None = None  # the current step's commit as published, its reactive ones folded in

    def count(self, o: Output, d: Dispatcher, metrics: AgentMetrics) -> None:
        """Count a message of a committed transaction."""
        message = message_of(o)
        kind, p = message["type"], message["payload"]
        if kind == "allocation.decided":
            self.stats.decisions += 1
            metrics.decided(p["action"], p["latency_ms"] / 1000)
            if is_unbound_requeue(message):
                metrics.requeued_unbound()
            log.debug(
                "job %s: %s",
                p["job_id"],
                p["action"],
                extra={"job_id": p["job_id"], "action": p["action"], "event_id": p["input_event_id"]},
            )
        elif kind == "plan.committed":
            if (p := self.parts.add(p)) is None:
                return  # the commit's other parts follow in this transaction
            self.stats.commits += not p.get("reactive")  # a step's, not its reactive ones
            self._committed(p, d, metrics)
            log.info(
                "plan for step %d (seq %d, %s)",
                p["step"],
                p["seq"],
                p["source"],
                extra={"step": p["step"], "seq": p["seq"], "source": p["source"]},
            )
        elif kind == "input.rejected":
            self.stats.rejected += 1
            metrics.dead_lettered(p["reason"])
            log.warning(
                "dead-lettered %s: %s",
                message["event_id"],
                p["reason"],
                extra={"event_id": message["event_id"], "input": f"{p['topic']}:{p['partition']}@{p['offset']}"},
            )

    def _committed(self, payload: dict, d: Dispatcher, metrics: AgentMetrics) -> None:
        planner = d.reads.view
        assert planner is not None  # a pool that commits is configured
        if payload.get("reactive"):
            if self.step_commit is None or self.step_commit["step"] != payload["step"]:
                return  # its step's commit came before this agent was watching
            payload = {**folded(self.step_commit, payload), "reactive": True}
        self.step_commit = payload
        metrics.committed(
            payload,
            planner.config.gpus,
            planner.down.bit_count(),
            len(planner.queued),
            needs(planner.apps, payload["step"], planner.config.gpus),  # the observed need `status` reports
            unavailable=planner.closed,
        )


def lag(consumer: AIOKafkaConsumer, frontier: dict[str, int], metrics: AgentMetrics, pool: str) -> None:
    """Records on each input partition past the frontier (what arrived and is not yet read)."""
    for tp in consumer.assignment():
        end = consumer.highwater(tp)
        if end is not None:
            behind = max(0, end - frontier.get(f"{tp.topic}:{tp.partition}", 0))
            metrics.lag.labels(pool, tp.topic, str(tp.partition)).set(behind)
