"""Full mode at the edge: run the MILP for `solve` and `bench`, and record better best-knowns."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from gpualloc import benchmarks
from gpualloc.agent.loading import InputError
from gpualloc.schemas import Plan, Scenario
from gpualloc.solvers import build_plan, check_plan, compile_scenario
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.milp.model import MilpOptions, MilpResult, solve_milp, solver_available


def require_solver(name: str) -> None:
    if not solver_available(name):
        hint = "apt-get install coinor-cbc" if name == "cbc" else "pip install highspy"
        raise InputError("--solver", [f"{name} is not available on this machine ({hint})"])


def plan_of(problem, result: MilpResult, elapsed_ms: float) -> Plan:
    """The contract's plan, with full mode's certificate as added fields."""
    plan = build_plan(problem, "milp", result.schedule, elapsed_ms)
    return Plan(**plan.model_dump(), bound=result.bound, gap=result.gap, status=result.status,
                source=result.source, warm_objective=result.warm_objective,
                build_seconds=round(result.build_seconds, 3), solve_seconds=round(result.solve_seconds, 3))


def solve_full_mode(problem, options: MilpOptions) -> Plan:
    t0 = time.perf_counter()
    result = solve_milp(problem, options)
    return plan_of(problem, result, (time.perf_counter() - t0) * 1000.0)


@dataclass
class FullModeRow:
    scenario: str
    solver: str
    objective: float
    bound: float | None
    gap: float | None
    status: str
    source: str
    build_seconds: float
    solve_seconds: float
    heuristic_objective: float
    legal: bool

    @property
    def heuristic_share(self) -> float | None:
        return self.heuristic_objective / self.objective if self.objective > 0 else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "heuristic_share": self.heuristic_share}


def bench_full_mode(scenarios: list[Scenario], report, options: MilpOptions) -> list[FullModeRow]:
    """One full-mode solve per scenario, warm-started from the heuristic."""
    rows = []
    for scenario in scenarios:
        problem = compile_scenario(scenario)
        warm = heuristic_schedule(problem)
        result = solve_milp(problem, options, warm=warm)
        grid = plan_of(problem, result, 0.0).grid
        rows.append(FullModeRow(scenario.name, options.solver, result.objective, result.bound, result.gap,
                                result.status, result.source, result.build_seconds, result.solve_seconds,
                                result.warm_objective, not check_plan(problem, grid, "milp")))
    return rows


def format_full_mode(rows: list[FullModeRow]) -> str:
    head = (f"{'full mode':<22} {'solver':>6}  {'objective':>10}  {'bound':>10}  {'gap':>7}  {'status':>14}  "
            f"{'build':>7}  {'solve':>8}  {'heur/MILP':>9}  legal")
    lines = [head, "-" * len(head)]
    for r in rows:
        bound = "-" if r.bound is None else f"{r.bound:.2f}"
        gap = "-" if r.gap is None else f"{100 * r.gap:.2f}%"
        share = "-" if r.heuristic_share is None else f"{100 * r.heuristic_share:.1f}%"
        lines.append(f"{r.scenario:<22} {r.solver:>6}  {r.objective:>10.2f}  {bound:>10}  {gap:>7}  {r.status:>14}  "
                     f"{r.build_seconds:>6.2f}s  {r.solve_seconds:>7.1f}s  {share:>9}  {'yes' if r.legal else 'NO'}")
    return "\n".join(lines)


def record_best_known(rows: list[FullModeRow]) -> list[str]:
    """Write better objectives (legal plans) and tighter bounds into the bundled best-known.json."""
    path = benchmarks.DATA_DIR / "best-known.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    said = []
    for r in rows:
        entry = data.get(r.scenario)
        if entry is None or not r.legal:
            continue
        if round(r.objective, 4) > entry["objective"]:
            said.append(f"{r.scenario}: objective {entry['objective']} -> {r.objective:.4f}")
            entry.update(objective=round(r.objective, 4),
                         source=f"gpualloc milp ({r.solver}), {r.solve_seconds:.0f} s", status=r.status)
        if r.bound is not None and round(r.bound, 4) < entry["bound"]:
            said.append(f"{r.scenario}: bound {entry['bound']} -> {r.bound:.4f}")
            entry["bound"] = round(max(r.bound, entry["objective"]), 4)
            entry["bound_source"] = f"gpualloc milp ({r.solver}), {r.solve_seconds:.0f} s"
            entry["bound_status"] = r.status
    if said:
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return said
