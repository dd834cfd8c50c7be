"""Full mode in words, for `gpualloc status`: what became of it at the latest commit (its last
solve, running, skipped by the size gate, not due) and when it runs next, from the commit's
`full_mode_report` (or its older free-text `full_mode`)."""

from __future__ import annotations

from typing import Any

from gpualloc.schemas.published import FullModeReport, FullModeSolve

ENDED = {"adopted": "adopted", "not_better": "not adopted", "stale": "not adopted, stale", "failed": "failed"}


def full_mode_status(commit: dict[str, Any] | None) -> dict[str, Any] | None:
    """The latest commit's full-mode report with its `line` (None: the commit says nothing of
    full mode, or there is no commit)."""
    if commit is None:
        return None
    if commit.get("full_mode_report") is None:
        said = commit.get("full_mode")
        return None if said is None else {"line": f"full mode: {said}"}
    report = FullModeReport.model_validate(commit["full_mode_report"])
    return {**report.model_dump(), "line": full_mode_line(report)}


def full_mode_line(report: FullModeReport) -> str:
    """E.g. "full mode: last ran at step 12 (not adopted: no better than the heuristic (502.34
    against 502.34, bound 510.00), 0.8 s); next at step 13"."""
    parts = []
    if report.state == "running":
        parts.append(f"running since step {report.running_since}")
    elif report.state == "skipped":
        parts.append(f"skipped: {report.detail}")
    if report.last is not None:
        parts.append(f"last ran at step {report.last.step} ({ended(report.last)}, {report.last.seconds:.1f} s)")
    elif report.state == "not_due":
        parts.append("not run yet")
    if report.next_step is not None:
        parts.append(f"next at step {report.next_step}")
    return "full mode: " + "; ".join(parts)


def ended(solve: FullModeSolve) -> str:
    """How a solve ended, in words: adopted by how much, or why not."""
    if solve.outcome == "adopted":
        return "adopted" if solve.gain is None else f"adopted: {solve.gain:+.2f} over the heuristic's objective"
    if solve.outcome == "timed_out":
        return f"timed out: {solve.detail}"
    return f"{ENDED[solve.outcome]}: {solve.detail}"
