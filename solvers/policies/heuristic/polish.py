"""The last neighbourhood of the heuristic, in Python: moves on a finished plan that the order
search cannot make, because they change where real-time apps live and which blocks make way.
The reference the compiled polish (`gpualloc_native`, through `native`) is proven against.

Two moves, for each batch job that waits past its arrival or has no start, most valuable gain
first, in passes until a pass moves nothing:

- earlier: the job's earliest start before its current one at which a legal block is free of
  batch work, even where real-time apps hold some of its GPUs;
- eject: the same on a block that at most EJECTED queued jobs hold; those jobs are taken out
  and placed again (`earlier`), and the move is kept only when the plan's value rises.

Apps on the chosen block migrate, within their swap caps, to GPUs idle at those steps, and stay
on them while they stay idle (two swaps once, not twice); where a step would move more than the
cap allows, the app enters its new GPUs a step early and holds both for that step (within its
ceiling), so a cap of 1 migrates in two steps. That is how an optimum frees a node for a block:
the packer sees the apps' GPUs as reserved, and the apps are placed after the blocks, so the
order search never finds it.

Every move keeps each app's GPU count wherever it served demand (one GPU held early, above it,
only adds), so the penalty never rises and a move is taken only when batch value does: the
objective only grows. Work is a count (start steps, blocks examined, ejections tried), never a
clock; floats are summed in a fixed order, so both implementations reach the same plan.
"""

from __future__ import annotations

from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.problem import Batch, Problem, Realtime, bits_of, free_block_starts, lowest_bits

BLOCKS_EXAMINED = 64  # candidate blocks looked at per start step, lowest first
MIGRATING_BLOCKS = 4  # blocks that need apps to migrate tried per start step, fewest app cells first
EJECTED = 2  # queued jobs one ejection may take out of a block and place again
EJECT_TRIES = 2  # ejections tried per start step, least value taken out first

Saved = tuple[dict[str, tuple[int, int]], dict[str, list[int]], list[int], list[int]]


