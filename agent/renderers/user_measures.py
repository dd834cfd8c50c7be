"""What users read of whole runs (`solvers.simulation.user_measures`): text lines per policy and
an SVG of the wait by job size, one bar colour per policy."""

from __future__ import annotations

from html import escape

from gpualloc.solvers.policies import online_policy
from gpualloc.solvers.simulation.results import base_policy
from gpualloc.solvers.simulation.user_measures import SIZE_BUCKETS, JobGroup, OfferedLoad, UserMeasures

KEYS = ("mean", "p50", "p90", "p99", "max")
PRIORITY_COLUMNS = 10  # more priority classes than this: the text leaves their table to the JSON


def spread_text(q: dict[str, float], keys: tuple[str, ...] = KEYS) -> str:
    """`keys` of a spread joined by '/' (mean/p50/p90/p99/max), or '-' for no jobs."""
    return "/".join(f"{q[k]:g}" for k in keys) if q else "-"


def lines(figures: dict[str, UserMeasures], load: OfferedLoad | None = None, scope: str = "") -> list[str]:
    """A table of JCT, wait and slowdown per policy, the same by job size and by priority, and
    each app's served share; `scope` says how far the runs went."""
    if not figures:
        return []
    minutes = next(iter(figures.values())).step_minutes
    out = [
        f"what users read{f' ({scope})' if scope else ''}, in steps of {minutes} min (a job never started or "
        "unfinished counts to the run's end; 'left': jobs cancelled while queued, rejected or failed for good, "
        "outside the times):",
        f"{'policy':<{_width(figures)}} {'jobs':>5} {'unfin':>5} {'left':>5}  {'wait mean/p50/p90/p99/max':>28}  {'JCT mean/p50/p90/p99/max':>28}  "
        f"{'slowdown mean/p99':>17}  {'Jain jobs':>9}  {'Jain prio':>9}  {'makespan':>8}",
    ]
    for policy, m in figures.items():
        slow = f"{m.slowdown['mean']:g}/{m.slowdown['p99']:g}" if m.slowdown else "-"
        out.append(
            f"{policy:<{_width(figures)}} {m.jobs:>5} {m.unfinished:>5} {m.withdrawn:>5}  {spread_text(m.wait):>28}  {spread_text(m.jct):>28}  "
            f"{slow:>17}  {_index(m.slowdown_jain_jobs):>9}  {_index(m.slowdown_jain_priority_classes):>9}  "
            f"{m.makespan:>8}"
        )
    out += grouped("by job size (GPU-hours of work)", figures)
    classes = max(len(m.by_priority) for m in figures.values())
    if 1 < classes <= PRIORITY_COLUMNS:
        out += grouped("by priority", figures, by_priority=True)
    elif classes > PRIORITY_COLUMNS:
        out.append(f"by priority: {classes} priority classes, too many for a table (--json has each)")
    for policy, m in figures.items():
        if m.served:
            apps = ", ".join(
                f"{app} {_share(s['whole'])} (least day {_share(s['worst_day'])})" for app, s in m.served.items()
            )
            out.append(f"{policy}: apps' served share of demand: {apps}")
    if load is not None:
        out.append(
            f"offered load {load.trace:.2f} counting every job's work, {load.span:.2f} counting only the work "
            f"inside the trace's span of {load.span_steps} steps"
        )
    return out


def grouped(title: str, figures: dict[str, UserMeasures], by_priority: bool = False) -> list[str]:
    """Per policy, each job-size bucket's (or priority's) jobs, mean/p90 wait and mean/p90 JCT."""
    groups: dict[str, dict[str, JobGroup]] = {
        p: m.by_priority if by_priority else m.by_size for p, m in figures.items()
    }
    labels = list(dict.fromkeys(label for g in groups.values() for label in g))
    out = [f"wait mean/p90 and JCT mean/p90 {title}:"]
    out.append(f"{'policy':<{_width(figures)}} " + "  ".join(f"{label:>24}" for label in labels))
    for policy, g in groups.items():
        cells = []
        for label in labels:
            group = g.get(label)
            cells.append(
                "-"
                if group is None
                else f"({group.jobs}) {group.wait['mean']:g}/{group.wait['p90']:g} {group.jct['mean']:g}/{group.jct['p90']:g}"
            )
        out.append(f"{policy:<{_width(figures)}} " + "  ".join(f"{c:>24}" for c in cells))
    return out


def _width(figures: dict[str, UserMeasures]) -> int:
    """The policy column's: its longest label ("heuristic/forecast"), at least 15."""
    return max(15, *(len(p) for p in figures))


def _index(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _share(value: object) -> str:
    return "-" if not isinstance(value, float | int) else f"{value:.2%}"


VARIANTS = ("#17becf", "#8c564b", "#e377c2", "#bcbd22")  # runs of a policy already drawn (`heuristic/completion`)


def _colours(labels: list[str]) -> dict[str, str]:
    """Each run's colour: its policy's, or for a second run of the same policy the next variant."""
    out: dict[str, str] = {}
    for label in labels:
        colour = online_policy(base_policy(label)).colour
        out[label] = colour if colour not in out.values() else VARIANTS[sum(c in VARIANTS for c in out.values())]
    return out


def wait_chart(figures: dict[str, UserMeasures], title: str) -> str:
    """SVG: per job-size bucket, each policy's mean wait (bar) and p90 wait (tick), in steps."""
    buckets = [label for label, _ in SIZE_BUCKETS if any(label in m.by_size for m in figures.values())]
    policies = list(figures)
    colours = _colours(policies)
    top = max((g.wait["p90"] for m in figures.values() for g in m.by_size.values()), default=1.0) or 1.0
    panel, bar, pad = 220, 22, 60
    width = max(420, pad + len(buckets) * (bar * len(policies) + 40) + 20)
    height = panel + 110
    y = lambda v: 40 + panel - panel * v / top  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="20" font-weight="bold">{escape(title)}: wait by job size (mean bar, p90 tick; steps)</text>',
        f'<line x1="{pad - 10}" y1="{40 + panel}" x2="{width - 10}" y2="{40 + panel}" stroke="#333"/>',
        f'<text x="8" y="{y(top) + 4:.1f}">{top:g}</text>',
        f'<text x="8" y="{40 + panel + 4}">0</text>',
    ]
    for b, bucket in enumerate(buckets):
        x0 = pad + b * (bar * len(policies) + 40)
        for p, policy in enumerate(policies):
            group = figures[policy].by_size.get(bucket)
            if group is None:
                continue
            colour = colours[policy]
            x = x0 + p * bar
            out.append(
                f'<rect x="{x}" y="{y(group.wait["mean"]):.1f}" width="{bar - 3}" '
                f'height="{40 + panel - y(group.wait["mean"]):.1f}" fill="{colour}"><title>{escape(policy)} '
                f"{bucket} GPU-hours ({group.jobs} jobs): mean wait {group.wait['mean']:g}, p90 "
                f"{group.wait['p90']:g}</title></rect>"
                f'<line x1="{x}" y1="{y(group.wait["p90"]):.1f}" x2="{x + bar - 3}" y2="{y(group.wait["p90"]):.1f}" '
                f'stroke="#000" stroke-width="2"/>'
            )
        out.append(f'<text x="{x0}" y="{40 + panel + 16}">{escape(bucket)} GPU-h</text>')
    for p, policy in enumerate(policies):
        x = pad + p * 140
        colour = colours[policy]
        out.append(
            f'<rect x="{x}" y="{height - 28}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 14}" y="{height - 19}">{escape(policy)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
