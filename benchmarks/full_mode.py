"""The full-mode bench (`gpualloc bench full-mode`): objective, bound, gap and time per scenario, and
recording better objectives and bounds in the bundled best-known.json."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from gpualloc import benchmarks
from gpualloc.schemas import Scenario
from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers import compile_scenario, policy
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.metrics import objective_of


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


def bench_full_mode(scenarios: list[Scenario], options: SolveOptions) -> list[FullModeRow]:
    """One full-mode solve per scenario, warm-started from the heuristic."""
    full = policy("full-mode")
    rows = []
    for scenario in scenarios:
        problem = compile_scenario(scenario)
        solution = full.solve(problem, options)
        c = solution.certificate
        rows.append(
            FullModeRow(
                scenario.name,
                options.full_mode.solver,
                objective_of(problem, solution.schedule),
                c["bound"],
                c["gap"],
                c["status"],
                c["source"],
                c["build_seconds"],
                c["solve_seconds"],
                c["warm_objective"],
                not full.check(problem, to_grid(problem, solution.schedule)),
            )
        )
    return rows


def format_full_mode(rows: list[FullModeRow]) -> str:
    head = (
        f"{'full mode':<22} {'solver':>6}  {'objective':>10}  {'bound':>10}  {'gap':>7}  {'status':>14}  "
        f"{'build':>7}  {'solve':>8}  {'heur/full':>9}  legal"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        bound = "-" if r.bound is None else f"{r.bound:.2f}"
        gap = "-" if r.gap is None else f"{100 * r.gap:.2f}%"
        share = "-" if r.heuristic_share is None else f"{100 * r.heuristic_share:.1f}%"
        lines.append(
            f"{r.scenario:<22} {r.solver:>6}  {r.objective:>10.2f}  {bound:>10}  {gap:>7}  {r.status:>14}  "
            f"{r.build_seconds:>6.2f}s  {r.solve_seconds:>7.1f}s  {share:>9}  {'yes' if r.legal else 'NO'}"
        )
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
            entry.update(
                objective=round(r.objective, 4),
                source=f"gpualloc milp ({r.solver}), {r.solve_seconds:.0f} s",
                status=r.status,
            )
        if r.bound is not None and round(r.bound, 4) < entry["bound"]:
            said.append(f"{r.scenario}: bound {entry['bound']} -> {r.bound:.4f}")
            entry["bound"] = round(max(r.bound, entry["objective"]), 4)
            entry["bound_source"] = f"gpualloc milp ({r.solver}), {r.solve_seconds:.0f} s"
            entry["bound_status"] = r.status
    if said:
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return said
