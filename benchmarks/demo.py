"""`gpualloc demo`: the bench on the bundled scenarios plus one Gantt chart per scenario."""

from __future__ import annotations

from pathlib import Path

from gpualloc.agent.loading import InputError, dump_json, write_text
from gpualloc.agent.renderers.gantt import write_gantt
from gpualloc.benchmarks.scenario_bench import BENCH_SCHEDULERS, Report, run_bench


def run_demo(out_dir: str | Path = "demo-out", repeat: int = 5) -> tuple[Report, list[Path]]:
    """Bench FIFO vs heuristic on the bundled seven; write `<scenario>.svg` (FIFO and heuristic
    side by side), `bench.txt` and `bench.json` into `out_dir`. Returns the report and files."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(str(out), [f"cannot create the output folder: {e.strerror or e}"]) from None
    report, scenarios = run_bench(None, repeat)
    written = []
    for row, scenario in zip(report.rows, scenarios):
        plans = [plan for s in BENCH_SCHEDULERS if (plan := row.runs[s].plan) is not None]
        path = out / f"{Path(row.source).stem}.svg"
        try:
            written.append(write_gantt(path, scenario, plans))
        except OSError as e:
            raise InputError(str(path), [f"cannot write: {e.strerror or e}"]) from None
    for name, text in (("bench.txt", report.table() + "\n"), ("bench.json", dump_json(report.as_dict()))):
        write_text(out / name, text)
        written.append(out / name)
    return report, written
