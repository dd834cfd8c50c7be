"""`gpualloc bench forecast`: the forecasters scored against the truth of every ground-truth
generator (docs/ground-truth.md), seed by seed, per group and at cold start, against targets:

- jobs: duration median APE at most 1.4x the generator's noise floor; 80% intervals covering
  75-85%; GPU counts right within 0.03 of the truth's own noise-free count, under-sized at most
  3%; no job refused (every job of a generator's truth runs on some count of its pool);
- traffic, per app: the share of under-provisioned steps within 2 points of 1 - q at q = 0.8,
  0.9 and 0.95; at 0.9 at most 10% under with at most 25% over, in the week after a launch too.

`synthetic` is the project's own generator, `truth_catalogue` the one the forecasters were tuned
on, `truth_heldout` the one no tuning looked at. Then the cold forecasts beside published
measured points (`measured_points`): real runs, not a generator's model of them. With `real`,
last, the forecasters against fine-tuning runs measured on an H200 (`real_runs_bench`,
benchmarks/real); with `real_only`, those runs and then the published points.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpualloc.agent.renderers import real_runs
from gpualloc.benchmarks import measured_points, real_runs_bench
from gpualloc.forecasting.scoring import QUANTILES, score
from gpualloc.generators import synthetic, truth_catalogue, truth_heldout
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.settings import ForecastSettings

Generator = Callable[[int], tuple[list[dict[str, Any]], dict[str, Any]]]
GENERATORS: dict[str, Generator] = {
    "synthetic": synthetic.ground_truth,
    "truth_catalogue": truth_catalogue.trace,
    "truth_heldout": truth_heldout.trace,
}
ROLES = {"synthetic": "own", "truth_catalogue": "tuned on", "truth_heldout": "held out"}

RATIO = 1.4  # duration median APE over the noise floor
COVERAGE = (0.75, 0.85)
COUNT_GAP = 0.03  # GPU counts right, below the truth's own noise-free count at most
UNDER_SIZED = 0.03
CALIBRATION = 0.02  # under-provisioned share's distance from 1 - q at most
UNDER, OVER = 0.10, 0.25  # at q = 0.9


def job_targets(f: dict[str, Any]) -> dict[str, bool]:
    return {
        "duration": f["ratio"] is not None and f["ratio"] <= RATIO,
        "coverage": f["interval_coverage"] is not None and COVERAGE[0] <= f["interval_coverage"] <= COVERAGE[1],
        "counts": f["gpus_right"] is not None and f["gpus_right"] >= f["gpus_ceiling"] - COUNT_GAP,
        "under-sized": f["under_sized"] is not None and f["under_sized"] <= UNDER_SIZED,
        "refused": f["refused"] == 0,
    }


def traffic_targets(apps: dict[str, Any]) -> dict[str, bool]:
    scored = [a for a in apps.values() if a["steps"]]
    launched = [a["after_launch"]["0.9"] for a in scored if a.get("after_launch")]
    return {
        "calibrated": all(
            abs(a["quantiles"][f"{q:g}"]["under_share"] - (1 - q)) <= CALIBRATION for a in scored for q in QUANTILES
        ),
        "q0.9": all(
            a["quantiles"]["0.9"]["under_share"] <= UNDER and a["quantiles"]["0.9"]["over_share"] <= OVER
            for a in scored
        ),
        "after launch": all(w["under_share"] <= UNDER and w["over_share"] <= OVER for w in launched),
    }


@dataclass
class Run:
    generator: str
    seed: int
    result: dict[str, Any]

    @property
    def targets(self) -> dict[str, bool]:
        return {**job_targets(self.result["jobs"]["all"]), **traffic_targets(self.result["traffic"])}


@dataclass
class ForecastBench:
    runs: list[Run] = field(default_factory=list)
    points: list[measured_points.Checked] = field(default_factory=list)
    real: real_runs_bench.RealRunsBench | None = None  # the real runs' section, when asked for
    generators: bool = True  # the generators' sections (not with real only)

    def table(self) -> str:
        lines: list[str] = []
        for name in dict.fromkeys(r.generator for r in self.runs):
            runs = [r for r in self.runs if r.generator == name]
            lines += [f"{name} ({ROLES.get(name, 'other')})", *_seed_rows(runs), *_group_rows(runs), ""]
        if self.real is not None and not self.generators:
            lines += [real_runs.table(self.real.as_dict()), ""]
        if self.points:
            lines.append(measured_points.table(self.points))
        if self.real is not None and self.generators:
            lines += ["", real_runs.table(self.real.as_dict())]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.generators:
            out = {
                "runs": [
                    {"generator": r.generator, "seed": r.seed, "targets": r.targets, **r.result} for r in self.runs
                ],
            }
        if self.points:
            out["measured_points"] = measured_points.as_dicts(self.points)
            out["measured_points_summary"] = measured_points.summary(self.points)
        if self.real is not None:
            out["real_runs"] = self.real.as_dict()
        return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _seed_rows(runs: list[Run]) -> list[str]:
    head = (
        f"{'seed':>4} {'jobs':>5} {'MdAPE':>6} {'floor':>6} {'ratio':>5} {'cover':>6} {'right':>6} {'ceil':>6} "
        f"{'under':>6} {'over':>6} {'cold ratio':>10} {'traffic under at 0.8/0.9/0.95 (worst app)':>42}  missed"
    )
    out = [head, "-" * len(head)]
    for r in runs:
        a, cold = r.result["jobs"]["all"], r.result["jobs"]["cold_start"]
        apps = [x for x in r.result["traffic"].values() if x["steps"]]
        worst = " / ".join(
            _pct(max((x["quantiles"][f"{q:g}"]["under_share"] for x in apps), key=lambda u: abs(u - (1 - q))))
            if apps
            else "-"
            for q in QUANTILES
        )
        missed = ", ".join(k for k, ok in r.targets.items() if not ok) or "none"
        ratio = "-" if a["ratio"] is None else f"{a['ratio']:.2f}"
        cold_ratio = "-" if cold["ratio"] is None else f"{cold['ratio']:.2f}"
        out.append(
            f"{r.seed:>4} {a['jobs']:>5} {_pct(a['duration_mdape']):>6} {_pct(a['noise_floor']):>6} {ratio:>5} "
            f"{_pct(a['interval_coverage']):>6} {_pct(a['gpus_right']):>6} {_pct(a['gpus_ceiling']):>6} "
            f"{_pct(a['under_sized']):>6} {_pct(a['over_sized']):>6} {cold_ratio:>10} {worst:>42}  {missed}"
        )
    met = {k: sum(r.targets[k] for r in runs) for k in runs[0].targets}
    out.append("seeds meeting each target: " + ", ".join(f"{k} {v}/{len(runs)}" for k, v in met.items()))
    return out


def _group_rows(runs: list[Run]) -> list[str]:
    """Per group over the seeds: the median of each figure, with the completions learned."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        for g in r.result["jobs"]["groups"]:
            by.setdefault((g["kind"], g["group"]), []).append(g)
    head = f"  {'group':<26} {'learned':>7} {'jobs':>5} {'ratio':>5} {'cover':>6} {'right':>6} {'under':>6} {'over':>6}"
    out = ["  per group (medians over the seeds; learned: completions before the scored jobs)", head]
    for (kind, group), gs in sorted(by.items()):
        out.append(
            f"  {kind + '/' + group:<26} {_median(gs, 'completions', '.0f'):>7} {sum(g['jobs'] for g in gs):>5} "
            f"{_median(gs, 'ratio', '.2f'):>5} {_median(gs, 'interval_coverage', '.0%'):>6} "
            f"{_median(gs, 'gpus_right', '.0%'):>6} {_median(gs, 'under_sized', '.0%'):>6} "
            f"{_median(gs, 'over_sized', '.0%'):>6}"
        )
    return out


def _median(rows: list[dict[str, Any]], key: str, spec: str) -> str:
    values = [row[key] for row in rows if row[key] is not None]
    return format(statistics.median(values), spec) if values else "-"


def run_forecast_bench(
    seeds: int,
    settings: ForecastSettings,
    generators: list[str] | None = None,
    real: bool = False,
    real_only: bool = False,
) -> ForecastBench:
    """The generators' backtests and the published points; with `real`, the real runs' section
    after them; with `real_only`, the real runs and the published points alone."""
    if real_only:
        real_runs = real_runs_bench.run_real_runs_bench(settings)
        return ForecastBench(points=measured_points.check_all(settings), real=real_runs, generators=False)
    bench = ForecastBench(points=measured_points.check_all(settings))
    for name in generators or list(GENERATORS):
        for seed in range(seeds):
            events, truth = GENERATORS[name](seed)
            bench.runs.append(Run(name, seed, score([parse_event(e) for e in events], truth, settings)))
    if real:
        bench.real = real_runs_bench.run_real_runs_bench(settings)
    return bench
