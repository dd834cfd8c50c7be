"""The node agent's pure core: what to bind and release on one node, from decisions and commits.

No I/O and no clock, so every rule is unit-testable and replayable; `gpualloc.agent.node.node_agent` wraps it
with Kafka and a binder. GPU indices in events are pool-global; this node owns
[first_gpu, first_gpu + gpus) and its local device id is the global index minus first_gpu.

Rules (docs/contract/events.md, "Binding"):
- `allocation.decided` with action `start` binds the job's GPUs on this node at once (the fast
  path), unless a later commit was already applied or one of those GPUs is held by another job:
  then the commit, which is authoritative, decides.
- `plan.committed` with a higher `seq` than the last applied one reconciles: release what it no
  longer assigns here, bind what it newly assigns or whose GPU set changed (real-time apps move
  between steps; their re-bind is one `bind` with the new set, not a release first). A commit
  split into parts is applied once all its parts are in (each holds only some of its holders).
  A reactive commit (a later seq of the same step) changes only the holders it names. A holder
  that gives up GPUs here and keeps others (an app shrinking or moving) gets a `shrink` of the
  GPUs it leaves first, so the binder can stop what ran there, then the `bind` of its new set.
- Redelivered events (same event_id) and stale commits yield nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpualloc.schemas.commits import Parts
from gpualloc.schemas.events import Envelope
from gpualloc.schemas.published import AllocationDecided, PlanCommitted

SEEN_LIMIT = 10_000  # event ids remembered for de-duplication
KNOWN_LIMIT = 100_000  # job and app ids remembered for the job.failed rule


@dataclass(frozen=True)
class Action:
    """One thing to do on the node: bind `global_ids` (= `local_ids` + first_gpu) or release."""

    kind: Literal["bind", "release", "shrink"]
    job_id: str
    global_ids: tuple[int, ...]
    local_ids: tuple[int, ...]
    step: int | None = None


class Recent:
    """A set that keeps only its `limit` most recently added items (bounded memory)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[str, None] = OrderedDict()

    def add(self, item: str) -> None:
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def discard(self, item: str) -> None:
        self._items.pop(item, None)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)


def read_commit(message: Mapping[str, Any], pool: str) -> tuple[str, dict[str, Any]] | None:
    """(event_id, payload) of a `plan.committed` (or of one part of one) for `pool`, checked
    against the contract's model; None for other types or pools; ValueError (pydantic's
    ValidationError is one) for a malformed message."""
    env = Envelope.model_validate(message)
    if env.type != "plan.committed" or env.pool != pool:
        return None
    PlanCommitted.model_validate(env.payload)
    return env.event_id, env.payload


