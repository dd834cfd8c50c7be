"""What a simulation records: each policy's run (commits, decisions, starts, grants) and the trace's demand."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.planner.full_mode import FullModeRun
from gpualloc.solvers.planner.records import FULL_MODE, Commit, Decision, Grant, PoolConfig


def base_policy(label: str) -> str:
    """The online policy a run label names ("heuristic/forecast" -> "heuristic")."""
    return label.split("/", 1)[0]


@dataclass
class PolicyRun:
    policy: str
    exempt: frozenset[str] = frozenset()  # online rules its hot path is exempt from (FIFO's)
    commits: list[Commit] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    submitted: dict[str, int] = field(default_factory=dict)  # job id -> step
    started: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    failed: dict[str, list[int]] = field(default_factory=dict)  # job id -> steps it failed at (then re-queued)
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (step, reason): events the pool refused
    down: list[int] = field(default_factory=list)  # per committed step: GPUs of nodes down or drained
    full_mode: list[tuple[int, str | None]] = field(default_factory=list)  # (step, what became of its plan)
    run_steps: dict[str, int] = field(default_factory=dict)  # job id -> steps its last start runs for
    full_mode_runs: list[FullModeRun] = field(default_factory=list)  # every solve: warm, own objective, bound
    grants: list[tuple[float, Grant]] = field(default_factory=list)  # (minute of its step, grant), in order
    # (job, step it failed at, GPUs it was given, GPU-steps it held for nothing): started below its true need
    out_of_memory: list[tuple[str, int, int, int]] = field(default_factory=list)
    # jobs still queued or running when the run ended (at the cap, or the days simulated); a job
    # neither here nor finished left the pool otherwise: cancelled while queued, rejected, failed
    # for good
    pending: frozenset[str] = frozenset()

    def executed(self) -> list[Commit]:
        """Each step's commit as it ended: its reactive grants applied to the apps' sets."""
        out = list(self.commits)
        first = out[0].step if out else 0
        for _, grant in self.grants:
            k = grant.step - first
            if 0 <= k < len(out):
                out[k] = replace(out[k], assignments={**out[k].assignments, **grant.sets})
        return out

    @property
    def full_mode_adopted(self) -> list[int]:
        """Steps whose commit came from full mode."""
        return [c.step for c in self.commits if c.source == FULL_MODE]

    def recorded(self) -> dict[int, Schedule]:
        """The adopted full-mode plans by step, as the commits record them: what a replay reuses."""
        return {c.step: c.schedule for c in self.commits if c.source == FULL_MODE}


@dataclass
class Simulation:
    config: PoolConfig
    steps: int
    demand: dict[str, list[int]]  # app id -> demand actually observed per step (its largest observation)
    priorities: dict[str, float]  # job and app id -> priority
    limits: dict[str, tuple[int, int, int]]  # app id -> (min_gpus, max_gpus, swap_cap)
    runs: dict[str, PolicyRun]
    drained: bool = False  # whole-trace: each run went on past the trace until its jobs finished (or the cap)
    cap: int = 0  # the most steps a run could take
    # whole-trace: real-time service counts through this step, the last event's; after it the
    # demand is the last observation held, and runs of different lengths would serve it unequally
    apps_until: int | None = None
    # (app, step) observed within the step -> its demand from each minute on: the last value before
    # the step until its first observation, then each observation until the next (service and
    # shortfall count by these; a step absent here has its `demand` throughout)
    within: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)
    # job id -> the GPUs it truly needs, where the trace says (`actual_used.gpus`): a step of it on
    # fewer does no work (it runs out of memory), GPUs past it do none either (`useful_gpus`)
    needs: dict[str, int] = field(default_factory=dict)
    # job id -> (GPUs, steps) of its work as the trace gives it (true GPUs, else asked; actual
    # duration, else declared): the size users' figures bucket it by, the same under every policy
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)

    def useful_gpus(self, job_id: str, given: int) -> int:
        """The GPUs of a job's step that do its work: all it was given where its need is unknown,
        else its need, none below it."""
        need = self.needs.get(job_id)
        if need is None:
            return given
        return 0 if given < need else need
