"""`gpualloc bench corpus`: the heuristic against proven optima on the benchmark corpus.

Per scenario of the chosen split: the heuristic and the greedy, each timed over `repeat` runs
and checked by the validator, and the ratio heuristic / reference, where the reference is the
corpus record (a proven optimum up to 16 GPUs, the best known plan above, with its proven bound).
Ratios are taken on scenarios with a positive reference; the others are counted apart. The
stored plan of every record is checked too: it must be legal and have the recorded objective.

The report fails (exit 1) on an illegal or non-deterministic plan, a crash, or a corrupt record;
ratios are figures to read, not pass marks, so a worse heuristic shows in the figures it prints.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gpualloc.agent.loading import InputError, load_plan, load_scenario
from gpualloc.benchmarks.scenario_bench import Run, time_scheduler
from gpualloc.generators.corpus_build import CORPUS_DIR, read_optima
from gpualloc.solvers import compile_scenario
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.policies.milp.model import EXACT_GPUS

SPLITS = ("tune", "heldout", "all")


@dataclass
class Case:
    name: str
    gpus: int
    jobs: int
    proven: bool
    reference: float
    bound: float | None
    heuristic: Run
    greedy: Run
    problems: list[str] = field(default_factory=list)

    def objective(self, run: Run) -> float | None:
        return run.plan.metrics.objective if run.plan and run.plan.metrics else None

    @property
    def ratio(self) -> float | None:
        h = self.objective(self.heuristic)
        return None if h is None or self.reference <= 0 else h / self.reference

    @property
    def greedy_ratio(self) -> float | None:
        g = self.objective(self.greedy)
        return None if g is None or self.reference <= 0 else g / self.reference

    @property
    def below_greedy(self) -> bool:
        h, g = self.objective(self.heuristic), self.objective(self.greedy)
        return h is not None and g is not None and h < g - 1e-6 * max(1.0, abs(g))

    @property
    def small(self) -> bool:
        return self.gpus <= EXACT_GPUS


def _percentile(s: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values: a value some scenario really has."""
    return s[max(0, min(len(s) - 1, math.ceil(q * len(s)) - 1))]


def _distribution(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "min": None, "p1": None, "p10": None, "median": None, "mean": None}
    s = sorted(values)
    return {
        "n": len(s),
        "min": s[0],
        "p1": _percentile(s, 0.01),
        "p10": _percentile(s, 0.10),
        "median": statistics.median(s),
        "mean": statistics.fmean(s),
    }