@dataclass
class NodeState:
    node: int
    first_gpu: int
    gpus: int
    pool: str = "default"
    bound: dict[str, tuple[int, ...]] = field(default_factory=dict)  # id -> global ids here
    last: tuple[int, int] | None = None  # (step, seq) of the last applied commit
    seen: Recent = field(default_factory=lambda: Recent(SEEN_LIMIT))
    jobs: Recent = field(default_factory=lambda: Recent(KNOWN_LIMIT))  # seen in a decision or `started`
    apps: Recent = field(default_factory=lambda: Recent(KNOWN_LIMIT))  # first assigned without starting
    assigned: frozenset[str] = frozenset()  # ids in the last applied commit (pool-wide)
    parts: Parts = field(default_factory=Parts)  # parts of split commits not all in yet

    # ---- mapping ------------------------------------------------------------------------
    def on_node(self, global_ids: Iterable[int]) -> tuple[int, ...]:
        """The sorted global ids that fall on this node."""
        hi = self.first_gpu + self.gpus
        return tuple(sorted({g for g in global_ids if self.first_gpu <= g < hi}))

    def action(
        self, kind: Literal["bind", "release", "shrink"], job_id: str, global_ids: tuple[int, ...], step: int | None
    ) -> Action:
        return Action(kind, job_id, global_ids, tuple(g - self.first_gpu for g in global_ids), step)

    # ---- events -------------------------------------------------------------------------
    def on_message(self, message: Mapping[str, Any]) -> list[Action]:
        """Any message from the decisions or commits topic: de-duplicated on event_id, other
        pools and types ignored. ValueError for a malformed message (nothing changes then)."""
        env = Envelope.model_validate(message)
        if env.pool != self.pool or env.event_id in self.seen:
            return []
        if env.type == "allocation.decided":
            actions = self.on_decision(AllocationDecided.model_validate(env.payload))
        elif env.type == "plan.committed":
            PlanCommitted.model_validate(env.payload)  # each part is checked as it comes
            stale = self.last is not None and env.payload["seq"] <= self.last[1]
            whole = None if stale else self.parts.add(env.payload)
            actions = [] if whole is None else self.on_commit(PlanCommitted.model_validate(whole))
        else:
            actions = []
        self.seen.add(env.event_id)
        return actions

    def on_decision(self, payload: AllocationDecided | Mapping[str, Any]) -> list[Action]:
        """The fast path: bind a `start` at once; every other action only marks the id a job."""
        d = payload if isinstance(payload, AllocationDecided) else AllocationDecided.model_validate(payload)
        self.jobs.add(d.job_id)
        self.apps.discard(d.job_id)
        mine = self.on_node(d.gpus)
        if d.action != "start" or not mine or d.job_id in self.bound:
            return []
        if self.last is not None and d.start_step is not None and d.start_step < self.last[0]:
            return []  # a later commit was applied: it is authoritative
        held = {g for job, gs in self.bound.items() for g in gs}
        if held.intersection(mine):
            return []  # a GPU is still held: the commit will sort it out
        self.bound[d.job_id] = mine
        return [self.action("bind", d.job_id, mine, d.start_step)]

    def on_commit(self, payload: PlanCommitted | Mapping[str, Any]) -> list[Action]:
        """Reconcile with an authoritative commit, whole (ignored unless its seq is the highest yet)."""
        c = payload if isinstance(payload, PlanCommitted) else PlanCommitted.model_validate(payload)
        if c.parts != 1:
            raise ValueError(f"parts: {c.parts}: a node applies a whole commit (`on_message` puts its parts together)")
        if self.last is not None and c.seq <= self.last[1]:
            return []
        for job_id in c.started:
            self.jobs.add(job_id)
            self.apps.discard(job_id)
        if self.last is not None:  # we saw the previous commit: a new id that did not start is an app
            for job_id in c.assignments:
                if job_id not in self.assigned and job_id not in self.jobs:
                    self.apps.add(job_id)
        if c.reactive:  # only the holders it names change; the rest keep what the step's commit gave them
            desired = {j: gs for j, gs in self.bound.items() if j not in c.assignments}
            desired.update({job_id: mine for job_id, gs in c.assignments.items() if (mine := self.on_node(gs))})
        else:
            desired = {job_id: mine for job_id, gs in c.assignments.items() if (mine := self.on_node(gs))}
        releases = [self.action("release", j, gs, c.step) for j, gs in sorted(self.bound.items()) if j not in desired]
        binds: list[Action] = []
        for j, gs in sorted(desired.items()):
            old = self.bound.get(j)
            if old == gs:
                continue
            if left := tuple(g for g in old or () if g not in gs):
                binds.append(self.action("shrink", j, left, c.step))
            binds.append(self.action("bind", j, gs, c.step))
        self.bound = desired
        self.last = (c.step, c.seq)
        self.assigned = self.assigned | frozenset(c.assignments) if c.reactive else frozenset(c.assignments)
        return releases + binds

    def resync(
        self, record: Mapping[str, Sequence[int]], commit: PlanCommitted | None, event_id: str | None = None
    ) -> list[Action]:
        """On start: take the binder's own record (job -> local ids) as what is bound, then
        reconcile it with the latest commit. Without a commit nothing is released: there is
        no authority to say the record is stale."""
        self.bound = {job: tuple(sorted(self.first_gpu + i for i in ids)) for job, ids in record.items()}
        if commit is None:
            return []
        self.last = None
        if event_id is not None:
            self.seen.add(event_id)
        return self.on_commit(commit)

    def failed(self, action: Action) -> None:
        """The binder could not do `action`: a failed bind is not bound (the next commit that
        still assigns it retries), a failed release stays bound (the next commit retries it)."""
        if action.kind == "bind":
            self.bound.pop(action.job_id, None)
        elif action.kind == "release":
            self.bound[action.job_id] = action.global_ids
        # a failed shrink changes nothing: the bind of the holder's new set follows

    def is_app(self, job_id: str) -> bool | None:
        """True for a real-time app, False for a job, None when this node cannot tell (the id
        was already assigned when it started watching and never appeared as a job)."""
        if job_id in self.jobs:
            return False
        if job_id in self.apps:
            return True
        return None
