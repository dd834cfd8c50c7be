"""Benchmark FIFO against the heuristic on a folder of scenarios (default: the bundled seven).

Per scenario: utilization and value FIFO -> heuristic, the value gain, the heuristic objective
as a share of the best-known objective, and p50 solve latency of each scheduler over `repeat`
timed runs. Every plan is checked by the validator under its policy's exemptions (FIFO's); a plan that is
illegal, a scheduler that crashes, or repeated runs that disagree make the report fail.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpualloc import benchmarks
from gpualloc.agent.loading import InputError, load_scenario
from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Plan, Scenario
from gpualloc.solvers import POLICIES, Problem, build_plan, compile_scenario
from gpualloc.solvers.policies.solution import Solution
from gpualloc.solvers.release import heuristic_implementation, release, release_words

BENCH_SCHEDULERS = ("fifo", "heuristic")


@dataclass
class Run:
    """One scheduler on one scenario: its plan, timings and legality."""

    scheduler: str
    plan: Plan | None = None
    times_ms: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    deterministic: bool = True
    error: str | None = None

    @property
    def p50_ms(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.violations and self.deterministic

    def problems(self) -> list[str]:
        out = []
        if self.error:
            out.append(f"{self.scheduler} crashed: {self.error}")
        out += [f"{self.scheduler} plan is illegal: {v}" for v in self.violations]
        if not self.deterministic:
            out.append(f"{self.scheduler} gave different grids on repeated runs")
        return out


@dataclass
class Row:
    scenario: str
    source: str
    gpus: int
    tasks: int
    runs: dict[str, Run]
    best_objective: float | None

    def metric(self, scheduler: str, name: str) -> float | None:
        run = self.runs[scheduler]
        return getattr(run.plan.metrics, name) if run.plan and run.plan.metrics else None

    @property
    def value_gain_pct(self) -> float | None:
        f, h = self.metric("fifo", "value"), self.metric("heuristic", "value")
        if f is None or h is None or f <= 0:
            return None
        return 100.0 * (h - f) / f

    @property
    def best_share(self) -> float | None:
        h = self.metric("heuristic", "objective")
        if h is None or not self.best_objective or self.best_objective <= 0:
            return None
        return h / self.best_objective

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs.values())

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scenario": self.scenario, "source": self.source, "gpus": self.gpus, "tasks": self.tasks}
        for name in ("utilization", "value", "objective", "realtime_shortfall"):
            out[name] = {s: self.metric(s, name) for s in self.runs}
        out["value_gain_pct"] = _round(self.value_gain_pct, 3)
        out["best_known_objective"] = self.best_objective
        out["best_known_share"] = _round(self.best_share, 4)
        out["p50_ms"] = {s: _round(r.p50_ms, 4) for s, r in self.runs.items()}
        out["legal"] = {s: not r.violations and r.error is None for s, r in self.runs.items()}
        out["deterministic"] = {s: r.deterministic for s, r in self.runs.items()}
        out["problems"] = [p for r in self.runs.values() for p in r.problems()]
        return out


@dataclass
class Report:
    rows: list[Row]
    repeat: int
    full_mode: list = field(default_factory=list)  # gpualloc.benchmarks.full_mode.FullModeRow, with --full-mode

    @property
    def mean_value_gain_pct(self) -> float | None:
        gains = [r.value_gain_pct for r in self.rows if r.value_gain_pct is not None]
        return statistics.fmean(gains) if gains else None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows) and all(r.legal for r in self.full_mode)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def as_dict(self) -> dict[str, Any]:
        out = {
            "repeat": self.repeat,
            "scenarios": [r.as_dict() for r in self.rows],
            "mean_value_gain_pct": _round(self.mean_value_gain_pct, 3),
            "ok": self.ok,
            "release": release(),  # which heuristic the timings are of
        }
        if self.full_mode:
            out["full_mode"] = [r.as_dict() for r in self.full_mode]
        return out

    def table(self) -> str:
        if not self.full_mode:
            return format_table(self)
        from gpualloc.benchmarks.full_mode import format_full_mode

        return format_table(self) + "\n\n" + format_full_mode(self.full_mode)


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def time_scheduler(problem: Problem, scheduler: str, repeat: int) -> Run:
    """Run `scheduler` `repeat` times, timing each call; keep the first plan, check it."""
    run = Run(scheduler)
    grids = []
    try:
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            schedule = POLICIES[scheduler].schedule(problem)
            ms = (time.perf_counter() - t0) * 1000.0
            run.times_ms.append(ms)
            grids.append(build_plan(problem, POLICIES[scheduler], Solution(schedule), ms))
    except Exception as e:  # a crash is a result to report, not a reason to stop the bench
        run.error = f"{type(e).__name__}: {e}"
    if grids:
        run.plan = grids[0]
        run.plan.solve_ms = round(statistics.median(run.times_ms), 4)
        run.deterministic = all(p.grid == run.plan.grid for p in grids[1:])
        run.violations = [str(v) for v in POLICIES[scheduler].check(problem, run.plan.grid)]
    return run


def bench_scenario(scenario: Scenario, repeat: int = 5, best: dict[str, dict] | None = None, source: str = "") -> Row:
    problem = compile_scenario(scenario)
    runs = {s: time_scheduler(problem, s, repeat) for s in BENCH_SCHEDULERS}
    entry = (best or {}).get(scenario.name)
    best_obj = float(entry["objective"]) if entry and "objective" in entry else None
    return Row(scenario.name, source, scenario.gpus, len(scenario.jobs), runs, best_obj)


def scenario_files(folder: str | Path | None = None) -> list[Path]:
    """The *.json files of `folder` (default: the bundled seven), sorted; InputError if none."""
    if folder is None:
        return benchmarks.scenario_paths()
    path = Path(folder)
    if not path.is_dir():
        raise InputError(str(path), ["not a folder of scenario files"])
    files = sorted(path.glob("*.json"))
    if not files:
        raise InputError(str(path), ["holds no *.json scenario files"])
    return files


def run_bench(
    folder: str | Path | None = None, repeat: int = 5, generated: Sequence[tuple[int, int, int]] = ()
) -> tuple[Report, list[Scenario]]:
    """Bench every scenario of `folder` (all files validated before any is solved), then one
    generated scenario per (gpus, jobs, seed) of `generated`."""
    files = scenario_files(folder)
    scenarios = [load_scenario(p) for p in files]
    sources = [str(p) for p in files]
    for gpus, jobs, seed in generated:
        scenarios.append(Scenario.model_validate(generate_scenario(gpus, jobs, seed)))
        sources.append(f"generate --gpus {gpus} --jobs {jobs} --seed {seed}")
    best = benchmarks.best_known()
    rows = [bench_scenario(sc, repeat, best, src) for sc, src in zip(scenarios, sources)]
    return Report(rows, repeat), scenarios


def _fmt(x: float | None, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} ms"


def _python_warning() -> str:
    """Where the heuristic runs as the Python reference, what that costs."""
    if heuristic_implementation() == "compiled":
        return ""
    return ": the Python reference, 16-60x slower than the compiled heuristic (no cargo here; `make native` builds it)"


def format_table(report: Report) -> str:
    head = (
        f"{'scenario':<22} {'GPUs':>5} {'tasks':>5}  {'utilization FIFO -> heur':>24}  "
        f"{'value FIFO -> heur':>20}  {'gain':>8}  {'of best':>7}  {'p50 heur':>9}  {'p50 FIFO':>9}  legal"
    )
    lines = [head, "-" * len(head)]
    for r in report.rows:
        uf, uh = r.metric("fifo", "utilization"), r.metric("heuristic", "utilization")
        vf, vh = r.metric("fifo", "value"), r.metric("heuristic", "value")
        util = f"{_fmt(uf, '.1%')} -> {_fmt(uh, '.1%')}"
        value = f"{_fmt(vf, '.1f')} -> {_fmt(vh, '.1f')}"
        p50h, p50f = r.runs["heuristic"].p50_ms, r.runs["fifo"].p50_ms
        lines.append(
            f"{r.scenario:<22} {r.gpus:>5} {r.tasks:>5}  {util:>24}  {value:>20}  "
            f"{_fmt(r.value_gain_pct, '+.1f') + ('%' if r.value_gain_pct is not None else ''):>8}  "
            f"{_fmt(r.best_share, '.1%'):>7}  {_ms(p50h):>9}  {_ms(p50f):>9}  {'yes' if r.ok else 'NO'}"
        )
    mean = report.mean_value_gain_pct
    lines.append("-" * len(head))
    lines.append(
        f"mean value gain: {_fmt(mean, '+.1f')}% over {len(report.rows)} scenarios "
        f"(p50 of {report.repeat} timed run{'s' if report.repeat != 1 else ''} each)"
    )
    lines.append(release_words() + _python_warning())
    for r in report.rows:
        for p in r.runs["heuristic"].problems() + r.runs["fifo"].problems():
            lines.append(f"FAIL {r.scenario}: {p}")
    return "\n".join(lines)
