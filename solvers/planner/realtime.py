"""The planner's real-time role: apps' floors (checked at registration, reserved in the current plan), their
observed traffic, and the GPUs granted within the committed step when demand rises (`react`) or
handed back when it falls (`release`)."""

from __future__ import annotations

from dataclasses import replace

from gpualloc.solvers.planner.need import observed_need
from gpualloc.solvers.planner.pool_state import PlannerState, next_floor
from gpualloc.solvers.planner.records import AppSpec, AppState, Grant, Seen
from gpualloc.solvers.planner.window import observed_in, running_mask
from gpualloc.solvers.problem import bits_of


class RealTime:
    """Real-time apps' floors, traffic, grants and releases, over the pool's `state`."""

    __slots__ = ("state",)

    def __init__(self, state: PlannerState) -> None:
        self.state = state

    def floor_problem(self, app: AppSpec, current: int = -1) -> str:
        """Why `app`'s bounds cannot be kept from the next commit on, or "" when they can. Running
        work is never moved and holds its GPUs at least until the next commit, so an app whose
        floor does not fit beside it, the GPUs of down or drained nodes and the other apps'
        floors could not be kept within its bounds; nor could one whose bounds are further from
        the GPUs it holds (a registered app's, or a new one's `current` mask, -1: none) than its
        swap cap moves in a step. It is refused instead of committed outside them."""
        cap = app.cap(self.state.config.swap_cap)
        old = self.state.apps.get(app.id)
        held = (old.held if old is not None else current) & ~(self.state.closed)
        if held >= 0:  # it holds GPUs now: R4 lets it gain or give up `cap` of them a step
            n = held.bit_count()
            if app.min_gpus > n + cap:
                return (
                    f"min_gpus: {app.min_gpus} cannot be reached at the next step: the app holds {n} GPUs and its "
                    f"swap_cap lets it take at most {cap} more a step (R4); register a floor of at most {n + cap}"
                )
            if app.max_gpus is not None and app.max_gpus < n - cap:
                return (
                    f"max_gpus: {app.max_gpus} cannot be reached at the next step: the app holds {n} GPUs and its "
                    f"swap_cap lets it give up at most {cap} a step (R4); register a ceiling of at least {n - cap}"
                )
        need = next_floor(self.state, app, held)
        if need == 0:
            return ""
        others = sum(next_floor(self.state, a.spec, a.held) for a_id, a in self.state.apps.items() if a_id != app.id)
        taken = (running_mask(self.state.running) | self.state.closed).bit_count()
        room = self.state.config.gpus - taken - others
        if need <= room:
            return ""
        return (
            f"min_gpus: {need} GPUs cannot be kept from the next step on: running jobs and "
            f"unavailable nodes take {taken} of the pool's {self.state.config.gpus} GPUs and the other apps' "
            f"floors {others}, leaving {max(room, 0)} (running work is never moved; register with a "
            "lower floor, or once work ends)"
        )

    def register_app(self, app: AppSpec, current: int = -1) -> None:
        """Register (or update) an app; a new one holding GPUs (`current`, a mask; -1: none)
        holds them from now on, a registered one keeps what it holds. Its floor is reserved at once in the current plan
        (`_reserve_floor`), so no arrival inserted before the next boundary's replan can start
        on the GPUs the floor needs (`floor_problem` says whether it fits at all). A cut waiting
        for its plan is dropped: that plan could not be carried over, and its boundary need not
        wait for it."""
        old = self.state.apps.get(app.id)
        if old is not None:  # what the pool knows of it stays; its registration changes
            state = replace(old, spec=app)
        else:
            state = AppState(app, held=current)
            if current > 0:  # bound to it now, as a committed step's GPUs are
                self.state.committed |= current & ((1 << self.state.config.gpus) - 1)
        self.state.apps[app.id] = state
        self.state.ahead = None  # a plan cut before knew other app rules: the boundary replans (`carry_over`)
        if self.state.busy is not None:
            self._reserve_floor(state, app.min_gpus - (old.spec.min_gpus if old is not None else 0), old is None)

    def _reserve_floor(self, app: AppState, extra: int, new: bool) -> None:
        """Hold `extra` more GPUs for `app` at every step of the current plan (and, for a new app
        holding GPUs, that set first, so its swap cap lets it keep them): the plan made before it
        registered gives it nothing, and the floors must not be taken by work started before the
        boundary replans with it. GPUs of that set the plan had booked (another app's floor
        held there, work planned there) are booked again on free ones, so no floor loses the
        GPUs held for it. Where a step has too few free GPUs, they are held by work planned
        there, not running (`floor_problem`), which the boundary's replan moves."""
        pool = (1 << self.state.config.gpus) - 1
        blocked = self.state.closed
        own = app.held & pool & ~blocked if new and app.held >= 0 else 0
        plan = self.state.busy
        assert plan is not None  # `register_app` reserves only in a current plan
        for t, busy in enumerate(plan):
            kept = own
            need = max(0, extra - own.bit_count()) + (own & busy).bit_count()
            free = pool & ~(busy | blocked | kept)
            while need > 0 and free:
                top = 1 << (free.bit_length() - 1)  # from the top: inserted blocks fill from GPU 0
                kept |= top
                free ^= top
                need -= 1
            plan[t] = busy | kept

    def observe_traffic(self, app_id: str, step: int, gpus: int, load: float | None = None) -> None:
        """`gpus` needed at `step` (`load`: the same, unrounded, when the observation gave requests/s)."""
        app = self.state.apps[app_id]
        latest = Seen(step, gpus) if app.latest is None or step >= app.latest.step else app.latest
        observed = {**app.observed, step: max(gpus, app.observed.get(step, 0))}
        self.state.apps[app_id] = replace(app, observed=observed, latest=latest)
        self.state.forecasts.observed(app_id, self.state.hour_of(step), gpus if load is None else load)

    def react(self, app_id: str) -> Grant | None:
        """The demand `app_id` needs now in the committed step (`_needs`) above what it holds there, met at once
        where it can be: GPUs idle in the step (held by no running job, no start decided since
        the commit, no app, no down or drained node) first, then GPUs other apps hold above their
        own demand observed in the step (least valuable app first; each keeps its demand and its
        floor), up to the app's ceiling. Every app's swap cap holds across the step, counted
        against the set it ended the previous step with (a GPU an app held then comes back free,
        one it took this step leaves free; an app's first committed step has none), and every
        registered floor keeps room at the next commit (what an app takes now, its swap cap
        makes it keep then). Idle GPUs are taken first among those it held then, then those the
        current plan leaves free next step, lowest first. None when nothing is short or nothing
        can be had. What it gets it keeps until the next boundary's plan, which starts from it."""
        step, app = self.state.now - 1, self.state.apps.get(app_id)
        wanted = None if app is None else self._needs(app)
        if app is None or app.held < 0 or wanted is None:
            return None
        pool, dead = (1 << self.state.config.gpus) - 1, self.state.closed
        ceiling = app.spec.ceiling(self.state.config.gpus)
        # its GPUs on nodes that went down (or closed) within the step stay in its set until the
        # boundary moves it: the grant stops at its ceiling counting them, so the set keeps R3
        short = min(min(wanted, ceiling) - (app.held & ~dead).bit_count(), ceiling - app.held.bit_count())
        if short <= 0:
            return None
        taken = self.state.committed | running_mask(self.state.running) | dead
        for other in self.state.apps.values():
            taken |= max(other.held, 0)
        cap, before, spent = self._swaps(app)
        planned = self.state.busy[0] if self.state.busy else 0
        order: list[tuple[str | None, int]] = []  # (donor or None for idle, GPU), in the order taken
        for g in sorted(bits_of(pool & ~taken), key=lambda g: (not before >> g & 1, bool(planned >> g & 1), g)):
            cost = -1 if before >> g & 1 else 1  # held at the end of the previous step: taking it back undoes a swap
            if short == 0 or spent + cost > cap:
                break
            order.append((None, g))
            spent, short = spent + cost, short - 1
        donors = (
            d
            for d in self.state.apps.values()
            if d.spec.id != app_id and d.held > 0 and observed_in(d, step) is not None
        )
        for donor in sorted(donors, key=lambda d: (d.spec.priority, d.spec.id)):
            live = donor.held & ~dead
            spare = live.bit_count() - max(observed_in(donor, step) or 0, donor.spec.min_gpus)
            d_cap, d_before, d_spent = self._swaps(donor)
            for g in sorted(bits_of(live), key=lambda g: (bool(d_before >> g & 1), not before >> g & 1, g)):
                if short == 0 or spare <= 0:
                    break
                d_cost, cost = (1 if d_before >> g & 1 else -1), (-1 if before >> g & 1 else 1)
                if d_spent + d_cost <= d_cap and spent + cost <= cap:
                    order.append((donor.spec.id, g))
                    d_spent, spent, short, spare = d_spent + d_cost, spent + cost, short - 1, spare - 1
        room = self.state.config.gpus - (running_mask(self.state.running) | dead).bit_count()
        if order and not self._floors_fit(app_id, order, room):  # the last taken go back first
            low, high = 0, len(order) - 1  # the longest prefix that fits: taking more only raises floors
            while low < high:
                mid = (low + high + 1) // 2
                low, high = (mid, high) if self._floors_fit(app_id, order[:mid], room) else (low, mid - 1)
            del order[low:]
        if not order:
            return None
        grant = sum(1 << g for _, g in order)
        for donor_id, g in order:
            if donor_id is not None:
                donor = self.state.apps[donor_id]
                self.state.apps[donor_id] = replace(donor, held=donor.held & ~(1 << g))
        app = self.state.apps[app_id] = replace(app, held=app.held | grant, granted=app.granted | grant)
        self.state.committed |= grant
        given = {
            d: tuple(bits_of(self.state.apps[d].held)) for d in dict.fromkeys(d for d, _ in order if d is not None)
        }
        n, idle = grant.bit_count(), sum(1 for d, _ in order if d is None)
        still = min(wanted, ceiling) - (app.held & ~dead).bit_count()
        if app.latest is not None and app.latest.step == step:
            seen = f"in step {step}"
        elif app.latest is not None and app.latest.step == step - 1:
            seen = f"in step {step - 1}, holding into step {step}"
        else:
            seen = f"for step {step} (known ahead)"
        reason = (
            f"observed demand {wanted} GPUs {seen} above the {app.held.bit_count() - n} it held: "
            + ", ".join(
                part
                for part in (
                    f"{idle} idle GPU{'s' * (idle != 1)}" if idle else "",
                    f"{n - idle} from {', '.join(given)} above their observed demand" if given else "",
                )
                if part
            )
            + " granted at once"
            + (f", {still} still short (nothing more to take, a swap cap, or the floors next step)" if still else "")
        )
        return Grant(step, app_id, tuple(bits_of(app.held)), tuple(bits_of(grant)), reason, given)

    def release(self, app_id: str) -> Grant | None:
        """GPUs given to `app_id` within the committed step (`react`) above what it needs now
        (`_needs`, its floor at least) handed back as idle, so arrivals of the step and other
        apps' grants may take them: first those it did not hold at the end of the previous step
        (each gives back the swap taking it cost), then, as its swap cap allows, those it did
        (each a swap again), highest first; none on a down or drained node. None when it needs
        them all, or nothing was given in the step."""
        step, app = self.state.now - 1, self.state.apps.get(app_id)
        wanted = None if app is None else self._needs(app)
        dead = self.state.closed
        if app is None or wanted is None or not app.granted & app.held & ~dead:
            return None
        surplus = (app.held & ~dead).bit_count() - max(wanted, app.spec.min_gpus)
        cap, before, spent = self._swaps(app)
        freed = 0
        for g in sorted(bits_of(app.granted & app.held & ~dead), key=lambda g: (bool(before >> g & 1), -g)):
            cost = 1 if before >> g & 1 else -1  # given back, a GPU it held then is a swap again
            if surplus <= 0 or spent + cost > cap:
                break
            freed, spent, surplus = freed | 1 << g, spent + cost, surplus - 1
        if not freed:
            return None
        app = self.state.apps[app_id] = replace(app, held=app.held & ~freed, granted=app.granted & ~freed)
        self.state.committed &= ~freed
        reason = (
            f"observed demand {wanted} GPUs in step {step}: {freed.bit_count()} GPU{'s' * (freed.bit_count() != 1)} "
            "granted in the step handed back idle"
        )
        return Grant(step, app_id, tuple(bits_of(app.held)), (), reason, {}, tuple(bits_of(freed)))

    def _needs(self, app: AppState) -> int | None:
        """GPUs `app` needs now in the committed step (`need.observed_need`: what `status` and the
        shortfall metric report); None: none observed."""
        return observed_need(app, self.state.now - 1)

    def _floors_fit(self, app_id: str, order: list[tuple[str | None, int]], room: int) -> bool:
        """Would every app's floor at the next commit (`_next_floor`: what its swap cap makes it
        keep of its set then) fit in the `room` running work and unavailable nodes leave, were
        `app_id` to take the GPUs of `order` (idle ones, or a donor's)?"""
        after = {a_id: a.held for a_id, a in self.state.apps.items()}
        for donor_id, g in order:
            after[app_id] = after[app_id] | 1 << g
            if donor_id is not None:
                after[donor_id] &= ~(1 << g)
        return sum(next_floor(self.state, a.spec, after[a_id]) for a_id, a in self.state.apps.items()) <= room

    def _swaps(self, app: AppState) -> tuple[int, int, int]:
        """(swap cap, the set it ended the previous step with, swaps spent in this step) of `app`;
        its first committed step is bound by no cap (R4 counts between steps)."""
        cap = app.spec.cap(self.state.config.swap_cap)
        if app.before < 0:
            return self.state.config.gpus, 0, 0
        return cap, app.before, (app.held ^ app.before).bit_count()
