"""The legality validator: every breach of rules R1-R5, each with its rule id, job and step, over
a plan's grid (`check_plan`) or over committed steps (`online_violations`).

A policy may be exempt from rules by the contract: FIFO's static real-time reservations are
exempt from R3's real-time floors and ceilings (`R3_REALTIME`) and from R4. The registry
(`gpualloc.solvers.policies`) declares each policy's exemptions; this module only honours them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpualloc.solvers.grid import Grid, occupancy, step_masks
from gpualloc.solvers.problem import Batch, Problem, Realtime, bits_of, obeys_node_rule

R3_REALTIME = "R3-realtime"  # R3's floors and ceilings of real-time apps (not its block rule)
R4 = "R4"


@dataclass(frozen=True)
class Violation:
    rule: str
    job: str | None
    step: int | None
    detail: str

    def __str__(self) -> str:
        where = f" job {self.job}" if self.job else ""
        when = f" step {self.step}" if self.step is not None else ""
        return f"{self.rule}{where}{when}: {self.detail}"


def check_plan(problem: Problem, grid: Grid, *, exempt: Collection[str] = ()) -> list[Violation]:
    """All violations of R1-R5 in `grid` (empty when the plan is legal), but those of the rules
    in `exempt` (`R3_REALTIME`, `R4`)."""
    shape = _check_shape(problem, grid)
    if shape:
        return shape
    cells = occupancy(grid)
    out: list[Violation] = []
    for job in problem.batch:
        own = cells.get(job.id)
        if own:
            out.extend(_check_batch(problem, job, own))
        elif job.running_mask:
            out.append(
                Violation(
                    "R5",
                    job.id,
                    0,
                    f"a running job must keep GPUs {bits_of(job.running_mask)} over steps "
                    f"[{job.held_from}, {min(job.remaining, problem.horizon)}); it is missing",
                )
            )
    for app in problem.realtime:
        out.extend(_check_realtime(problem, app, step_masks(cells.get(app.id, ()), problem.horizon), exempt))
    return out


def _check_shape(problem: Problem, grid: Grid) -> list[Violation]:
    G, T = problem.gpus, problem.horizon
    if len(grid) != G or any(len(row) != T for row in grid):
        rows = len(grid)
        cols = sorted({len(r) for r in grid})
        return [Violation("R1", None, None, f"grid must be {G} GPUs x {T} steps, got {rows} rows of {cols} cells")]
    known = {j.id for j in problem.batch} | {a.id for a in problem.realtime}
    unknown = sorted({c for row in grid for c in row if c is not None and c not in known})
    return [Violation("R1", c, None, "names a job that is not in the scenario") for c in unknown]


def _check_batch(problem: Problem, job: Batch, own: list[tuple[int, int]]) -> list[Violation]:
    T = problem.horizon
    gpus = sorted({g for g, _ in own})
    steps = sorted({t for _, t in own})
    start = steps[0]
    if job.running_mask:
        expected_gpus, expected_end, rule = bits_of(job.running_mask), min(job.remaining, T), "R5"
        if start != job.held_from:
            return [Violation("R5", job.id, start, f"a running job must keep its GPUs from step {job.held_from}")]
    else:
        expected_end, rule = problem.end_of(job, start), "R2"
        expected_gpus = gpus
    out: list[Violation] = []
    if not job.running_mask:
        if start < job.arrival:
            out.append(Violation("R2", job.id, start, f"starts before its arrival step {job.arrival}"))
        if len(gpus) != job.gpus:
            out.append(Violation("R2", job.id, start, f"uses {len(gpus)} GPUs, needs exactly {job.gpus}"))
        out.extend(_check_block(problem, job, gpus, start))
    elif gpus != expected_gpus:
        out.append(Violation("R5", job.id, 0, f"holds GPUs {gpus}, must keep exactly {expected_gpus}"))
    want = {(g, t) for g in expected_gpus for t in range(start, expected_end)}
    got = set(own)
    if got != want:
        missing = sorted(want - got, key=lambda c: (c[1], c[0]))
        extra = sorted(got - want, key=lambda c: (c[1], c[0]))
        what = []
        if missing:
            g, t = missing[0]
            what.append(
                f"{len(missing)} cell(s) missing from its rectangle (first: GPU {g} at step {t}): a gap or an interruption"
            )
        if extra:
            g, t = extra[0]
            what.append(f"{len(extra)} cell(s) outside its rectangle (first: GPU {g} at step {t})")
        out.append(
            Violation(
                rule,
                job.id,
                start,
                "; ".join(what)
                + f"; expected GPUs {expected_gpus[0]}..{expected_gpus[-1]} over steps [{start}, {expected_end})",
            )
        )
    return out


def _check_block(problem: Problem, job: Batch, gpus: list[int], start: int) -> list[Violation]:
    if not gpus or len(gpus) != job.gpus:
        return []
    first = gpus[0]
    if gpus[-1] - first + 1 != len(gpus):
        return [Violation("R3", job.id, start, f"GPUs {gpus} are not contiguous")]
    if not (problem.valid_starts(job.gpus) >> first) & 1:
        return [
            Violation(
                "R3", job.id, start, f"block {first}..{gpus[-1]} breaks the node rule (node size {problem.node_size})"
            )
        ]
    return []


def _check_realtime(problem: Problem, app: Realtime, masks: list[int], exempt: Collection[str]) -> list[Violation]:
    out: list[Violation] = []
    prev = app.current_mask
    for t, mask in enumerate(masks):
        n = mask.bit_count()
        if R3_REALTIME not in exempt and not app.min_gpus <= n <= app.max_gpus:
            out.append(Violation("R3", app.id, t, f"holds {n} GPUs, outside [{app.min_gpus}, {app.max_gpus}]"))
        if prev >= 0 and R4 not in exempt:
            moved = (mask ^ prev).bit_count()
            if moved > app.swap_cap:
                out.append(Violation("R4", app.id, t, f"{moved} GPUs enter or leave, above swap_cap {app.swap_cap}"))
        prev = mask
    return out


class CommittedStep(Protocol):
    """A committed step as `online_violations` reads it: its step and who holds which GPUs."""

    @property
    def step(self) -> int: ...

    @property
    def assignments(self) -> Mapping[str, Sequence[int]]: ...


def online_violations(
    commits: Iterable[CommittedStep],
    limits: dict[str, tuple[int, int, int]],
    apps: set[str],
    down: list[int] | None = None,
    failed: dict[str, list[int]] | None = None,
    exempt: Collection[str] = (),
    node_size: int | None = None,
    pool: tuple[int, Mapping[str, float]] | None = None,
) -> list[str]:
    """The contract's online rules over committed steps (objects with `step` and `assignments`,
    as the planner makes them or as rebuilt from `plan.committed` messages): one owner per GPU
    per step; a batch job holds one contiguous power-of-two block from its first committed step
    until its completion, without a gap or a move (a failed, re-queued job starts afresh); apps
    in `limits` (min_gpus, max_gpus, swap_cap) within their bounds and their swap cap between
    consecutive commits, GPUs an app leaves on a node down or drained (`down`: mask per step of
    such GPUs) not counting, but for the rules in `exempt`; no batch job starts on a GPU down or
    drained at both its first commit and the one before; with `node_size`, blocks obey R3's
    node rule too. With `pool` (its GPUs, the apps' priorities), floors the GPUs beside down
    nodes and running jobs cannot hold are lowered as the planner lowers them (`lowered_floors`)."""
    out = []
    failed = failed or {}
    seen_at: dict[str, tuple[int, tuple[int, ...]]] = {}
    for commit in commits:
        owner_of: dict[int, str] = {}
        floor = _floors_at(commit, limits, apps, seen_at, down[commit.step] if down else 0, pool)
        for owner, gpus in commit.assignments.items():
            for g in gpus:
                if g in owner_of:
                    out.append(f"step {commit.step}: GPU {g} held by {owner} and {owner_of[g]}")
                owner_of[g] = owner
            if owner in apps:
                if owner in limits:
                    lo, hi, cap = limits[owner]
                    out.extend(
                        _app_violations(
                            (floor.get(owner, lo), hi, cap),
                            owner,
                            commit,
                            seen_at.get(owner),
                            down[commit.step] if down else 0,
                            exempt,
                        )
                    )
                seen_at[owner] = (commit.step, tuple(gpus))
                continue
            last, before = seen_at.get(owner, (None, ()))
            restarted = any(last is not None and last < s <= commit.step for s in failed.get(owner, ()))
            if last is not None and not restarted and (before != tuple(gpus) or last != commit.step - 1):
                out.append(f"step {commit.step}: {owner} moved or was interrupted")
            elif (last is None or restarted) and down and commit.step > 0:
                out.extend(_new_on_unavailable(owner, commit.step, gpus, down[commit.step - 1] & down[commit.step]))
            seen_at[owner] = (commit.step, tuple(gpus))
            n = len(gpus)
            if n & (n - 1) or list(gpus) != list(range(gpus[0], gpus[0] + n)):
                out.append(f"step {commit.step}: {owner} is not on a contiguous power-of-two block")
            elif node_size and not obeys_node_rule(gpus[0], n, node_size):
                out.append(f"step {commit.step}: {owner} spans nodes of {node_size} GPUs (R3's node rule)")
    return out


def _new_on_unavailable(owner: str, step: int, gpus: Sequence[int], closed: int) -> list[str]:
    """A job that starts at `step` on a GPU of a node down or drained since the previous commit
    (`closed`): it was decided while no new work could land there."""
    bad = [g for g in gpus if (closed >> g) & 1]
    if not bad:
        return []
    return [f"step {step}: {owner} starts on GPU {bad[0]}, of a node down or drained since the previous commit"]


def _floors_at(
    commit: CommittedStep,
    limits: dict[str, tuple[int, int, int]],
    apps: set[str],
    seen_at: dict[str, tuple[int, tuple[int, ...]]],
    down: int,
    pool: tuple[int, Mapping[str, float]] | None,
) -> dict[str, int]:
    """The apps' floors at `commit`, as the planner sets them: lowered when the GPUs neither down
    nor held by batch jobs cannot hold them all beside what each app's swap cap makes it keep of
    its previous set (`seen_at`), and never above what that cap lets it reach from there."""
    if pool is None:
        return {}
    gpus, priorities = pool
    held = down
    for owner, owned in commit.assignments.items():
        if owner not in apps:
            for g in owned:
                held |= 1 << g
    floors = {app: limits[app][0] for app in apps if app in limits and app in commit.assignments}
    left = {
        app: sum(1 for g in seen_at[app][1] if not (down >> g) & 1)
        for app in floors
        if app in seen_at and seen_at[app][0] == commit.step - 1
    }
    kept = {app: max(0, n - limits[app][2]) for app, n in left.items()}
    lowered = lowered_floors(floors, priorities, gpus - held.bit_count(), kept)
    return {app: min(f, left[app] + limits[app][2]) if app in left else f for app, f in lowered.items()}


def lowered_floors(
    floors: Mapping[str, int], priorities: Mapping[str, float], room: int, kept: Mapping[str, int] | None = None
) -> dict[str, int]:
    """`floors` by app, lowered (least valuable app first) when `room` GPUs (beside running jobs
    and down or drained nodes) cannot hold them all beside what each app's swap cap makes it
    keep of its set (`kept`, which stays: R4): running work is never moved, so the apps take the
    shortfall until GPUs come back, instead of the planner failing."""
    kept = kept or {}
    out = dict(floors)
    excess = sum(max(f, kept.get(a, 0)) for a, f in out.items()) - room
    for app_id in sorted(out, key=lambda a: (priorities.get(a, 0.0), a)):
        if excess <= 0:
            break
        cut = min(excess, max(0, out[app_id] - kept.get(app_id, 0)))
        out[app_id] -= cut
        excess -= cut
    return out


def _app_violations(
    limits: tuple[int, int, int],
    app: str,
    commit: CommittedStep,
    before: tuple[int, tuple[int, ...]] | None,
    down: int,
    exempt: Collection[str],
) -> list[str]:
    """R3 and R4 for one app at one commit; GPUs lost to a node going down do not count as swaps."""
    lo, hi, cap = limits
    gpus = set(commit.assignments[app])
    out = []
    if R3_REALTIME not in exempt and not lo <= len(gpus) <= hi:
        out.append(f"step {commit.step}: {app} holds {len(gpus)} GPUs, outside [{lo}, {hi}] (R3)")
    if R4 not in exempt and before is not None and before[0] == commit.step - 1:
        kept_up = {g for g in before[1] if not (down >> g) & 1}
        if len(gpus ^ kept_up) > cap:
            out.append(f"step {commit.step}: {app} swaps {len(gpus ^ kept_up)} GPUs, above {cap} (R4)")
    return out
