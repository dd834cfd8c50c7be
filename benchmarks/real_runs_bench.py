"""`gpualloc bench forecast --real`: the job forecasters against fine-tuning runs measured on an
H200 (benchmarks/real/README.md): the memory a run needed, whether it ran out of memory, its hours.

Each run is a job of `real_run`'s features on a pool of `POOL_GPUS` GPUs with one-minute steps.
A memory forecast is the peak a GPU at one GPU (the count every run was measured on) beside what
the run needed; a time forecast the median steps beside its hours; a count the one the forecasters
choose (1 is right for a run that ran; one that ran out of memory must be refused or given more).
Error is max(forecast / truth, truth / forecast) - 1. Four views:

- cold: no completions learned (each run by a fresh instance), with and without the model's shape
  fields (`shape=False`: a submitter who gives only the seed's features);
- warm: every run of one file learned in file order, another file's runs forecast (the kept-aside
  runs, of models and settings the physics was never fitted to, after the shared ones, as a pool
  that learned those would meet them);
- leave one model out: per model name, every other run learned, that model's runs forecast;
- per GPU type of the contract's list: each run sized cold on that type; a run runs out of memory
  there when it needs more than the type's usable memory (one that ran out on the H200 does
  everywhere). Counted: runs started on one GPU where they run out, runs refused or given more
  than one where they fit.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpualloc.benchmarks import DATA_DIR
from gpualloc.forecasting.forecasters import Forecasters, hardware
from gpualloc.forecasting.hardware import USABLE_GIB
from gpualloc.forecasting.job_forecast import SizeError
from gpualloc.forecasting.real_runs import RealRun, real_run
from gpualloc.schemas.features import GPU_TYPES
from gpualloc.schemas.settings import ForecastSettings

REAL_DIR = DATA_DIR / "real"
# shared and own: the runs the physics' constants are fitted to; aside: runs of models and settings
# it was never fitted to (deploy/measure/fit_physics.py leaves them out)
FILES = {"shared": "h200-runs.jsonl", "own": "gpualloc-h200-runs.jsonl", "aside": "gpualloc-h200-aside.jsonl"}
GPU_TYPE = "h200-141gb"  # the runs' own
POOL_GPUS = 8
STEP_MINUTES = 1
UNDER, OVER = 0.10, 0.25  # forecast more than 10% below the need; more than 25% above it
# targets of the cold forecasts with the shape fields (the real runs' section reports them met or not)
MEMORY_ERROR, TIME_ERROR = 0.12, 0.30


def load_records(source: str) -> list[dict[str, Any]]:
    """The lines of one file of `benchmarks/real` (`source`: shared or own), in file order."""
    text = (REAL_DIR / FILES[source]).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class Scored:
    """One real run's forecasts."""

    source: str
    run: RealRun
    memory_gib: float  # a GPU at one GPU
    hours: float  # median
    gpus: int | None  # the count chosen; None: refused

    @property
    def memory_ratio(self) -> float | None:
        return None if self.run.needed_gib is None else self.memory_gib / self.run.needed_gib

    @property
    def time_ratio(self) -> float | None:
        return None if self.run.hours is None else self.hours / self.run.hours


def _error(ratio: float) -> float:
    return max(ratio, 1.0 / ratio) - 1.0


def _hw(run: RealRun) -> Any:
    return hardware(run.features, None, None, POOL_GPUS, STEP_MINUTES)


def _chosen(fc: Forecasters, run: RealRun) -> int | None:
    try:
        return fc.size("training", run.features, _hw(run), None, None).gpus
    except SizeError:
        return None


def forecast(fc: Forecasters, source: str, run: RealRun) -> Scored:
    at_one = fc.size("training", run.features, _hw(run), 1, None)
    return Scored(source, run, at_one.peak_memory_gb, at_one.median * STEP_MINUTES / 60.0, _chosen(fc, run))


def learn(fc: Forecasters, run: RealRun) -> None:
    """Tell `fc` how `run` went on its one GPU."""
    hw = _hw(run)
    if run.oom or run.hours is None:
        fc.out_of_memory("training", run.features, hw, 1)
    else:
        steps = max(1, round(run.hours * 60 / STEP_MINUTES))
        fc.finished("training", run.features, hw, 1, steps, run.needed_gib)


def figures(scored: list[Scored]) -> dict[str, Any]:
    """The figures of a set of forecasts (memory and time over the runs that ran)."""
    ran = [s for s in scored if not s.run.oom]
    oom = [s for s in scored if s.run.oom]
    memory = [r for s in ran if (r := s.memory_ratio) is not None]
    time = [r for s in ran if (r := s.time_ratio) is not None]

    def share(values: Iterable[bool], of: int) -> float | None:
        return sum(values) / of if of else None

    return {
        "runs": len(scored),
        "ran": len(ran),
        "oom": len(oom),
        "memory_median_error": statistics.median(_error(r) for r in memory) if memory else None,
        "memory_below_need": share((r < 1.0 for r in memory), len(memory)),
        "memory_under_10": share((r < 1.0 - UNDER for r in memory), len(memory)),
        "memory_over_25": share((r > 1.0 + OVER for r in memory), len(memory)),
        "memory_ratio_min": min(memory, default=None),
        "memory_ratio_max": max(memory, default=None),
        "oom_given_one": sum(s.gpus == 1 for s in oom),
        "count_right": share((s.gpus == 1 for s in ran), len(ran)),
        "refused": sum(s.gpus is None for s in scored),
        "time_median_error": statistics.median(_error(r) for r in time) if time else None,
        "time_ratio_min": min(time, default=None),
        "time_ratio_max": max(time, default=None),
    }