class _Plan:
    """A finished plan as per-step masks (batch occupancy, each app's sets, all apps' union)
    and the work left to spend on it."""

    def __init__(self, problem: Problem, schedule: Schedule, budget: int):
        T = problem.horizon
        self.problem, self.budget = problem, budget
        self.jobs = [j for j in problem.batch if not j.running_mask]
        self.position = {j.id: i for i, j in enumerate(problem.batch)}  # ties broken by it
        self.starts = {j.id: schedule.batch[j.id] for j in self.jobs if j.id in schedule.batch}
        self.sets = {app.id: list(schedule.realtime.get(app.id, [0] * T)) for app in problem.realtime}
        self.batch = list(problem.running_busy)
        for job in self.jobs:
            if job.id in self.starts:
                self._mark(job, *self.starts[job.id], on=True)
        self.apps = [0] * T
        for masks in self.sets.values():
            for t, mask in enumerate(masks):
                self.apps[t] |= mask

    def schedule(self, schedule: Schedule) -> Schedule:
        batch = {j.id: schedule.batch[j.id] for j in self.problem.batch if j.running_mask and j.id in schedule.batch}
        batch.update(self.starts)
        return Schedule(batch=batch, realtime=self.sets)

    def value(self, job: Batch, start: int | None) -> float:
        if start is None:
            return 0.0
        return self.problem.start_value(job, start)

    def earlier(self, job: Batch) -> bool:
        """Move `job` to its earliest start before its current one (any start, when it has
        none) at which a block is free of batch work and the apps on it can migrate."""
        current = self.starts.get(job.id)
        last = current[0] if current else self.problem.horizon
        before = self.value(job, last if current else None)
        if current:
            self._mark(job, *current, on=False)
        for s in range(job.arrival, last):
            if self.budget <= 0:
                break
            self.budget -= 1
            if self.value(job, s) <= before + 1e-9:
                break  # later starts are worth no more (weights are non-increasing)
            e = self.problem.end_of(job, s)
            union = 0
            for t in range(s, e):
                union |= self.batch[t]
            cands = free_block_starts(self.problem, union, job.gpus)
            if cands and self._take(job, s, e, cands):
                return True
        if current:
            self._mark(job, *current, on=True)
        return False

    def _take(self, job: Batch, s: int, e: int, cands: int) -> bool:
        """Place `job` at step s on a candidate block: the lowest one no app holds, else the
        ones whose apps hold fewest cells, the apps migrating; False when none works."""
        scored = []
        for p in bits_of(lowest_bits(cands, BLOCKS_EXAMINED)):
            self.budget -= 1
            block = self.problem.block(p, job.gpus)
            cells = 0
            for t in range(s, e):
                cells += (self.apps[t] & block).bit_count()
            scored.append((cells, p, block))
            if not cells:
                break
        scored.sort(key=lambda x: (x[0], x[1]))
        for cells, _, block in scored[: 1 if not scored[0][0] else MIGRATING_BLOCKS]:
            if self._place(job, s, e, block, cells > 0):
                return True
        return False

    def eject(self, job: Batch) -> bool:
        """Move `job` earlier (or give it a start) onto a block at most EJECTED queued jobs
        hold, placing those again (`earlier`); kept only when the plan's value rises."""
        current = self.starts.get(job.id)
        last = current[0] if current else self.problem.horizon
        before = self.value(job, last if current else None)
        for s in range(job.arrival, last):
            if self.budget <= 0 or self.value(job, s) <= before + 1e-9:
                break
            self.budget -= 1
            e = self.problem.end_of(job, s)
            fixed = 0
            for t in range(s, e):
                fixed |= self.problem.running_busy[t]
            active = []  # queued jobs placed in [s, e), in the problem's order
            for k in self.jobs:
                placed = self.starts.get(k.id)
                if k is not job and placed and placed[0] < e and s < self.problem.end_of(k, placed[0]):
                    active.append((k, placed[0], placed[1]))
            options = []
            for p in bits_of(lowest_bits(free_block_starts(self.problem, fixed, job.gpus), BLOCKS_EXAMINED)):
                self.budget -= 1
                block = self.problem.block(p, job.gpus)
                out = [(k, start) for k, start, mask in active if mask & block]
                if 0 < len(out) <= EJECTED:
                    lost = 0.0
                    for k, start in out:
                        lost += self.value(k, start)
                    options.append((lost, p, block, out))
            options.sort(key=lambda o: (o[0], o[1]))
            for lost, _, block, out in options[:EJECT_TRIES]:
                self.budget -= 1
                if self._eject_onto(job, s, e, block, out, self.value(job, s) - before, lost):
                    return True
        return False

    def _eject_onto(
        self, job: Batch, s: int, e: int, block: int, out: list[tuple[Batch, int]], gained: float, lost: float
    ) -> bool:
        """Take `out` off `block`, put `job` there from step s and place `out` again (most
        valuable first); kept when what that gains beats what it loses, else undone."""
        saved = self._save()
        if job.id in self.starts:
            self._mark(job, *self.starts.pop(job.id), on=False)
        for k, _ in out:
            self._mark(k, *self.starts.pop(k.id), on=False)
        cells = False
        for t in range(s, e):
            cells = cells or bool(self.apps[t] & block)
        if self._place(job, s, e, block, cells):
            for k, _ in sorted(out, key=lambda o: (-self.value(o[0], o[0].arrival), self.position[o[0].id])):
                self.earlier(k)
                placed = self.starts.get(k.id)
                gained += self.value(k, placed[0] if placed else None)
            if gained - lost > 1e-9:
                return True
        self._restore(saved)
        return False

    def _place(self, job: Batch, s: int, e: int, block: int, migrating: bool) -> bool:
        """Put `job` on `block` from step s, the apps on it migrating; False (nothing changed)
        when one cannot."""
        if migrating and not self._room_to_migrate(block, s, e):
            return False
        moved = self._migrate_all(block, s, e) if migrating else {}
        if moved is None:
            return False
        for app_id, masks in moved.items():
            old = self.sets[app_id]
            for t, mask in enumerate(masks):
                if mask != old[t]:
                    self.apps[t] = (self.apps[t] & ~old[t]) | mask
            self.sets[app_id] = masks
        self.starts[job.id] = (s, block)
        self._mark(job, s, block, on=True)
        return True

    def _room_to_migrate(self, block: int, s: int, e: int) -> bool:
        """Whether every step of [s, e) has as many idle GPUs outside `block` as the apps hold
        inside it: each GPU an app leaves needs an idle one of its own (apps never share a GPU
        in a legal plan), so without them `_migrate_all` fails; checked first because it is
        cheap."""
        return all(
            (self.apps[t] & block).bit_count() <= self._idle(self.apps, block, s, e, t).bit_count() for t in range(s, e)
        )

    def _migrate_all(self, block: int, s: int, e: int) -> dict[str, list[int]] | None:
        """New sets for the apps holding GPUs of `block` in [s, e), in the problem's order, or
        None when one cannot leave within its swap cap."""
        apps = list(self.apps)
        out: dict[str, list[int]] = {}
        for app in self.problem.realtime:
            sets = self.sets[app.id]
            if not any(sets[t] & block for t in range(s, e)):
                continue
            moved = self._migrate(app, sets, apps, block, s, e)
            if moved is None:
                return None
            for t in range(max(s - 1, 0), self.problem.horizon):  # from s - 1: GPUs entered early
                apps[t] = (apps[t] & ~sets[t]) | moved[t]
            out[app.id] = moved
        return out

    def _migrate(self, app: Realtime, sets: list[int], apps: list[int], block: int, s: int, e: int) -> list[int] | None:
        """One app's sets with each GPU of `block` it holds in [s, e) swapped for an idle one
        (`_lasting`), kept while it stays idle and the app keeps the GPU it stands for; None
        when no idle GPU is left or past the swap cap (`_within_cap`)."""
        T = self.problem.horizon
        out = list(sets)
        subs: dict[int, int] = {}  # GPU the app holds in `sets` -> the GPU it holds instead
        last = s
        for t in range(s, T):
            held = sets[t]
            idle = self._idle(apps, block, s, e, t)
            for g in list(subs):
                if not held >> g & 1 or (t >= e and not idle >> subs[g] & 1):
                    del subs[g]  # the app sheds it, or goes back to g (free again after the block)
            for g in bits_of(held & block) if t < e else []:
                if g in subs and idle >> subs[g] & 1:
                    continue
                taken = 0
                for h in subs.values():
                    taken |= 1 << h
                pick = self._lasting(apps, idle & ~taken, t)
                if pick < 0:
                    return None
                subs[g] = pick
            if t >= e and not subs:
                break
            for g, h in subs.items():
                out[t] = (out[t] & ~(1 << g)) | (1 << h)
            last = t + 1
        return out if self._within_cap(app, out, apps, block, s, e, min(last + 1, T)) else None

    def _idle(self, apps: list[int], block: int, s: int, e: int, t: int) -> int:
        """GPUs free of batch work and of every app at step t, outside `block` in [s, e)."""
        return self.problem.full & ~self.batch[t] & ~apps[t] & ~(block if s <= t < e else 0)

    def _lasting(self, apps: list[int], idle: int, t: int) -> int:
        """The GPU of `idle` that stays free of batch work and apps longest after step t
        (ties: highest index); -1 when `idle` is empty."""
        if not idle:
            return -1
        for k in range(t + 1, self.problem.horizon):
            nxt = idle & ~self.batch[k] & ~apps[k]
            if not nxt:
                break
            idle = nxt
        return idle.bit_length() - 1

    def _within_cap(
        self, app: Realtime, out: list[int], apps: list[int], block: int, s: int, e: int, stop: int
    ) -> bool:
        """Whether `out` (changed in [s, stop)) keeps the swap cap, entering GPUs a step early
        where a step moves too many: the app holds the old and the new GPU for that step."""
        for t in range(max(s, 1) if app.current_mask < 0 else s, stop):
            before = out[t - 1] if t else app.current_mask
            excess = (out[t] ^ before).bit_count() - app.swap_cap
            if excess <= 0:
                continue
            entering = out[t] & ~before & self._idle(apps, block, s, e, t - 1) if t else 0
            early = lowest_bits(entering, excess)
            if early.bit_count() < excess or before.bit_count() + excess > app.max_gpus:
                return False
            if t >= 2 or app.current_mask >= 0:
                earlier = out[t - 2] if t >= 2 else app.current_mask
                if ((before | early) ^ earlier).bit_count() > app.swap_cap:
                    return False
            out[t - 1] = before | early
        return True

    def _mark(self, job: Batch, start: int, mask: int, on: bool) -> None:
        for t in range(start, self.problem.end_of(job, start)):
            self.batch[t] = self.batch[t] | mask if on else self.batch[t] & ~mask

    def _save(self) -> Saved:
        return dict(self.starts), dict(self.sets), list(self.batch), list(self.apps)

    def _restore(self, saved: Saved) -> None:
        self.starts, self.sets, self.batch, self.apps = saved


def polish(problem: Problem, schedule: Schedule, budget: int) -> Schedule:
    """`schedule` with batch jobs moved to earlier starts or given one (`earlier`, else
    `eject`), largest possible gain first, in passes until a pass moves nothing or `budget`
    units of work are spent."""
    plan = _Plan(problem, schedule, budget)
    T = problem.horizon
    while plan.budget > 0:
        gains = []
        for job in plan.jobs:
            current = plan.starts.get(job.id)
            if job.arrival >= T or (current and current[0] <= job.arrival):
                continue
            gain = plan.value(job, job.arrival) - plan.value(job, current[0] if current else None)
            gains.append((-gain, plan.position[job.id], job))
        gains.sort(key=lambda x: (x[0], x[1]))
        moved = False
        for _, _, job in gains:
            moved = plan.earlier(job) or plan.eject(job) or moved
            if plan.budget <= 0:
                break
        if not moved:
            break
    return plan.schedule(schedule)
