"""Calibrated demand quantiles: split conformal on recent errors, corrected by quantile tracking.

A forecast of an hour's demand (its largest observation) at quantile q is the point forecast
raised by the q-quantile of the last `ERRORS` one-step errors (split conformal: the
ceil((n + 1) q)-th smallest of n), then moved by a correction tracked per level q (adaptive
conformal inference, Gibbs and Candes 2021; quantile tracking, Angelopoulos et al. 2023): each
settled hour moves it by `TRACK_RATE` x (short - (1 - q)), short being 1 when the hour's maximum
needed more GPUs than the forecast gave. Whatever the stream, while a correction stays within
`OFFSET_LIMIT` the share of hours short over T hours is within (2 OFFSET_LIMIT + rate) / (rate T) of 1 - q: the guarantee needs no assumption on the errors, so it holds at any
observation rate, whole GPUs included. Forecasts made `LEADS` hours or more ahead take that
lead's own correction, tracked the same way against what the hour then needed, so plans that
commit GPUs for hours (a batch job's block) see the error of forecasts that far ahead; its rate
is `TRACK_RATE` / lead, since a forecast L hours ahead is judged L hours after it is made, and a
correction moving at the one-step rate would overshoot through L hours of stale misses.

Errors are logs of demand and forecast each plus `SLACK` GPUs (a load under one GPU that doubles
costs one GPU, not a doubling of the daytime margin). An hour far below its forecast (`ANOMALY`
typical errors: a holiday, an outage) moves no correction: it says nothing of the upper quantiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

ERRORS = 2 * 168  # one-step errors kept: two weeks of hours
MIN_ERRORS = 24  # errors needed before their own quantiles replace the assumed spread
PRIOR_SPREAD = 0.15  # log-error spread assumed before that
QUANTILES = (0.5, 0.8, 0.9, 0.95, 0.99)  # levels a correction is tracked for
TRACK_RATE = 0.05  # log units a correction moves a tracked hour
OFFSET_LIMIT = 2.0  # log units a correction stays within
ANOMALY = 4.0  # typical errors below the forecast past which an hour moves no correction
SLACK = 1.0  # GPUs added to demand and forecast before an error's log is taken
LEADS = (2, 4, 8, 16, 32, 64)  # hours ahead from which a forecast takes a lead's own correction
OLD_LEADS = (4, 16, 64)  # the leads of a state that names none


@dataclass
class Pending:
    """The hour being observed: its log point forecast and GPUs at each tracked quantile, made
    before any of its observations was learned."""

    hour: int
    point: float
    gpus: list[int]


def _zeros() -> list[float]:
    return [0.0] * len(QUANTILES)


@dataclass
class Calibration:
    """An app's errors and tracked corrections, and the forecasts waiting to be judged."""

    errors: list[float] = field(default_factory=list)  # one-step errors of hour maxima, oldest first
    offsets: list[float] = field(default_factory=_zeros)  # tracked, by QUANTILES
    pending: Pending | None = None
    lead_offsets: list[list[float]] = field(default_factory=lambda: [_zeros() for _ in LEADS])
    lead_pending: list[dict[int, list[int]]] = field(default_factory=lambda: [{} for _ in LEADS])  # hour -> GPUs
    cache: dict[tuple[float, int | None], float] = field(default_factory=dict, repr=False)  # (q, lead) -> log margin

    def copy(self) -> Calibration:
        p = self.pending
        return Calibration(
            list(self.errors),
            list(self.offsets),
            None if p is None else Pending(p.hour, p.point, list(p.gpus)),
            [list(o) for o in self.lead_offsets],
            [{h: list(g) for h, g in p.items()} for p in self.lead_pending],
        )

    def at(self, point: float, q: float, lead: int | None = None) -> float:
        """GPUs (fractional) at quantile `q` around the log point forecast `point`, one step
        ahead, or with `lead` (an index of `LEADS`) that lead's correction on top."""
        margin = self.cache.get((q, lead))
        if margin is None:
            if len(self.errors) < MIN_ERRORS:
                base = PRIOR_SPREAD * NormalDist().inv_cdf(min(max(q, 0.01), 0.99))
            else:
                base = conformal_quantile(self.errors, q)
            margin = base + float(np.interp(q, QUANTILES, self.offsets))
            if lead is not None:
                margin += float(np.interp(q, QUANTILES, self.lead_offsets[lead]))
            self.cache[(q, lead)] = margin
        return max(0.0, (math.exp(point) + SLACK) * math.exp(margin) - SLACK)

    def settle(self, hour: int, demand: float) -> None:
        """`hour` is over and needed `demand` GPUs at most: learn its error and move each
        correction whose forecast for it is pending."""
        p, self.pending = self.pending, None
        if p is None or p.hour != hour:
            return
        error = hour_error(demand, p.point)
        spread = float(np.median(np.abs(self.errors))) if len(self.errors) >= MIN_ERRORS else None
        self.errors = (self.errors + [error])[-ERRORS:]
        self.cache.clear()
        for pending in self.lead_pending:
            for h in [h for h in pending if h < hour]:
                del pending[h]
        if spread is not None and error < -ANOMALY * spread:
            for pending in self.lead_pending:
                pending.pop(hour, None)
            return  # a holiday's or an outage's hour: far below, it tells nothing of the upper quantiles
        if not self.learned(MIN_ERRORS + 1):
            return  # the assumed spread's misses would teach the corrections the cold start, not the model
        needed = math.ceil(demand - 1e-9)
        track(self.offsets, p.gpus, needed, TRACK_RATE)
        for lead, offsets, pending in zip(LEADS, self.lead_offsets, self.lead_pending):
            made = pending.pop(hour, None)
            if made is not None:
                track(offsets, made, needed, TRACK_RATE / math.sqrt(lead))

    def learned(self, hours: int) -> bool:
        """Whether `hours` one-step errors have been learned (the window keeps at most `ERRORS`)."""
        return len(self.errors) >= min(hours, ERRORS)

    def dump(self) -> dict[str, Any]:
        p = self.pending
        return {
            "errors": self.errors,
            "offsets": self.offsets,
            "pending": None if p is None else [p.hour, p.point, p.gpus],
            "leads": list(LEADS),
            "lead_offsets": self.lead_offsets,
            "lead_pending": [sorted([h, g] for h, g in p.items()) for p in self.lead_pending],
        }

    @classmethod
    def restore(cls, a: dict[str, Any]) -> Calibration:
        """What `dump` wrote; a state of per-observation errors (an hour's list) keeps each
        hour's largest, and leads it did not track start at no correction."""
        pending = a.get("pending")
        leads = [int(x) for x in a.get("leads", OLD_LEADS)]
        offsets = dict(zip(leads, a.get("lead_offsets", [])))
        made = dict(zip(leads, a.get("lead_pending", [])))
        return cls(
            [max(float(x) for x in e) if isinstance(e, list) else float(e) for e in a.get("errors", [])],
            [float(o) for o in a.get("offsets", _zeros())],
            None if pending is None else Pending(int(pending[0]), float(pending[1]), [int(g) for g in pending[2]]),
            [[float(o) for o in offsets.get(lead, _zeros())] for lead in LEADS],
            [{int(h): [int(x) for x in g] for h, g in made.get(lead, [])} for lead in LEADS],
        )


def hour_error(demand: float, point: float) -> float:
    """The log error of an hour's `demand` against the log point forecast `point`."""
    return math.log((demand + SLACK) / (math.exp(point) + SLACK))


def track(offsets: list[float], gpus: list[int], needed: int, rate: float) -> None:
    """Quantile tracking: each level's correction moves `rate` x (whether the hour needed more
    than the forecast's `gpus` at that level gave, less 1 - q), within +-OFFSET_LIMIT."""
    for i, q in enumerate(QUANTILES):
        short = 1.0 if needed > gpus[i] else 0.0
        offsets[i] = min(OFFSET_LIMIT, max(-OFFSET_LIMIT, offsets[i] + rate * (short - (1.0 - q))))


def conformal_quantile(errors: list[float], q: float) -> float:
    """The split-conformal q-quantile of `errors`: the ceil((n + 1) q)-th smallest (the largest
    when that passes n)."""
    ordered = sorted(errors)
    return ordered[min(len(ordered), math.ceil((len(ordered) + 1) * q)) - 1]
