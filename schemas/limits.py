"""The contract's constants: the pool defaults that give scenario files and `pool.configured`
messages their meaning, and the bounds on every input. Nothing overrides them; operating settings
live in `gpualloc.schemas.settings`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PoolDefaults(_Frozen):
    """The contract's defaults for the pool fields a scenario or `pool.configured` may omit."""

    horizon: int = 24
    step_minutes: int = 60
    time_decay: float = 0.95
    realtime_penalty: float = 8.0
    swap_cap: int = 2
    # the starvation bound when `pool.configured` gives neither `starvation_steps` nor
    # `starvation_minutes`: 5 days, the shortest whole number of days that keeps 80% of the
    # heuristic's value gain on every bundled trace (README, "Whole traces and the starvation bound")
    starvation_minutes: int = 5 * 24 * 60
    # node agents known alive (`node.heartbeat`; they apply once a node agent has reported):
    # a node whose agent is not heard from for this long (or three of its intervals, if longer)
    # takes no new work; a job started there and not bound this long after its start is shown
    # "started, not bound"; one not bound for `bind_requeue_seconds` goes back to the queue
    node_silence_seconds: float = 30.0
    bind_confirm_seconds: float = 10.0
    bind_requeue_seconds: float = 60.0


POOL = PoolDefaults()


class Limits(_Frozen):
    """The contract's bounds on every input (docs/contract: "Limits"): what lies beyond them is
    rejected naming the field and the bound, so no message can make a pool's state, a pass or a
    dead letter grow without limit. Like `POOL`, they give inputs their meaning: not settings."""

    id_chars: int = 200  # event ids, job, app and pool ids; no control characters either
    text_chars: int = 2000  # free text: `detail`
    gpus: int = 4096  # GPUs of a pool, of a job, of an app; GPU and node indices below it
    horizon: int = 336  # steps in a window (two weeks of hours)
    step_minutes: int = 7 * 24 * 60
    duration: int = 100_000  # steps a job runs
    weight: float = 1e6  # priorities, rps_per_gpu and the real-time penalty
    requests_per_s: float = 1e12
    input_bytes: int = 256 * 1024  # one input record's value
    queued_jobs: int = 10_000  # jobs queued in one pool (more are answered `rejected`)
    apps: int = 64  # real-time apps registered in one pool
    reserved_jobs: int = 64  # starving jobs holding reservations in one pool (`pool.configured`)
    pending_events: int = 10_000  # events held until their pool is configured (`agent.pending_limit`)
    setup_seconds: float = 600.0  # a pool's set-up window (`pool.configured`): ten minutes hold every start
    rules: int = 1_000  # a planning rules version a configuration may need
    watch_seconds: float = 3600.0  # node agents' heartbeat interval and the liveness bounds (`pool.configured`)
    original_chars: int = 16 * 1024  # of a rejected record kept in its dead letter (with its length and SHA-256)


LIMITS = Limits()
