"""`python -m gpualloc.benchmarks.traffic_references TRACE`: what simple references must provision
on any traffic stream, its law unread, beside the forecaster.

Each reference forecasts a step's demand (its largest observation, the contract's) as a factor
times one figure of the app's observations, in whole GPUs, the factor the least that leaves at
most `1 - TARGET` of the scored steps under (chosen in hindsight, so each is a little sharper
than it could be online):
- `told_median`: the step's own median observation. No forecaster knows it; what it still has to
  provision is what the moves within a step cost, so the rest of a forecaster's excess is the
  step-to-step level it did not foresee;
- `last_median`, `last_max`: the median and the largest observation of the latest step observed
  before it (persistence, which a forecaster should beat).
Scored like `gpualloc forecast backtest`: the steps from week `WARMUP_WEEKS + 1` on; under, the
share of steps forecast below demand; over, GPUs above demand as a share of it. The forecaster's
one-step figures at q = `TARGET` come beside them, from the backtest itself."""

from __future__ import annotations

import argparse
import bisect
import json
import math
import statistics
from collections.abc import Callable
from typing import Any

from gpualloc.agent.loading import InputError
from gpualloc.agent.traces import read_trace
from gpualloc.forecasting.backtest import (
    WARMUP_WEEKS,
    AppSeries,
    Events,
    provisioning,
    traffic_backtest,
    traffic_series,
)
from gpualloc.forecasting.traffic import WEEK

TARGET = 0.9
SEARCH_STEPS = 50  # bisections of the factor
DECIMALS = 3  # of the factor reported
MAX_FACTOR = 2.0**20  # a factor no reference needs: past it, none covers


def least_over(base: list[float], actual: list[int], target: float = TARGET) -> dict[str, Any]:
    """The least factor f (to `DECIMALS` places, rounded up) with ceil(f x base) under `actual`
    on at most `1 - target` of the steps, and its figures (`provisioning`); the factor None when
    no factor up to `MAX_FACTOR` covers (more than that share of steps have a base of 0 and
    some demand)."""

    def planned(f: float) -> list[int]:
        return [math.ceil(f * b - 1e-9) for b in base]

    def covers(f: float) -> bool:
        under = sum(p < a for p, a in zip(planned(f), actual))
        return under <= (1 - target) * len(actual) + 1e-9  # counted, not the rounded share

    if not covers(MAX_FACTOR):
        return {"factor": None, **provisioning(planned(MAX_FACTOR), actual)}
    low, high = 0.0, 1.0
    while not covers(high):
        low, high = high, high * 2
    for _ in range(SEARCH_STEPS):
        middle = (low + high) / 2
        low, high = (low, middle) if covers(middle) else (middle, high)
    factor = math.ceil(high * 10**DECIMALS) / 10**DECIMALS  # no lower than one that covers
    return {"factor": factor, **provisioning(planned(factor), actual)}


def app_references(s: AppSeries, target: float = TARGET) -> dict[str, Any]:
    """The references' figures on one app's scored steps."""
    observed: dict[int, list[float]] = {}
    for step, load, _ in s.loads:
        observed.setdefault(step, []).append(load)
    seen = sorted(observed)
    scored = [t for t in sorted(s.demand) if t >= WARMUP_WEEKS * WEEK * 60 // s.step_minutes and t in observed]
    scored = [t for t in scored if bisect.bisect_left(seen, t) > 0]  # a step before it was observed
    median = {t: statistics.median(v) for t, v in observed.items()}
    largest = {t: max(v) for t, v in observed.items()}

    def latest(figure: dict[int, float]) -> Callable[[int], float]:
        return lambda t: figure[seen[bisect.bisect_left(seen, t) - 1]]

    bases: dict[str, Callable[[int], float]] = {
        "told_median": median.__getitem__,
        "last_median": latest(median),
        "last_max": latest(largest),
    }
    actual = [s.demand[t] for t in scored]
    return {
        "steps": len(scored),
        "observations_per_step": statistics.median(len(observed[t]) for t in scored) if scored else 0,
        **{name: least_over([base(t) for t in scored], actual, target) for name, base in bases.items()},
    }


def run(events: Events, target: float = TARGET) -> dict[str, dict[str, Any]]:
    """Per app: the references and the forecaster's one-step figures at `target`."""
    ours = traffic_backtest(events, quantiles=(target,))
    out = {}
    for key, s in traffic_series(events).items():
        figures = ours[key].get("quantiles", {}).get(f"{target:g}")
        out[key] = {
            **app_references(s, target),
            "forecaster": None if figures is None else {k: figures[k] for k in ("under_share", "over_share")},
        }
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="JSONL file of contract events with traffic.observed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        result = run(read_trace(args.trace))
    except InputError as e:
        raise SystemExit(f"traffic_references: {e}") from None
    if args.json:
        print(json.dumps(result, indent=1))
        return
    names = ("told_median", "last_median", "last_max", "forecaster")
    print(f"{'app':20} {'steps':>6} {'obs/step':>8}  " + "  ".join(f"{n + ' over':>18}" for n in names))
    for key, r in result.items():
        cells = [
            f"{r[n]['over_share']:>13.1%} ({r[n]['under_share']:.0%})" if r.get(n) else f"{'-':>18}" for n in names
        ]
        print(f"{key:20} {r['steps']:>6} {r['observations_per_step']:>8g}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
