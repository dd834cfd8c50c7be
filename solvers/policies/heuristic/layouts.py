"""Where real-time apps will live, as the batch packer sees it: three layouts to pack around.

- reserving: apps may end up on any GPUs; blocks only leave enough GPUs free at each step and
  across each step, and the apps' GPUs are picked after packing;
- skyline: apps live at the top of the pool, growing down into it; blocks fill in below;
- nest (with apps only): each app grows into the GPUs `nest_picks` finds and stays there.

All pin an app's `current` GPUs for as long as the swap cap keeps it from leaving them all,
so no block is placed where the app is bound to be. An app whose swap cap is 0 cannot
change its set at all, so it gets a fixed home list up front and holds its first c(t) GPUs at
step t: legal by construction, and its cells are known to the packer.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpualloc.solvers.policies.heuristic.packing import Reservation
from gpualloc.solvers.policies.heuristic.realtime import floor_curves
from gpualloc.solvers.policies.heuristic.trade import Trade, reserved
from gpualloc.solvers.problem import Problem, bits_of, highest_bits, lowest_bits, mask_of


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


def _homes(problem: Problem, curves: list[list[int]], home_cap: int = HOME_CAP) -> dict[int, list[int]]:
    """Per app index with swap_cap <= `home_cap`: its GPU set at each step, from a fixed home list.

    The list starts with the app's `current` GPUs (so step 0 is within the cap of them), then
    GPUs that no running job and no other app's `current` ever holds, taken from the top or
    the bottom of the pool or nested beside those (`nest_picks`), whichever leaves the longest
    free run for batch blocks. An app for which not enough such GPUs remain stays dynamic.
    """
    kept = 0  # GPUs real-time apps hold for good: `current` sets, then homes
    for app in problem.realtime:
        kept |= max(app.current_mask, 0)
    claimed = kept
    for busy in problem.running_busy:
        claimed |= busy
    homes: dict[int, list[int]] = {}
    for i, (app, curve) in enumerate(zip(problem.realtime, curves)):
        if app.swap_cap > home_cap:
            continue
        own = bits_of(max(app.current_mask, 0))
        need = max(curve, default=0) - len(own)
        unclaimed = problem.full & ~claimed
        if need > unclaimed.bit_count():
            continue
        ends = (
            [
                nest_picks(problem, claimed, unclaimed, need),  # first: it wins ties
                bits_of(highest_bits(unclaimed, need))[::-1],
                bits_of(lowest_bits(unclaimed, need)),
            ]
            if need > 0
            else [[]]
        )
        extra = max(ends, key=lambda e: _longest_run(problem, problem.full & ~kept & ~mask_of(e)))
        order = own + extra
        claimed |= mask_of(order)
        kept |= mask_of(order)
        homes[i] = [mask_of(order[:c]) for c in curve]
    return homes if homes and _homes_fit(problem, curves, homes) else {}


def nest_picks(problem: Problem, occupied: int, candidates: int, n: int) -> list[int]:
    """n GPUs of `candidates`, one at a time, each in the smallest aligned block (2, 4, ... up
    to the node) that already holds an occupied GPU, so apps fill blocks that running jobs and
    other apps broke and whole blocks stay whole for batch work; the highest index among
    equals, and the highest overall when no block is broken. Bitmask arithmetic: no loop over
    the pool's GPUs."""
    out: list[int] = []
    for _ in range(n):
        if not candidates:
            break
        pick, touched = candidates, occupied
        for low, high, half in problem.buddy_halves:
            touched |= ((touched & low) << half) | ((touched & high) >> half)  # the block holds one
            inside = candidates & touched
            if inside:
                pick = inside
                break
        g = pick.bit_length() - 1
        out.append(g)
        occupied |= 1 << g
        candidates &= ~(1 << g)
    return out


