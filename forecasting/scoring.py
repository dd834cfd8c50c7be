"""The forecasters scored against a ground-truth generator's truth (docs/ground-truth.md).

Jobs: the backtest's forecasts (`backtest.job_backtest`) beside each job's truth. The duration
noise floor is what the truth's own noise-free median scores on the same jobs (no forecaster does
better on average); the count ceiling is the share of jobs whose noise-free count (the truth's
`noise_free_gpus`, when the generator gives it) is the count they ran on. Figures are given for
the last `share` of the jobs by submission (the models have learned from what came before), by
group with the completions the group had taught its pool's forecasters by then, and for each
group's first `COLD` jobs in its pool (cold start).

Traffic: `backtest.traffic_backtest`'s one-step-ahead figures at each provisioning quantile.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from gpualloc.forecasting.backtest import Events, JobResult, job_backtest, provisioning, traffic_backtest
from gpualloc.forecasting.traffic import WEEK
from gpualloc.schemas.settings import ForecastSettings

COLD = 10  # a group's first jobs in a pool: its cold start
QUANTILES = (0.8, 0.9, 0.95)  # provisioning quantiles the traffic is scored at


def score(events: Events, truth: dict[str, Any], settings: ForecastSettings, share: float = 0.2) -> dict[str, Any]:
    """Job and traffic figures of `events` (parsed) against `truth` (the generator's)."""
    results = job_backtest(events, settings)
    return {
        "generator": truth.get("generator"),
        "seed": truth.get("seed"),
        "jobs": job_scores(results, truth.get("jobs", {}), share),
        "traffic": traffic_scores(events, truth.get("apps", {}), settings),
    }


def traffic_scores(events: Events, apps: dict[str, Any], settings: ForecastSettings) -> dict[str, Any]:
    """Per app, at each of `QUANTILES`: the scored steps' under-provisioned share and
    over-provisioning, and the same over the week after its launch when the truth has one and
    it falls in the scored steps."""
    out: dict[str, Any] = {}
    for key, r in traffic_backtest(events, settings, QUANTILES, by_step=True).items():
        steps = r.pop("by_step", {})
        launch = ((apps.get(key.split("/", 1)[1]) or {}).get("launch") or {}).get("step")
        if launch is not None and r["steps"] and launch >= r["scored_from"]:  # a launch scored from its first step
            week = sorted(t for t in steps if launch <= t < launch + WEEK * 60 // r["step_minutes"])
            r["after_launch"] = (
                {
                    f"{q:g}": provisioning([steps[t][0][i] for t in week], [steps[t][1] for t in week])
                    for i, q in enumerate(QUANTILES)
                }
                if week
                else None
            )
        out[key] = r
    return out


def job_scores(results: list[JobResult], truth: dict[str, dict[str, Any]], share: float = 0.2) -> dict[str, Any]:
    """Figures of the last `share` of `results` (all, by group) and of each group's cold start."""
    known = [r for r in results if r.id in truth]
    held = known[len(known) - math.ceil(share * len(known)) :] if known else []
    seen: dict[tuple[str, str], int] = {}
    cold: list[JobResult] = []
    for r in known:
        key = (r.pool, r.group)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= COLD:
            cold.append(r)
    groups: dict[tuple[str, str], list[JobResult]] = {}
    for r in held:
        groups.setdefault((r.kind, r.group), []).append(r)
    return {
        "jobs": len(known),
        "held_out": len(held),
        "all": figures(held, truth),
        "cold_start": figures(cold, truth),
        "groups": [
            {"kind": kind, "group": group, "completions": max(r.learned for r in rs), **figures(rs, truth)}
            for (kind, group), rs in sorted(groups.items())
        ],
    }


def figures(rs: list[JobResult], truth: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Duration error against its noise floor, interval coverage, counts against the truth's."""
    timed = [r for r in rs if r.actual and r.median is not None]
    sized = [r for r in rs if r.gpus is not None]
    mdape = _median(abs(r.median - r.actual) / r.actual for r in timed if r.median is not None and r.actual)
    floor = _median(abs(truth[r.id]["median_steps"] - r.actual) / r.actual for r in timed if r.actual)
    ceiling = _share(rs, lambda r: truth[r.id].get("noise_free_gpus", truth[r.id]["gpus"]) == truth[r.id]["gpus"])
    return {
        "jobs": len(rs),
        "duration_mdape": _round(mdape),
        "noise_floor": _round(floor),
        "ratio": _round(mdape / floor if mdape is not None and floor else None),
        "interval_coverage": _round(_share(timed, lambda r: r.low <= r.actual <= r.high)),  # type: ignore[operator]
        "gpus_right": _round(_share(rs, lambda r: r.gpus == truth[r.id]["gpus"])),
        "gpus_ceiling": _round(ceiling),
        "under_sized": _round(_share(rs, lambda r: r.gpus is not None and r.gpus < truth[r.id]["gpus"])),
        "over_sized": _round(_share(sized, lambda r: r.gpus is not None and r.gpus > truth[r.id]["gpus"])),
        "refused": sum(r.gpus is None for r in rs),
    }


def _median(xs: Iterable[float]) -> float | None:
    values = list(xs)
    return statistics.median(values) if values else None


def _share(rs: list[JobResult], ok: Callable[[JobResult], bool]) -> float | None:
    return sum(1 for r in rs if ok(r)) / len(rs) if rs else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
