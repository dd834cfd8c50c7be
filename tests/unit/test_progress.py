"""Progress lines of long runs: throttled, always the last one, on stderr (stdout stays the report)."""

from __future__ import annotations

import io
import json

from gpualloc.agent.cli import main
from gpualloc.agent.renderers.progress import Progress
from gpualloc.benchmarks import DATA_DIR


def test_progress_is_throttled_but_always_says_when_a_part_ends():
    out = io.StringIO()
    progress = Progress("simulate", "steps", out, every_s=3600)
    for done in range(1, 11):
        progress("heuristic", done, 10)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpualloc simulate: heuristic 10/10 steps (100%), ")
    chatty = io.StringIO()
    every = Progress("bench --corpus", "scenarios", chatty, every_s=0)
    for done in range(3):
        every("heldout", done, 2)
    assert chatty.getvalue().splitlines()[1].startswith("gpualloc bench --corpus: heldout 1/2 scenarios (50%)")


def test_simulate_reports_progress_on_stderr_and_its_report_on_stdout(capsys):
    trace = str(DATA_DIR / "traces" / "week-64gpu-1000jobs.jsonl")
    assert main(["simulate", trace, "--days", "1", "--policy", "fifo", "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert "gpualloc simulate: fifo 24/24 steps (100%)" in captured.err
