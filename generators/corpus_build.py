"""Build the benchmark corpus in resumable chunks: scenario files, then optima and plans.

`benchmarks/corpus/` holds `scenarios/<name>.json` (from `generators.corpus`),
`optima/chunk-NN.jsonl` (one line a solved scenario, appended as each finishes, so a stopped
build resumes where it stopped) and `plans/<name>.json` (the best plan found, a contract plan
file `gpualloc check` reads).

How a scenario is solved (full mode, HiGHS, one thread), warm-started from the better of the
heuristic and the greedy:
- up to EXACT_GPUS GPUs: the count model first; when its plan does not meet its own bound
  within PROVEN_SMALL, the exact model (every R1-R5 rule on GPU sets) from that plan;
- above: the count model, whose bound is proven (a relaxation) and whose plan is the best known.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpualloc import benchmarks
from gpualloc.agent.loading import dump_plan, load_scenario, write_text
from gpualloc.generators.corpus import SIZE, SIZES, corpus_scenario, name_of, split_of
from gpualloc.schemas import Scenario
from gpualloc.schemas.settings import FullModeOptions
from gpualloc.solvers import POLICIES, build_plan, compile_scenario
from gpualloc.solvers.metrics import objective_of, relative_gap
from gpualloc.solvers.policies.greedy import greedy_schedule
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.policies.milp.model import EXACT_GPUS
from gpualloc.solvers.policies.solution import Solution

CORPUS_DIR = benchmarks.DATA_DIR / "corpus"
CHUNK = 20  # scenarios per optima file
PROVEN_SMALL = 1e-4  # relative gap of a proven optimum (pools up to EXACT_GPUS)
PROVEN_LARGE = 1e-3  # relative gap of a proven bound (larger pools)
COUNT_SECONDS = 60.0
EXACT_SECONDS = 240.0
LARGE_SECONDS = 40.0


def write_scenarios(folder: Path = CORPUS_DIR) -> list[Path]:
    """Every corpus scenario as a file (validated first: the generator must stay contract-valid)."""
    out = []
    for i in range(SIZE):
        data = corpus_scenario(i)
        Scenario.model_validate(data)
        path = folder / "scenarios" / f"{data['name']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, scenario_text(data))
        out.append(path)
    return out


def scenario_text(data: dict[str, Any]) -> str:
    """A scenario file with one job a line: small, and diffs name the job that changed."""
    head = {k: v for k, v in data.items() if k != "jobs"}
    lines = [json.dumps(head)[:-1] + ', "jobs": [']
    lines += ["  " + json.dumps(job) + ("," if k < len(data["jobs"]) - 1 else "") for k, job in enumerate(data["jobs"])]
    return "\n".join(lines) + "\n]}\n"


@dataclass
class Solved:
    record: dict[str, Any]
    plan_text: str


def solve_scenario(
    i: int,
    folder: Path = CORPUS_DIR,
    count_seconds: float = COUNT_SECONDS,
    exact_seconds: float = EXACT_SECONDS,
    large_seconds: float = LARGE_SECONDS,
) -> Solved:
    """Scenario i's best plan and proven bound, as the module docstring says."""
    from gpualloc.solvers.policies.milp.model import solve_milp

    scenario = load_scenario(folder / "scenarios" / f"{name_of(i)}.json")
    problem = compile_scenario(scenario)
    warm = max((heuristic_schedule(problem), greedy_schedule(problem)), key=lambda s: objective_of(problem, s))
    small = problem.gpus <= EXACT_GPUS
    gap_target = PROVEN_SMALL if small else PROVEN_LARGE
    base = FullModeOptions(
        threads=1, mip_gap=gap_target, exact=False, time_limit=count_seconds if small else large_seconds
    )
    t0 = time.perf_counter()
    result = solve_milp(problem, base, warm=warm)
    model = "count"
    if small and problem.realtime and (result.gap is None or result.gap > gap_target):
        exact = base.model_copy(update={"exact": True, "time_limit": exact_seconds})
        second = solve_milp(problem, exact, warm=result.schedule)
        if second.bound is not None and (result.bound is None or second.bound < result.bound):
            result.bound = second.bound
        if second.objective > result.objective:
            result.schedule, result.objective = second.schedule, second.objective
        model = "exact"
    seconds = time.perf_counter() - t0
    finite = result.bound is not None and math.isfinite(result.bound)  # HiGHS says inf when it found none
    bound = max(result.bound, result.objective) if result.bound is not None and finite else None
    gap = relative_gap(bound, result.objective) if bound is not None else None
    record = {
        "name": problem.name,
        "index": i,
        "split": split_of(i),
        "gpus": problem.gpus,
        "node_size": problem.node_size,
        "horizon": problem.horizon,
        "jobs": len(problem.batch),
        "apps": len(problem.realtime),
        "objective": round(result.objective, 6),
        "bound": None if bound is None else round(bound, 6),
        "gap": None if gap is None else round(gap, 8),
        "proven": gap is not None and gap <= gap_target,
        "model": model if problem.realtime else "exact",
        "seconds": round(seconds, 2),
    }
    plan = build_plan(problem, POLICIES["full-mode"], Solution(result.schedule, {"bound": bound, "gap": gap}))
    return Solved(record, dump_plan(plan))


def chunk_path(folder: Path, chunk: int) -> Path:
    return folder / "optima" / f"chunk-{chunk:02d}.jsonl"


def read_optima(folder: Path = CORPUS_DIR) -> dict[str, dict[str, Any]]:
    """Every solved scenario's record, by name."""
    out = {}
    for path in sorted((folder / "optima").glob("chunk-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                out[record["name"]] = record
    return out


def build_chunks(
    chunks: list[int], folder: Path = CORPUS_DIR, log: Callable[[str], None] = print, **limits: float
) -> int:
    """Solve the scenarios of `chunks` not solved yet, the small pools (proven optima) first,
    appending each record to its chunk's file as it finishes."""
    done = read_optima(folder)
    (folder / "plans").mkdir(parents=True, exist_ok=True)
    todo = [i for c in chunks for i in range(c * CHUNK, min((c + 1) * CHUNK, SIZE)) if name_of(i) not in done]
    todo.sort(key=lambda i: (SIZES[i % len(SIZES)] > EXACT_GPUS, i))
    for i in todo:
        result = solve_scenario(i, folder, **limits)
        write_text(folder / "plans" / f"{name_of(i)}.json", result.plan_text)
        path = chunk_path(folder, i // CHUNK)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(result.record, sort_keys=True) + "\n")
        r = result.record
        log(
            f"{r['name']}: objective {r['objective']:.4f} bound {r['bound']} gap {r['gap']} "
            f"{'proven' if r['proven'] else 'open'} ({r['model']}, {r['seconds']} s)"
        )
    return len(todo)


def chunk_count() -> int:
    return (SIZE + CHUNK - 1) // CHUNK