def _longest_run(problem: Problem, free: int) -> int:
    """Length of the longest run of `free` GPUs inside one node: runs of k+1 are the starts of
    two overlapping runs of k, so it takes as many mask operations as the run is long (a node's
    last GPU starts no run of two)."""
    if not free:
        return 0
    last = (problem.node_starts >> 1) | (1 << (problem.gpus - 1))
    length, run = 1, free & (free >> 1) & ~last
    while run:
        length += 1
        run &= run >> 1
    return length


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
    lowered: list[list[int]] | None = (
        None  # the target curves, when some curve is below them: serve from what batch work leaves
    )

    @classmethod
    def reserving(
        cls,
        problem: Problem,
        curves: list[list[int]],
        lowered: list[list[int]] | None = None,
        homes: dict[int, list[int]] | None = None,
        trade: bool = False,
        floors: list[list[int]] | None = None,
        repairs: int = RESERVING_REPAIRS,
    ) -> "Layout":
        """With `trade`, blocks may cut the curves down to the apps' `floors` (`floor_curves`
        unless given) where that pays (`trade.Trade`); homed apps (fixed sets) are never cut."""
        T = problem.horizon
        homes = _homes(problem, curves) if homes is None else homes
        pins = _pinned(problem, homes)
        counts = [[m.bit_count() for m in pin] for pin in pins]
        zone, reserve, keep = [0] * T, [0] * T, [0] * T
        for c, pin, n in zip(curves, pins, counts):
            zone = [z | m for z, m in zip(zone, pin)]
            reserve = [r + reserved(level, k) for r, level, k in zip(reserve, c, n)]
            keep = [0] + [k + min(a, b) for k, a, b in zip(keep[1:], c, c[1:])]
        deal = None
        if trade and problem.realtime:
            floors = [list(f) for f in (floor_curves(problem) if floors is None else floors)]
            for i in homes:  # a homed app's sets are fixed: its curve is its own floor
                floors[i] = list(curves[i])
            deal = Trade.of(problem, curves, floors, counts)
        return cls("reserving", curves, Reservation(reserve, keep, zone, deal), homes, repairs, lowered)

    @classmethod
    def fixed_sets(
        cls,
        problem: Problem,
        curves: list[list[int]],
        lowered: list[list[int]] | None = None,
        homes: dict[int, list[int]] | None = None,
        nest: bool = False,
    ) -> "Layout":
        """Every app gets its GPU set per step here (`app_sets`: at the top of the pool, or
        nested into nodes others already broke), and those sets are the zone batch blocks keep
        out of: what the packer leaves is exactly what the apps hold."""
        homes = _homes(problem, curves) if homes is None else homes
        sets = app_sets(problem, curves, homes, nest)
        zone = [0] * problem.horizon
        for masks in sets.values():
            for t, mask in enumerate(masks):
                zone[t] |= mask
        return cls(
            "nest" if nest else "skyline", curves, Reservation([0] * problem.horizon, None, zone), sets, None, lowered
        )


def layouts(
    problem: Problem,
    curves: list[list[int]],
    lowered: list[list[int]] | None = None,
    floors: list[list[int]] | None = None,
    home_cap: int = HOME_CAP,
    repairs: int = RESERVING_REPAIRS,
) -> list[Layout]:
    """The layouts every curve set is packed around: apps anywhere (trading service for batch
    value where the curves are the apps' demand, given up after `repairs` repair rounds), at the
    top, nested; apps with a swap cap at most `home_cap` get fixed homes."""
    homes = _homes(problem, curves, home_cap)
    out = [
        Layout.reserving(problem, curves, lowered, homes, trade=lowered is None, floors=floors, repairs=repairs),
        Layout.fixed_sets(problem, curves, lowered, homes),
    ]
    if problem.realtime:
        out.append(Layout.fixed_sets(problem, curves, lowered, homes, nest=True))
    return out


def app_sets(
    problem: Problem, curves: list[list[int]], homes: dict[int, list[int]], nest: bool
) -> dict[int, list[int]]:
    """Per app, its GPU set at each step: homed apps keep their homes; each other app keeps
    the GPUs it held (its `current` at step 0) and sheds its lowest when its curve falls. When
    it rises it grows into the highest free GPUs and spends the swaps its curve leaves (two a
    GPU) moving its lowest GPU up to a free one above, so the apps gather at the top of the
    pool; or, with `nest`, it grows into the GPUs `nest_picks` finds and stays there.
    Legal by construction: curves are within the floors, ceilings and swap caps (R3, R4)."""
    T, apps = problem.horizon, problem.realtime
    sets = {i: list(masks) for i, masks in homes.items()}
    dynamic = [i for i in range(len(apps)) if i not in homes]
    for i in dynamic:
        sets[i] = [0] * T
    homed = 0
    for masks in homes.values():
        for mask in masks:
            homed |= mask
    for t in range(T):
        free = problem.full & ~problem.running_busy[t] & ~homed
        held = {}
        prev = {i: apps[i].current_mask if t == 0 else sets[i][t - 1] for i in dynamic}
        for i in dynamic:
            keep = max(prev[i], 0) & free
            held[i] = (
                keep if keep.bit_count() <= curves[i][t] else _lowest_dropped(keep, keep.bit_count() - curves[i][t])
            )
            free &= ~held[i]
        for i in dynamic:
            need = curves[i][t] - held[i].bit_count()
            if need > 0:
                held[i] |= (
                    mask_of(nest_picks(problem, problem.full & ~free, free, need)) if nest else highest_bits(free, need)
                )
                free &= ~held[i]
        for i in dynamic:
            if prev[i] >= 0 and not nest:
                spare = apps[i].swap_cap - (held[i] ^ prev[i]).bit_count()
                while spare >= 2 and held[i] and free.bit_length() > (held[i] & -held[i]).bit_length():
                    low, high = held[i] & -held[i], 1 << (free.bit_length() - 1)
                    held[i] = (held[i] & ~low) | high
                    free = (free & ~high) | low
                    spare -= 2
            sets[i][t] = held[i]
    return sets


def _lowest_dropped(mask: int, n: int) -> int:
    """`mask` without its n lowest set bits."""
    for _ in range(max(n, 0)):
        mask &= mask - 1
    return mask
