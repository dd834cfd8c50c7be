"""Where real-time apps will live, as the batch packer sees it: two layouts to pack around.

- reserving: apps may end up on any GPUs; blocks only leave enough GPUs free at each step and
  across each step, and the apps' GPUs are picked after packing;
- skyline: apps live at the top of the pool, growing down into it; blocks fill in below.

Both pin an app's `current` GPUs for as long as the swap cap keeps it from leaving them all,
so no block is placed where the app is bound to be. An app whose swap cap is 0 cannot
change its set at all, so it gets a fixed home list up front and holds its first c(t) GPUs at
step t: legal by construction, and its cells are known to the packer.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpualloc.solvers.policies.heuristic.packing import Reservation
from gpualloc.solvers.problem import Problem, bits_of, highest_bits, mask_of


def _pinned(problem: Problem, homes: dict[int, list[int]]) -> list[list[int]]:
    """Per app, per step: the GPUs it is bound to (a homed app's set; otherwise the `current`
    GPUs while the swap cap keeps it from having left them all)."""
    out = []
    for i, app in enumerate(problem.realtime):
        if i in homes:
            out.append(homes[i])
            continue
        cur = max(app.current_mask, 0)
        n = cur.bit_count()
        out.append([cur if n - (t + 1) * app.swap_cap > 0 or t == 0 else 0 for t in range(problem.horizon)])
    return out


RESERVING_REPAIRS = 4  # apps picked after packing can clash with blocks at scale; skyline cannot fail
HOME_CAP = 0  # apps that cannot change their set at all


def _homes(problem: Problem, curves: list[list[int]]) -> dict[int, list[int]]:
    """Per app index with swap_cap <= HOME_CAP: its GPU set at each step, from a fixed home list.

    The list starts with the app's `current` GPUs (so step 0 is within the cap of them), then
    GPUs that no running job and no other app's `current` ever holds, taken from the top or
    the bottom of the pool, whichever leaves the longer free run for batch blocks. An app for
    which not enough such GPUs remain stays dynamic.
    """
    kept = 0  # GPUs real-time apps hold for good: `current` sets, then homes
    for app in problem.realtime:
        kept |= max(app.current_mask, 0)
    claimed = kept
    for busy in problem.running_busy:
        claimed |= busy
    homes: dict[int, list[int]] = {}
    for i, (app, curve) in enumerate(zip(problem.realtime, curves)):
        if app.swap_cap > HOME_CAP:
            continue
        own = bits_of(max(app.current_mask, 0))
        need = max(curve, default=0) - len(own)
        unclaimed = bits_of(problem.full & ~claimed)
        if need > len(unclaimed):
            continue
        ends = [unclaimed[len(unclaimed) - need:][::-1], unclaimed[:need]] if need > 0 else [[]]
        extra = max(ends, key=lambda e: _longest_run(problem, problem.full & ~kept & ~mask_of(e)))
        order = own + extra
        claimed |= mask_of(order)
        kept |= mask_of(order)
        homes[i] = [mask_of(order[:c]) for c in curve]
    return homes if homes and _homes_fit(problem, curves, homes) else {}


def _longest_run(problem: Problem, free: int) -> int:
    """Length of the longest run of `free` GPUs inside one node."""
    best, N = 0, problem.node_size
    for node in range(0, problem.gpus, N):
        bits = (free >> node) & ((1 << N) - 1)
        while bits:
            low = bits & -bits
            run = (bits // low) & ~((bits // low) + 1)
            best = max(best, run.bit_length())
            bits &= ~(run * low)
    return best


def _homes_fit(problem: Problem, curves: list[list[int]], homes: dict[int, list[int]]) -> bool:
    """Whole home lists are off limits to the other apps: check the rest still fit beside them."""
    homed = 0
    for sets in homes.values():
        for mask in sets:
            homed |= mask
    for t in range(problem.horizon):
        dynamic = sum(c[t] for i, c in enumerate(curves) if i not in homes)
        if dynamic + (problem.running_busy[t] | homed).bit_count() > problem.gpus:
            return False
    return True


@dataclass(frozen=True)
class Layout:
    """Real-time curves and what they ask of batch work under one layout."""

    name: str
    curves: list[list[int]]
    reservation: Reservation
    fixed: dict[int, list[int]]  # app index -> GPU set per step, for homed apps
    max_repairs: int | None  # repair rounds before the layout is given up (None: never)
    lowered: bool = False  # some curve is below its app's demand: serve it from what batch work leaves

    @classmethod
    def reserving(cls, problem: Problem, curves: list[list[int]], lowered: bool = False) -> "Layout":
        T = problem.horizon
        homes = _homes(problem, curves)
        pins = _pinned(problem, homes)
        zone = [0] * T
        reserve, keep = [0] * T, [0] * T
        for c, pin in zip(curves, pins):
            for t in range(T):
                zone[t] |= pin[t]
                reserve[t] += c[t] - min(pin[t].bit_count(), c[t])
                if t:
                    keep[t] += min(c[t - 1], c[t])
        return cls("reserving", curves, Reservation(reserve, keep, zone), homes, RESERVING_REPAIRS, lowered)

    @classmethod
    def skyline(cls, problem: Problem, curves: list[list[int]], lowered: bool = False) -> "Layout":
        T = problem.horizon
        homes = _homes(problem, curves)
        pins = _pinned(problem, homes)
        zone, prev = [], 0
        drift = sum(app.swap_cap for app in problem.realtime) // 2  # one GPU moved costs two swaps
        for t in range(T):
            pinned = 0
            want = 0
            for c, pin in zip(curves, pins):
                pinned |= pin[t]
                want += c[t] - min(pin[t].bit_count(), c[t])
            free = problem.full & ~problem.running_busy[t] & ~pinned
            stay = highest_bits(prev & free, want)  # the skyline stays put where it can,
            stay |= highest_bits(free & ~stay, want - stay.bit_count())
            for _ in range(drift):  # and drifts up as fast as the apps' swap caps allow
                above = free & ~stay
                if not stay or above.bit_length() <= (stay & -stay).bit_length():
                    break
                stay = (stay & ~(stay & -stay)) | (1 << (above.bit_length() - 1))
            prev = pinned | stay
            zone.append(prev)
        return cls("skyline", curves, Reservation([0] * T, None, zone), homes, None, lowered)
