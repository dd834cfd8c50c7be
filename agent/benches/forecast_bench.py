"""`gpualloc bench forecast`: the forecasters' backtests over seeds of the ground-truth
generators the shipped data came from (seed 0) and others no tuning saw, against the issue's
targets: duration median APE within 1.5x of the generator's noise floor, 80% intervals covering
75-85%, GPU counts right for 95% of jobs; on the held-out week each app under-provisioned at most
10% of steps with at most 25% over-provisioning, fewer under-provisioned steps than its registered
profile and less over-provisioning than peak reservation."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from gpualloc.forecasting.backtest import job_backtest, job_summary, traffic_backtest
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.generators.synthetic import job_trace, noise_floor_last, traffic_trace


@dataclass(frozen=True)
class SeedResult:
    seed: int
    mdape: float
    floor: float
    coverage: float
    gpus_right: float
    worst_under: float  # the worst app's share of under-provisioned steps
    worst_over: float
    beats_profile: bool  # every app: fewer under-provisioned steps than its registered profile
    beats_peak: bool  # every app: less over-provisioning than peak reservation

    @property
    def ratio(self) -> float:
        return self.mdape / self.floor

    @property
    def targets(self) -> dict[str, bool]:
        return {
            "mdape": self.ratio <= 1.5,
            "coverage": 0.75 <= self.coverage <= 0.85,
            "gpus": self.gpus_right >= 0.95,
            "under": self.worst_under <= 0.10,
            "over": self.worst_over <= 0.25,
            "vs profile": self.beats_profile,
            "vs peak": self.beats_peak,
        }


def bench_seed(seed: int, settings: ForecastSettings) -> SeedResult:
    events, truth = job_trace(seed)
    jobs = job_summary(job_backtest([parse_event(e) for e in events], settings))["all"]
    apps = [r for r in traffic_backtest([parse_event(e) for e in traffic_trace(seed)], settings).values() if r["steps"]]
    return SeedResult(
        seed,
        jobs["duration_mdape"],
        round(noise_floor_last(events, truth), 4),
        jobs["interval_coverage"],
        jobs["gpus_right"],
        max(a["forecast"]["under_share"] for a in apps),
        max(a["forecast"]["over_share"] for a in apps),
        all(a["forecast"]["under_share"] <= a["profile"]["under_share"] for a in apps if a["profile"]),
        all(a["forecast"]["over_share"] < a["peak"]["over_share"] for a in apps),
    )


@dataclass
class ForecastBench:
    results: list[SeedResult]

    def table(self) -> str:
        head = (
            f"{'seed':>4}  {'MdAPE':>6}  {'floor':>6}  {'ratio':>5}  {'cover':>6}  {'GPUs':>6}  "
            f"{'under':>6}  {'over':>6}  targets missed"
        )
        lines = [head, "-" * len(head)]
        for r in self.results:
            missed = ", ".join(name for name, ok in r.targets.items() if not ok) or "none"
            lines.append(
                f"{r.seed:>4}  {r.mdape:>6.1%}  {r.floor:>6.1%}  {r.ratio:>5.2f}  {r.coverage:>6.1%}  "
                f"{r.gpus_right:>6.1%}  {r.worst_under:>6.1%}  {r.worst_over:>6.1%}  {missed}"
            )
        med = lambda f: statistics.median(f(r) for r in self.results)  # noqa: E731
        lines.append(
            f"{'med':>4}  {med(lambda r: r.mdape):>6.1%}  {med(lambda r: r.floor):>6.1%}  "
            f"{med(lambda r: r.ratio):>5.2f}  {med(lambda r: r.coverage):>6.1%}  {med(lambda r: r.gpus_right):>6.1%}  "
            f"{med(lambda r: r.worst_under):>6.1%}  {med(lambda r: r.worst_over):>6.1%}"
        )
        met = {name: sum(r.targets[name] for r in self.results) for name in self.results[0].targets}
        lines.append("seeds meeting each target: " + ", ".join(f"{k} {v}/{len(self.results)}" for k, v in met.items()))
        lines.append(
            "jobs: the last 20% of 600 in three pools; traffic: the held-out week of five, the worst of "
            "three apps; seed 0 is the shipped data; seeds 0-3 were looked at while the forecasters were "
            "built, seeds 4 and up never"
        )
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"seeds": [{**asdict(r), "ratio": round(r.ratio, 4), "targets": r.targets} for r in self.results]}


def run_forecast_bench(seeds: int, settings: ForecastSettings) -> ForecastBench:
    return ForecastBench([bench_seed(seed, settings) for seed in range(seeds)])
