"""`gpualloc bench native`: the compiled heuristic (solvers/native) against its Python reference
on the same problems: p50 of each over alternating rounds (the machine's load moves both
alike), the speed-up, and whether the plans are the same (they must be: exit 1 otherwise, or
when the extension is not installed)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from gpualloc.agent.loading import load_scenario
from gpualloc.benchmarks.scenario_bench import scenario_files
from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers import compile_scenario
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.heuristic.native import AVAILABLE


@dataclass(frozen=True)
class NativeRow:
    name: str
    gpus: int
    jobs: int
    native_ms: float  # p50
    python_ms: float  # p50
    same_plan: bool

    @property
    def speedup(self) -> float:
        return self.python_ms / self.native_ms if self.native_ms > 0 else float("inf")


def bench_native(scenario: Scenario, repeat: int, effort: float) -> NativeRow:
    problem = compile_scenario(scenario)
    times: dict[bool, list[float]] = {True: [], False: []}
    plans = {}
    for _ in range(max(1, repeat)):
        for native in (True, False):
            t0 = time.perf_counter()
            plans[native] = heuristic_schedule(problem, effort, native=native)
            times[native].append((time.perf_counter() - t0) * 1000.0)
    return NativeRow(
        scenario.name,
        scenario.gpus,
        len(scenario.jobs),
        statistics.median(times[True]),
        statistics.median(times[False]),
        plans[True] == plans[False],
    )


def run_native_bench(
    folder: str | Path | None,
    repeat: int,
    generated: Sequence[tuple[int, int, int]],
    effort: float = SolveOptions().effort,
) -> list[NativeRow]:
    """Every scenario of `folder` (default the seven), then one generated per (gpus, jobs, seed)."""
    if not AVAILABLE:
        raise RuntimeError("the compiled heuristic is not installed (`make native`; needs a Rust toolchain)")
    scenarios = [load_scenario(p) for p in scenario_files(folder)]
    scenarios += [Scenario.model_validate(generate_scenario(g, j, s)) for g, j, s in generated]
    return [bench_native(sc, repeat, effort) for sc in scenarios]


def table(rows: list[NativeRow], repeat: int) -> str:
    head = f"{'scenario':<22} {'GPUs':>5} {'jobs':>5}  {'p50 compiled':>12}  {'p50 Python':>11}  {'speed-up':>8}  same plan"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.name:<22} {r.gpus:>5} {r.jobs:>5}  {r.native_ms:>9.2f} ms  {r.python_ms:>8.2f} ms  "
            f"{r.speedup:>7.1f}x  {'yes' if r.same_plan else 'NO'}"
        )
    lines.append("-" * len(head))
    lines.append(
        f"p50 of {repeat} alternating rounds; median speed-up {statistics.median(r.speedup for r in rows):.1f}x"
    )
    return "\n".join(lines)


def as_dict(rows: list[NativeRow]) -> list[dict]:
    return [asdict(r) | {"speedup": r.speedup} for r in rows]
