"""Node agents known alive: what the pool knows of the agents that bind its nodes' GPUs.

A pool is watched once any node agent has reported (`node.heartbeat`); pools bound by other
means, the demo and the simulator never are, and plan as before. In a watched pool:
- a node whose agent has not been heard for the silence bound (`node_silence_seconds`, or three
  of the agent's own intervals when longer), or has not reported within `node_silence_seconds` of
  the pool's first heartbeat, takes no new work: its GPUs are planned as a drained node's
  (`PlannerState.unheard`), until its agent is heard again. Jobs running there
  stay running, shown unconfirmed: only a `node.status` down fails them;
- a job's start is confirmed once the agent of every node it spans reports it bound (a
  `binding.reported` bound, or a heartbeat listing it). Past `bind_confirm_seconds` an
  unconfirmed start is shown "started, not bound"; past `bind_requeue_seconds` it goes back to
  the queue as never run (whatever its `requeue`), and the next commit no longer assigns it, so a
  node agent that bound it late releases it.

Time is the caller's clock at the pass (`now`, which a ledger entry records), in seconds: a
replay decides the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, cast

from gpualloc.schemas.events import NodeHeartbeat
from gpualloc.solvers.planner.effects import Effect, Event, Rejected, Requeued
from gpualloc.solvers.planner.pool_state import PlannerState
from gpualloc.solvers.planner.view import PoolView
from gpualloc.solvers.problem import bits_of

if TYPE_CHECKING:
    from gpualloc.solvers.planner.interpreter import Pool
    from gpualloc.solvers.planner.planner import Planner

SILENT_INTERVALS = 3  # a node agent missing this many of its own heartbeats is silent
WATCH_RULES = 3  # the planning rules that know node agents' heartbeats (`gpualloc.solvers.release`)


def node_mask(state: PlannerState, node: int) -> int:
    """The GPUs of `node`."""
    n = state.config.node_size
    return ((1 << n) - 1) << (node * n)


def nodes_of(state: PlannerState, mask: int) -> int:
    """The nodes a GPU set spans, as a bitmask of node indices."""
    n, nodes = state.config.node_size, 0
    while mask:
        low = (mask & -mask).bit_length() - 1
        node = low // n
        nodes |= 1 << node
        mask &= ~(((1 << n) - 1) << (node * n))
    return nodes


def node_heartbeat(pool: Pool, event: Event, now: datetime) -> list[Effect]:
    """A node agent is alive: its node takes new work again, and the starts it lists are bound."""
    p, state = cast(NodeHeartbeat, event.payload), pool._planner
    if state.rules < WATCH_RULES:  # replaying a release that knew no heartbeat: it dead-lettered them
        return [
            Rejected(event.ref, f"type: 'node.heartbeat' is not an input event type of planning rules {state.rules}")
        ]
    nodes = state.config.gpus // state.config.node_size
    if p.node >= nodes:
        return [Rejected(event.ref, f"node: must be below {nodes}, the pool's node count (got {p.node})")]
    state.clock = now.timestamp()  # the pass's: a pool watched from this pass on times its starts by it
    if not state.heard:  # watched from now on: the nodes not heard yet have one silence bound to report
        state.watched_since = state.clock
        state.watch_due = state.clock + state.config.node_silence_seconds
    state.heard[p.node] = (state.clock, p.interval_seconds)
    state.unheard &= ~node_mask(state, p.node)
    until = state.clock + max(state.config.node_silence_seconds, SILENT_INTERVALS * p.interval_seconds)
    state.watch_due = min(state.watch_due, until)
    for holder in p.holders:
        bound(state, holder, p.node)
    return []


def bound(state: PlannerState, job_id: str, node: int) -> None:
    """`node`'s agent has bound `job_id`: its start is confirmed once every node it spans has."""
    waiting = state.unbound.get(job_id)
    if waiting is None:
        return
    since, nodes = waiting
    nodes &= ~(1 << node)
    if nodes:
        state.unbound[job_id] = (since, nodes)
    else:
        del state.unbound[job_id]


def started(state: PlannerState, job_id: str, mask: int) -> None:
    """A job started on `mask`: in a watched pool, unconfirmed until its nodes' agents bind it."""
    if state.heard:
        state.unbound[job_id] = (state.clock, nodes_of(state, mask))


def _heard_mask(state: PlannerState) -> int:
    """The GPUs of the nodes whose agent has reported."""
    mask = 0
    for node in state.heard:
        mask |= node_mask(state, node)
    return mask


def silent_since(state: PoolView, node: int, at: float) -> float | None:
    """Seconds `node`'s agent has been silent at `at`, past its bound (None: heard within it; a
    node never heard of in a watched pool: infinite)."""
    heard = state.heard.get(node)
    return float("inf") if heard is None else _silent_for(state, heard, at)


def _silent_for(state: PoolView, heard: tuple[float, float], at: float) -> float | None:
    last, interval = heard
    bound_s = max(state.config.node_silence_seconds, SILENT_INTERVALS * interval)
    return None if at - last <= bound_s else at - last