Runs = list[tuple[str, RealRun]]


def _runs(records: dict[str, list[dict[str, Any]]], **kwargs: Any) -> Runs:
    return [(source, real_run(r, **kwargs)) for source, lines in records.items() for r in lines]


def cold(runs: Runs, settings: ForecastSettings) -> list[Scored]:
    return [forecast(Forecasters(settings), source, run) for source, run in runs]


def warm(learned: Runs, forecast_: Runs, settings: ForecastSettings) -> list[Scored]:
    """`forecast_`'s runs by one instance that learned `learned`'s, in order, first."""
    fc = Forecasters(settings)
    for _, run in learned:
        learn(fc, run)
    return [forecast(fc, source, run) for source, run in forecast_]


def leave_one_model_out(runs: Runs, settings: ForecastSettings) -> list[Scored]:
    out: list[Scored] = []
    for model in dict.fromkeys(run.model for _, run in runs):
        out += warm([x for x in runs if x[1].model != model], [x for x in runs if x[1].model == model], settings)
    return out


def per_gpu_type(records: dict[str, list[dict[str, Any]]], settings: ForecastSettings) -> dict[str, dict[str, Any]]:
    """Per GPU type: each run sized cold on it; starts where it runs out, refusals where it fits."""
    out: dict[str, dict[str, Any]] = {}
    for gpu_type in GPU_TYPES:
        usable = USABLE_GIB[gpu_type]
        started_out = started_oom = refused_fit = more_fit = fits = 0
        for _, run in _runs(records, gpu_type=gpu_type):
            gpus = _chosen(Forecasters(settings), run)
            runs_out = run.needed_gib is None or run.needed_gib > usable
            if runs_out:
                started_out += gpus == 1
                started_oom += gpus == 1 and run.oom
            else:
                fits += 1
                refused_fit += gpus is None
                more_fit += gpus is not None and gpus > 1
        total = sum(len(lines) for lines in records.values())
        out[gpu_type] = {
            "usable_gib": usable,
            "runs": total,
            "runs_out": total - fits,
            "started_where_out": started_out,
            "of_them_oom_on_h200": started_oom,  # their need above 139.8 GiB is not known: taken as above any
            "fits": fits,
            "refused_where_fits": refused_fit,
            "more_than_one_where_fits": more_fit,
        }
    return out


@dataclass
class RealRunsBench:
    views: dict[str, dict[str, Any]]  # name -> {"label", "figures"}
    gpu_types: dict[str, dict[str, Any]]
    per_model: dict[str, dict[str, Any]]  # leave one model out, per model

    @property
    def targets(self) -> dict[str, bool]:
        c = self.views["cold"]["figures"]
        return {
            "memory": c["memory_median_error"] is not None and c["memory_median_error"] <= MEMORY_ERROR,
            "oom given one": c["oom_given_one"] == 0,
            "time": c["time_median_error"] is not None and c["time_median_error"] <= TIME_ERROR,
            f"started where out ({GPU_TYPE})": self.gpu_types[GPU_TYPE]["started_where_out"] == 0,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool_gpus": POOL_GPUS,
            "step_minutes": STEP_MINUTES,
            "files": {source: f"benchmarks/real/{name}" for source, name in FILES.items()},
            "targets": self.targets,
            "views": self.views,
            "leave_one_model_out_per_model": self.per_model,
            "gpu_types": self.gpu_types,
        }


def run_real_runs_bench(settings: ForecastSettings | None = None) -> RealRunsBench:
    settings = settings or ForecastSettings()
    records = {source: load_records(source) for source in FILES}
    runs = _runs(records)
    shared = [x for x in runs if x[0] == "shared"]
    own = [x for x in runs if x[0] == "own"]
    aside = [x for x in runs if x[0] == "aside"]
    scored_cold = cold(runs, settings)
    lomo = leave_one_model_out(runs, settings)
    views: dict[str, tuple[str, list[Scored]]] = {
        "cold": ("cold, every run", scored_cold),
        "cold_shared": ("cold, shared", [s for s in scored_cold if s.source == "shared"]),
        "cold_own": ("cold, own", [s for s in scored_cold if s.source == "own"]),
        "cold_aside": ("cold, kept aside", [s for s in scored_cold if s.source == "aside"]),
        "cold_no_shape": ("cold, no shape fields", cold(_runs(records, shape=False), settings)),
        "warm_shared_to_own": ("warm, shared -> own", warm(shared, own, settings)),
        "warm_own_to_shared": ("warm, own -> shared", warm(own, shared, settings)),
        "warm_shared_to_aside": ("warm, shared -> aside", warm(shared, aside, settings)),
        "warm_fitted_to_aside": ("warm, fitted -> aside", warm(shared + own, aside, settings)),
        "leave_one_model_out": ("leave one model out", lomo),
    }
    by_model: dict[str, list[Scored]] = {}
    for s in lomo:
        by_model.setdefault(s.run.model, []).append(s)
    return RealRunsBench(
        {name: {"label": label, "figures": figures(scored)} for name, (label, scored) in views.items()},
        per_gpu_type(records, settings),
        {model: figures(scored) for model, scored in by_model.items()},
    )
