"""The pool's real-time app events, as the planner's real-time role takes them: an app registered
(its floor and the GPUs it holds checked first) and its traffic observed (GPUs granted or handed
back within the committed step)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, cast

from gpualloc.schemas.events import AppRegistered, TrafficObserved
from gpualloc.schemas.limits import LIMITS
from gpualloc.solvers.planner.effects import Effect, Event, Granted, Rejected
from gpualloc.solvers.planner.records import AppSpec
from gpualloc.solvers.problem import bits_of, mask_of

if TYPE_CHECKING:
    from gpualloc.solvers.planner.interpreter import Pool


def app_registered(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    p, planner = cast(AppRegistered, event.payload), pool._planner
    app = AppSpec(p.id, p.priority, p.min_gpus, p.max_gpus, p.swap_cap, p.profile, p.rps_per_gpu)
    current = mask_of(p.current) if p.current is not None else -1
    problem = _app_problem(pool, p) or planner.realtime.floor_problem(app, current)
    if problem:
        return [Rejected(event.ref, problem)]
    planner.realtime.register_app(app, current)
    return []


def traffic_observed(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    p, planner = cast(TrafficObserved, event.payload), pool._planner
    app = planner.apps.get(p.app)
    if app is None:
        return [Rejected(event.ref, f"app: {p.app!r} is not registered (app.registered comes first)")]
    step = pool.step_at(event.occurred_at)
    planner.realtime.observe_traffic(p.app, step, p.gpus_needed(app.spec.rps_per_gpu), p.load(app.spec.rps_per_gpu))
    if step != planner.now - 1:  # not demand in the committed step
        return []
    grant = planner.realtime.react(p.app) or planner.realtime.release(p.app)
    return [] if grant is None else [Granted(grant)]


def _app_problem(pool: Pool, p: AppRegistered) -> str:
    planner = pool._planner
    gpus, apps = planner.config.gpus, planner.apps
    if p.id not in apps and len(apps) >= LIMITS.apps:
        return f"id: the pool has {len(apps)} apps registered, the limit"
    bad = [g for g in p.current or () if not 0 <= g < gpus]
    if bad:
        return f"current: GPU {bad[0]} is outside the pool's {gpus} GPUs"
    if p.current is not None and len(set(p.current)) < len(p.current):
        return "current: lists a GPU twice"
    if p.id in apps or not p.current:  # a registered app keeps what it holds
        return ""
    holders = {
        g: f"running job {job_id!r}" for job_id, entry in sorted(planner.running.items()) for g in bits_of(entry.mask)
    }
    holders.update({g: f"app {app_id!r}" for app_id, a in sorted(apps.items()) if a.held > 0 for g in bits_of(a.held)})
    clash = [g for g in p.current if g in holders]
    if clash:
        return f"current: GPU {clash[0]} is held by {holders[clash[0]]}"
    return ""
