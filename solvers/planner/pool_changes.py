"""The planner's pool-changes role: nodes going down, drained or up, and a new shape (`resize`);
the running jobs they fail leave through admission's lifecycle (`Admission.fail`)."""

from __future__ import annotations

from dataclasses import replace

from gpualloc.schemas.scenario import block_size_problems
from gpualloc.solvers.planner.admission import Admission
from gpualloc.solvers.planner.pool_state import PlannerState, next_floor
from gpualloc.solvers.planner.records import (
    PoolConfig,
)
from gpualloc.solvers.planner.window import running_mask
from gpualloc.solvers.problem import obeys_node_rule


class PoolChanges:
    """The pool's nodes and shape, over the pool's `state`; jobs failed through `admission`."""

    __slots__ = ("state", "admission")

    def __init__(self, state: PlannerState, admission: Admission) -> None:
        self.state, self.admission = state, admission

    def node_status(self, node: int, state: str) -> list[str]:
        """Mark a node up, drained or down; returns the running jobs that fail with it."""
        N = self.state.config.node_size
        mask = ((1 << N) - 1) << (node * N)
        self.state.down &= ~mask
        self.state.drained &= ~mask
        if state == "down":
            self.state.down |= mask
        elif state == "drained":
            self.state.drained |= mask
        failed = [jid for jid, entry in sorted(self.state.running.items()) if state == "down" and entry.mask & mask]
        for jid in failed:
            self.admission.fail(jid)
        return failed

    def resize_problem(self, config: PoolConfig) -> str:
        """Why the pool cannot take `config`'s shape now ("" when it can): a node size under
        which a running job's block would break R3's node rule (running work is never moved),
        or too few GPUs for the registered apps' floors beside the running work that stays."""
        ns = config.node_size
        for job_id, entry in sorted(self.state.running.items()):
            mask = entry.mask
            first, last = (mask & -mask).bit_length() - 1, mask.bit_length() - 1
            if last < config.gpus and not obeys_node_rule(first, last - first + 1, ns):
                return (
                    f"gpus_per_node: running job {job_id!r} holds GPUs {first}-{last}, across nodes of "
                    f"{ns} GPUs (R3's node rule); change the node size once it ends"
                )
        pool = (1 << config.gpus) - 1
        floors = sum(
            next_floor(self.state, a.spec, a.held & pool if a.held >= 0 else -1) for a in self.state.apps.values()
        )
        staying = (running_mask(self.state.running) | self.state.closed) & pool
        if floors > config.gpus - staying.bit_count():
            return (
                f"gpus: {config.gpus} GPUs cannot hold the registered apps' floors ({floors} GPUs) beside the "
                f"{staying.bit_count()} that running jobs and unavailable nodes keep there (running work is "
                "never moved; drain the nodes that leave first, or lower the floors)"
            )
        return ""

    def resize(self, config: PoolConfig) -> list[tuple[str, str]]:
        """Take a new configuration (`resize_problem` said it can): a pool that shrinks fails
        the running jobs on the GPUs it loses, as a node going down does (re-queued if they
        allow it), drops the queued jobs that no longer fit it anywhere, and trims what apps
        and node states held there. Returns (job id, why) for each job failed or dropped. The
        next arrivals and boundary get a fresh plan (the window may have changed shape)."""
        pool = (1 << config.gpus) - 1
        out = []
        for job_id, entry in sorted(self.state.running.items()):
            if entry.mask & ~pool:
                self.admission.fail(job_id)
                out.append((job_id, f"the pool shrank to {config.gpus} GPUs and its GPUs left it"))
        failed = {job_id for job_id, _ in out}
        for job_id, spec in sorted(self.state.queued.items()):
            if next(block_size_problems(spec.gpus, config.gpus, config.node_size, "job"), None):
                self.state.queued.pop(job_id)
                if job_id not in failed:  # one that was running is failed once, with why it left
                    out.append((job_id, f"its {spec.gpus} GPUs no longer fit the pool of {config.gpus} GPUs"))
        for app_id, app in self.state.apps.items():
            if app.held >= 0:
                self.state.apps[app_id] = replace(app, held=app.held & pool)
        self.state.down, self.state.drained, self.state.committed = (
            self.state.down & pool,
            self.state.drained & pool,
            self.state.committed & pool,
        )
        self.state.config = config
        self.state.busy = None
        self.state.ahead = None
        return out
