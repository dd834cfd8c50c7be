"""Standalone SVG Gantt charts of plans: GPU rows x step columns, plans side by side.

Plain string building, no plotting library, integer coordinates and a fixed iteration order,
so the same scenario and plans always give byte-identical SVG. Each job kind has a hue
(training blue, batch inference green, quantization orange, real-time red), the jobs of a kind
are shades of it; ids are written inside blocks wide enough to hold them, and every block has
a tooltip (<title>) with its id, kind, GPUs and steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape

from gpualloc.schemas import Metrics, Plan, Scenario
from gpualloc.solvers.policies import policy

KIND_HUES = {"training": 212, "batch_inference": 140, "quantization": 30, "realtime": 352}
KIND_LABELS = {
    "training": "training",
    "batch_inference": "batch inference",
    "quantization": "quantization",
    "realtime": "real-time",
}
_UNKNOWN = ("hsl(0,0%,55%)", "#ffffff")
_CHAR_W = 6  # px per character of the 10px label font (a safe average for sans-serif)
_MARGIN_L, _GAP, _TOP = 48, 44, 98


@dataclass(frozen=True)
class Rect:
    """A block of one job: GPUs [g0, g1) x steps [t0, t1)."""

    job: str
    g0: int
    g1: int
    t0: int
    t1: int


def job_colours(scenario: Scenario) -> dict[str, tuple[str, str]]:
    """job id -> (fill, label colour): the kind's hue, a different shade per job of the kind."""
    counts: dict[str, int] = {}
    out = {}
    for job in scenario.jobs:
        k = counts.get(job.kind, 0)
        counts[job.kind] = k + 1
        light = 34 + round(38 * ((k * 0.6180339887) % 1.0))
        sat = 62 if job.kind != "realtime" else 70
        out[job.id] = (f"hsl({KIND_HUES[job.kind]},{sat}%,{light}%)", "#111111" if light >= 56 else "#ffffff")
    return out


def grid_rects(grid: list[list[str | None]]) -> list[Rect]:
    """Maximal blocks: same-job runs along each row, merged across consecutive rows."""
    runs: list[tuple[str, int, int, int]] = []
    for g, row in enumerate(grid):
        t = 0
        while t < len(row):
            job = row[t]
            if job is None:
                t += 1
                continue
            end = t
            while end < len(row) and row[end] == job:
                end += 1
            runs.append((job, t, end, g))
            t = end
    runs.sort()
    rects: list[Rect] = []
    for job, t0, t1, g in runs:
        last = rects[-1] if rects else None
        if last and (last.job, last.t0, last.t1, last.g1) == (job, t0, t1, g):
            rects[-1] = Rect(job, last.g0, g + 1, t0, t1)
        else:
            rects.append(Rect(job, g, g + 1, t0, t1))
    rects.sort(key=lambda r: (r.g0, r.t0, r.job))
    return rects


def _metrics_line(plan: Plan, metrics: Metrics | None) -> str:
    if metrics is None:
        return ""
    total = metrics.scheduled + len(metrics.unscheduled)
    return (
        f"utilization {metrics.utilization:.1%} · value {metrics.value:.1f} · "
        f"objective {metrics.objective:.1f} · shortfall {metrics.realtime_shortfall} · "
        f"scheduled {metrics.scheduled}/{total}"
    )


