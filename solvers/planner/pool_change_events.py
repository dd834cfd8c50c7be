"""The pool's own events, as the planner's pool-changes role takes them: `pool.configured` (the
planner made at the first, with step 0 at the end of its set-up window; a resize after) and
`node.status`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from gpualloc.forecasting.forecasters import Forecasters
from gpualloc.forecasting.traffic import week_minute
from gpualloc.schemas.events import NodeStatus, PoolConfigured
from gpualloc.schemas.limits import POOL
from gpualloc.solvers.planner.effects import Effect, Event, Failed, Rejected
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.records import PoolConfig
from gpualloc.solvers.release import RULES, package_version
from gpualloc.solvers.value_models import GPU_STEPS

if TYPE_CHECKING:
    from gpualloc.solvers.planner.interpreter import Pool


def configure(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    p = cast(PoolConfigured, event.payload)
    if p.rules is not None and p.rules > RULES:
        return [Rejected(event.ref, newer_rules(p.rules))]
    config = PoolConfig(
        p.gpus,
        p.gpus_per_node,
        p.horizon,
        p.step_minutes,
        p.time_decay,
        p.realtime_penalty,
        p.swap_cap,
        p.gpu_type,
        p.gpu_memory_gb,
        p.starvation_bound,
        p.time_limit,
        node_silence_seconds=_or_default(p.node_silence_seconds, POOL.node_silence_seconds),
        bind_confirm_seconds=_or_default(p.bind_confirm_seconds, POOL.bind_confirm_seconds),
        bind_requeue_seconds=_or_default(p.bind_requeue_seconds, POOL.bind_requeue_seconds),
        value_model=p.value_model or GPU_STEPS,
        reserved_jobs=p.reserved_jobs,
        interconnect=p.interconnect,
    )
    if pool.planner is None:
        origin = now + timedelta(seconds=p.setup_seconds or 0)  # step 0 begins when the set-up window closes
        pool.planner = Planner(
            config,
            scheduler=pool.scheduler,
            forecasts=Forecasters(pool.forecast),
            week_minute=week_minute(origin),
            by_arrival=pool.by_arrival,
            replan_work=pool.replan_work,
            rules=pool.rules,
        )
        pool.origin = origin
        return []  # the events that waited for it are its pass's next (`Pool._pass`)
    config = config.with_time_limit_history(pool.planner.config, event.occurred_at)
    problem = pool.planner.pool_changes.resize_problem(config)
    if problem:
        return [Rejected(event.ref, problem)]
    return [Failed(job_id, why, by_gpualloc=True) for job_id, why in pool.planner.pool_changes.resize(config)]


def _or_default(given: float | None, default: float) -> float:
    """A liveness bound `pool.configured` gives (`node_watch`), else the contract's default."""
    return default if given is None else given


def newer_rules(needed: int) -> str:
    """Why a configuration needing planning rules `needed`, newer than this agent's, is refused:
    planned by older rules, what it asks for would be silently ignored."""
    return (
        f"rules: this configuration needs planning rules {needed}; this agent plans by rules {RULES} "
        f"(gpualloc {package_version()}): upgrade the agent"
    )


def node_status(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    p, planner = cast(NodeStatus, event.payload), pool._planner
    nodes = planner.config.gpus // planner.config.node_size
    if p.node >= nodes:
        return [Rejected(event.ref, f"node: must be below {nodes}, the pool's node count (got {p.node})")]
    detail = f"node {p.node} is down: {p.detail}".rstrip(": ")
    return [Failed(job_id, detail, by_gpualloc=True) for job_id in planner.pool_changes.node_status(p.node, p.state)]