def watch(state: Planner, at: float) -> list[Effect]:
    """At the caller's clock `at` (seconds): which nodes take no new work for want of a live agent,
    and the starts no agent bound in time, back in the queue as never run. Each pass calls it, so
    it looks again only once something can have changed: the earliest moment a live node can fall
    silent (`watch_due`; heartbeats only open nodes and push that moment on), and the oldest
    unbound start's bound (starts are kept in the order of the clock that started them)."""
    if not state.heard:
        return []
    state.clock = at
    if at >= state.watch_due:
        _close_silent(state, at)
    out: list[Effect] = []
    requeue = state.config.bind_requeue_seconds
    oldest = next(iter(state.unbound.values()), None)
    if oldest is None or at - oldest[0] < requeue:
        return out
    for job_id, (since, pending) in sorted(state.unbound.items()):
        if job_id not in state.running:  # it ended meanwhile
            del state.unbound[job_id]
        elif at - since >= requeue:
            out.append(Requeued(job_id, _requeue_reason(state, job_id, pending, at - since)))
            del state.unbound[job_id]
            state.admission.never_ran(job_id)
    return out


def _close_silent(state: PlannerState, at: float) -> None:
    """Close the nodes whose agent fell silent by `at`, or never reported within a silence bound
    of the pool's first heartbeat, and note when the next one can."""
    nodes = state.config.gpus // state.config.node_size
    live, due = 0, float("inf")
    if at <= (grace := state.watched_since + state.config.node_silence_seconds):
        live, due = ((1 << state.config.gpus) - 1) & ~_heard_mask(state), grace
    for node, (last, interval) in state.heard.items():
        until = last + max(state.config.node_silence_seconds, SILENT_INTERVALS * interval)
        if node < nodes and at <= until:
            live |= node_mask(state, node)
            due = min(due, until)
    state.unheard = ((1 << state.config.gpus) - 1) & ~live
    state.watch_due = due


def _requeue_reason(state: PlannerState, job_id: str, pending: int, waited: float) -> str:
    entry = state.running[job_id]
    gpus, nodes = bits_of(entry.mask), bits_of(pending)
    why = ", ".join(f"node {n}: {_agent_words(state, n)}" for n in nodes)
    return (
        f"queued: its start at step {entry.start} on GPUs {gpus[0]}-{gpus[-1]} was not bound within "
        f"{waited:.0f} s (bind_requeue_seconds {state.config.bind_requeue_seconds:g}; {why}); re-queued as never run"
    )


def _agent_words(state: PlannerState, node: int) -> str:
    heard = state.heard.get(node)
    if heard is None:
        return "no agent has reported"
    silent = silent_since(state, node, state.clock)
    return "its agent reports but did not bind it" if silent is None else f"its agent silent for {silent:.0f} s"


@dataclass(frozen=True)
class Liveness:
    """What the pool knows of its node agents at a time (status, metrics and explain read this one
    account): `watched` once any has reported; nodes whose agent is live, silent past its bound
    (with the seconds since it was last heard), never heard past the first silence bound
    (`never`: closed), or not heard yet within it (`waiting`: open); the starts no agent has
    bound past `bind_confirm_seconds` (job -> seconds since its start) and the running jobs on
    nodes without a live agent, bound before and shown unconfirmed."""

    watched: bool
    live: tuple[int, ...]
    silent: dict[int, float]
    never: tuple[int, ...]
    waiting: tuple[int, ...]
    unbound: dict[str, float]
    unconfirmed: tuple[str, ...]


def liveness(view: PoolView, at: float) -> Liveness:
    """The pool's node agents as `view` knows them at `at` (seconds since the epoch)."""
    if not view.heard:
        return Liveness(False, (), {}, (), (), {}, ())
    cfg = view.config
    nodes, size = cfg.gpus // cfg.node_size, cfg.node_size
    grace = at <= view.watched_since + cfg.node_silence_seconds
    live: list[int] = []
    never: list[int] = []
    waiting: list[int] = []
    silent: dict[int, float] = {}
    for node in range(nodes):
        heard = view.heard.get(node)
        if heard is None:
            (waiting if grace else never).append(node)
        elif (late := _silent_for(view, heard, at)) is None:
            live.append(node)
        else:
            silent[node] = late
    late_starts = {
        job_id: at - since
        for job_id, (since, _) in sorted(view.unbound.items())
        if job_id in view.running and at - since >= cfg.bind_confirm_seconds
    }
    open_gpus = 0
    for node in (*live, *waiting):
        open_gpus |= ((1 << size) - 1) << (node * size)
    unconfirmed = tuple(
        sorted(j for j, entry in view.running.items() if entry.mask & ~open_gpus and j not in view.unbound)
    )
    return Liveness(True, tuple(live), silent, tuple(never), tuple(waiting), late_starts, unconfirmed)