def _cell_size(gpus: int, horizon: int) -> tuple[int, int]:
    return max(6, min(28, 560 // horizon)), max(5, min(22, 440 // gpus))


def _panel(
    scenario: Scenario,
    plan: Plan,
    metrics: Metrics | None,
    x0: int,
    y0: int,
    cw: int,
    ch: int,
    colours: dict[str, tuple[str, str]],
) -> list[str]:
    G, T = scenario.gpus, scenario.horizon
    kinds = {j.id: j.kind for j in scenario.jobs}
    W, H = T * cw, G * ch
    name = policy(plan.scheduler).label
    out = [
        f'<g class="panel" data-scheduler="{escape(plan.scheduler)}">',
        f'<text x="{x0}" y="{y0 - 40}" font-size="14" font-weight="bold">{escape(name)}</text>',
        f'<text x="{x0}" y="{y0 - 24}" font-size="11" fill="#333">{escape(_metrics_line(plan, metrics))}</text>',
        f'<rect x="{x0}" y="{y0}" width="{W}" height="{H}" fill="#f3f3f3" stroke="#999"/>',
    ]
    for t in range(1, T):
        out.append(f'<line x1="{x0 + t * cw}" y1="{y0}" x2="{x0 + t * cw}" y2="{y0 + H}" stroke="#e2e2e2"/>')
    if ch >= 8:
        for g in range(1, G):
            out.append(f'<line x1="{x0}" y1="{y0 + g * ch}" x2="{x0 + W}" y2="{y0 + g * ch}" stroke="#e2e2e2"/>')
    rects = grid_rects(plan.grid)
    best: dict[str, Rect] = {}  # the widest block of each job (then the tallest) carries its label
    for r in rects:
        cur = best.get(r.job)
        if cur is None or (r.t1 - r.t0, r.g1 - r.g0) > (cur.t1 - cur.t0, cur.g1 - cur.g0):
            best[r.job] = r
    for r in rects:
        fill, ink = colours.get(r.job, _UNKNOWN)
        x, y, w, h = x0 + r.t0 * cw, y0 + r.g0 * ch, (r.t1 - r.t0) * cw, (r.g1 - r.g0) * ch
        kind = KIND_LABELS.get(kinds.get(r.job, ""), "unknown job")
        gpus = f"GPU {r.g0}" if r.g1 - r.g0 == 1 else f"GPUs {r.g0}-{r.g1 - 1}"
        tip = f"{r.job} ({kind}): {gpus}, steps {r.t0}-{r.t1 - 1}"
        out.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" stroke="#ffffff" '
            f'stroke-width="1"><title>{escape(tip)}</title></rect>'
        )
        if best[r.job] is r and w >= len(r.job) * _CHAR_W + 4 and h >= 11:
            out.append(
                f'<text x="{x + w // 2}" y="{y + h // 2 + 4}" font-size="10" text-anchor="middle" '
                f'fill="{ink}">{escape(r.job)}</text>'
            )
    N = scenario.node_size
    for g in range(N, G, N):
        out.append(
            f'<line x1="{x0}" y1="{y0 + g * ch}" x2="{x0 + W}" y2="{y0 + g * ch}" stroke="#444" stroke-width="2"/>'
        )
    every_t = max(1, -(-20 // cw))
    for t in range(0, T, every_t):
        out.append(
            f'<text x="{x0 + t * cw + cw // 2}" y="{y0 - 5}" font-size="9" text-anchor="middle" fill="#555">{t}</text>'
        )
    every_g = max(1, -(-11 // ch))
    for g in range(0, G, every_g):
        out.append(
            f'<text x="{x0 - 4}" y="{y0 + g * ch + ch // 2 + 3}" font-size="9" text-anchor="end" fill="#555">{g}</text>'
        )
    out.append("</g>")
    return out


def render_gantt(scenario: Scenario, plans: Sequence[Plan], metrics: Sequence[Metrics | None] | None = None) -> str:
    """SVG text of `plans` (e.g. FIFO and heuristic) side by side for one scenario.

    `metrics` defaults to each plan's own metrics; pass them when the plans carry none.
    """
    G, T = scenario.gpus, scenario.horizon
    cw, ch = _cell_size(G, T)
    W, H = T * cw, G * ch
    mets = list(metrics) if metrics is not None else [p.metrics for p in plans]
    colours = job_colours(scenario)
    width = _MARGIN_L + len(plans) * W + max(0, len(plans) - 1) * _GAP + 24
    legend_y = _TOP + H + 30
    height = legend_y + 30
    hours = scenario.step_minutes / 60
    sub = (
        f"{G} GPUs"
        + (f" in nodes of {scenario.node_size}" if scenario.node_size != G else "")
        + f" x {T} steps of {hours:g} h · {len(scenario.jobs)} jobs"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f"<title>{escape(scenario.name)}: GPU allocation plans</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="12" y="22" font-size="16" font-weight="bold">{escape(scenario.name)}</text>',
        f'<text x="12" y="38" font-size="11" fill="#555">{escape(sub)} (rows: GPUs, columns: steps)</text>',
    ]
    for i, (plan, m) in enumerate(zip(plans, mets)):
        out.extend(_panel(scenario, plan, m, _MARGIN_L + i * (W + _GAP), _TOP, cw, ch, colours))
    x = _MARGIN_L
    out.append('<g class="legend">')
    for kind, label in KIND_LABELS.items():
        out.append(f'<rect x="{x}" y="{legend_y}" width="14" height="14" fill="hsl({KIND_HUES[kind]},62%,45%)"/>')
        out.append(f'<text x="{x + 19}" y="{legend_y + 11}" font-size="11">{label}</text>')
        x += 19 + len(label) * 7 + 18
    out.append(f'<rect x="{x}" y="{legend_y}" width="14" height="14" fill="#f3f3f3" stroke="#999"/>')
    out.append(f'<text x="{x + 19}" y="{legend_y + 11}" font-size="11">idle</text>')
    x += 19 + 4 * 7 + 18
    if scenario.node_size != G:
        out.append(
            f'<line x1="{x}" y1="{legend_y + 7}" x2="{x + 14}" y2="{legend_y + 7}" stroke="#444" stroke-width="2"/>'
        )
        out.append(f'<text x="{x + 19}" y="{legend_y + 11}" font-size="11">node boundary</text>')
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_gantt(path: str | Path, scenario: Scenario, plans: Sequence[Plan]) -> Path:
    path = Path(path)
    path.write_text(render_gantt(scenario, plans), encoding="utf-8")
    return path