@dataclass
class CorpusReport:
    split: str
    repeat: int
    cases: list[Case]
    missing: list[str]  # corpus scenarios of the split without a record yet

    def group(self, small: bool) -> list[Case]:
        return [c for c in self.cases if c.small == small]

    @property
    def ok(self) -> bool:
        return all(not c.problems and c.heuristic.ok and c.greedy.ok for c in self.cases)

    def latency(self) -> dict[int, dict[str, float]]:
        """Per pool size: percentiles over its scenarios of each one's median solve time."""
        by: dict[int, list[float]] = {}
        for c in self.cases:
            if c.heuristic.p50_ms is not None:
                by.setdefault(c.gpus, []).append(c.heuristic.p50_ms)
        return {
            g: {"n": len(v), "p50": statistics.median(v), "p90": _percentile(sorted(v), 0.9), "max": max(v)}
            for g, v in sorted(by.items())
        }

    def summary(self, small: bool) -> dict[str, Any]:
        cases = self.group(small)
        rated = [c for c in cases if c.ratio is not None]
        return {
            "scenarios": len(cases),
            "proven": sum(c.proven for c in cases),
            "dropped_nonpositive_reference": len(cases) - len(rated),
            "heuristic": _distribution([c.ratio for c in rated if c.ratio is not None]),
            "greedy": _distribution([c.greedy_ratio for c in rated if c.greedy_ratio is not None]),
            "below_greedy": sorted(c.name for c in cases if c.below_greedy),
            "above_reference": sorted(c.name for c in rated if c.ratio is not None and c.ratio > 1 + 1e-9),
        }

    def worst(self, k: int = 10) -> list[Case]:
        return sorted((c for c in self.cases if c.ratio is not None), key=lambda c: (c.ratio, c.name))[:k]

    def as_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "repeat": self.repeat,
            "ok": self.ok,
            "missing": self.missing,
            "proven_optima": self.summary(True),
            "best_known": self.summary(False),
            "latency_ms_by_gpus": {str(g): d for g, d in self.latency().items()},
            "worst": [{"name": c.name, "ratio": c.ratio, "greedy_ratio": c.greedy_ratio} for c in self.worst()],
            "failures": [
                f"{c.name}: {p}" for c in self.cases for p in c.problems + c.heuristic.problems() + c.greedy.problems()
            ],
        }

    def table(self) -> str:
        lines = [
            f"corpus split {self.split}: {len(self.cases)} scenarios"
            + (f" ({len(self.missing)} without a record yet)" if self.missing else "")
        ]
        for small, title in (
            (True, f"up to {EXACT_GPUS} GPUs, against proven optima"),
            (False, f"above {EXACT_GPUS} GPUs, against the best known plan"),
        ):
            s = self.summary(small)
            lines.append(
                f"\n{title}: {s['scenarios']} scenarios, {s['proven']} proven, "
                f"{s['dropped_nonpositive_reference']} dropped (reference <= 0)"
            )
            lines.append(f"  {'':<10} {'min':>7} {'p1':>7} {'p10':>7} {'median':>7} {'mean':>7}")
            for who in ("heuristic", "greedy"):
                d = s[who]
                cells = " ".join(
                    f"{d[k]:>7.4f}" if d[k] is not None else f"{'-':>7}" for k in ("min", "p1", "p10", "median", "mean")
                )
                lines.append(f"  {who:<10} {cells}")
            lines.append(
                f"  heuristic below the greedy: {len(s['below_greedy'])}"
                + (f" ({', '.join(s['below_greedy'][:10])})" if s["below_greedy"] else "")
            )
            if s["above_reference"]:
                lines.append(f"  heuristic above the reference: {len(s['above_reference'])}")
        lines.append("\nheuristic latency by pool size (p50 of each scenario's timed runs):")
        for g, d in self.latency().items():
            lines.append(
                f"  {g:>4} GPUs: n {d['n']:>3}  p50 {d['p50']:8.2f} ms  p90 {d['p90']:8.2f} ms  max {d['max']:8.2f} ms"
            )
        lines.append("\nworst ten (heuristic / reference, greedy / reference):")
        for c in self.worst():
            lines.append(
                f"  {c.name:<20} {c.ratio:.4f}  {c.greedy_ratio if c.greedy_ratio is not None else float('nan'):.4f}"
            )
        for f in self.as_dict()["failures"]:
            lines.append(f"FAIL {f}")
        return "\n".join(lines)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def _stored_plan_problems(folder: Path, record: dict[str, Any], scenario, problem) -> list[str]:
    """The record's plan must exist, be legal, and have the recorded objective."""
    path = folder / "plans" / f"{record['name']}.json"
    if not path.exists():
        return [f"stored plan {path} is missing"]
    plan = load_plan(path, scenario)
    out = [f"stored plan breaks {v}" for v in check_plan(problem, plan.grid)]
    if plan.metrics is None or abs(plan.metrics.objective - record["objective"]) > 1e-4 * max(
        1.0, abs(record["objective"])
    ):
        out.append(
            f"stored plan's objective {plan.metrics and plan.metrics.objective} is not the record's {record['objective']}"
        )
    return out


def run_corpus_bench(
    split: str = "heldout",
    repeat: int = 3,
    folder: Path = CORPUS_DIR,
    names: list[str] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> CorpusReport:
    """Bench the heuristic and the greedy on the corpus records of `split` (or of `names`);
    `progress(split, scenarios done, scenarios)` after each one."""
    if split not in SPLITS:
        raise InputError("--split", [f"must be one of {', '.join(SPLITS)} (got {split!r})"])
    optima = read_optima(folder)
    if not optima:
        raise InputError(str(folder), ["holds no corpus records (optima/chunk-*.jsonl)"])
    wanted = sorted(p.stem for p in (folder / "scenarios").glob("*.json"))
    wanted = [n for n in wanted if names is None or n in names]
    cases, missing = [], []
    for done, name in enumerate(wanted):
        if progress is not None:
            progress(split, done, len(wanted))
        record = optima.get(name)
        if record is None:
            if split == "all" or _split_of_name(name) == split:
                missing.append(name)
            continue
        if split != "all" and record["split"] != split:
            continue
        scenario = load_scenario(folder / "scenarios" / f"{name}.json")
        problem = compile_scenario(scenario)
        case = Case(
            name,
            problem.gpus,
            len(problem.batch),
            bool(record["proven"]),
            float(record["objective"]),
            record.get("bound"),
            time_scheduler(problem, "heuristic", repeat),
            time_scheduler(problem, "greedy", 1),
        )
        case.problems = _stored_plan_problems(folder, record, scenario, problem)
        cases.append(case)
    if progress is not None:
        progress(split, len(wanted), len(wanted))
    return CorpusReport(split, repeat, cases, missing)


def _split_of_name(name: str) -> str:
    from gpualloc.generators.corpus import index_of, split_of

    return split_of(index_of(name))
