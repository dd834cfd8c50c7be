"""`gpualloc bench traces`: FIFO and greedy against the heuristic, with and without the
starvation bound, over whole traces nobody tuned for: the eight Pollux workloads (bundled in
benchmarks/traces/pollux), the bundled week and openb window, and windows of real clusters' job
tables (`benchmarks.real_traces`), each on a pool sized so that the work offered inside the
trace's span is `load` times what the pool can serve over it (jobs' GPU-steps up to the last
arrival over GPUs x steps from step 0 to the last arrival). Every run goes until its jobs finish
(the simulator's whole-trace mode), so every submitted job is counted, and is judged as users
judge it (`user_measures`: waits and JCT by job size) beside the contract's value."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Callable

from gpualloc.agent.renderers import user_measures as users
from gpualloc.agent.traces import read_trace
from gpualloc.benchmarks import DATA_DIR
from gpualloc.benchmarks.real_traces import real_traces
from gpualloc.generators.trace_files import pollux_trace
from gpualloc.schemas.events import parse_event
from gpualloc.solvers.planner.effects import Event
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.simulation.report import executed_violations, whole_run, window_gaps
from gpualloc.solvers.simulation.simulator import SimOptions, simulate
from gpualloc.solvers.simulation.user_measures import OfferedLoad, UserMeasures, measures, offered_load

POLLUX = DATA_DIR / "traces" / "pollux"
WEEK = DATA_DIR / "traces" / "week-64gpu-1000jobs.jsonl"
OPENB = DATA_DIR / "traces" / "openb-2days.jsonl"  # gpualloc trace openb (generators/openb.py)
NODE = 8
PACE_TRIES = 4  # rounds of bringing a trace's arrivals closer together to reach its load (`sized`)


@dataclass
class TraceRow:
    trace: str
    gpus: int
    load: float  # offered work over the pool's capacity through the last arrival
    load_span: float  # the same, counting only the work inside that span (`OfferedLoad.span`)
    pace: float  # its arrivals' times from the first times this (`sized`: below 1, closer together)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> figures
    users: dict[str, UserMeasures] = field(default_factory=dict)  # fifo, greedy, heuristic default -> measures


# the `completion` runs (`run_trace_bench`): label, reserved jobs, starvation bound (None: the trace's)
COMPLETION_RUNS: tuple[tuple[str, int | None, int | None], ...] = (
    ("heuristic/completion", None, None),
    ("heuristic/completion k=1 B=1", 1, 1),
)


def load_of(events: list, gpus: int) -> OfferedLoad:
    """`user_measures.offered_load` of a trace's jobs on `gpus`, steps read as every run reads them."""
    start, config = next((env, p) for env, p in events if env.type == "pool.configured")
    clock = Pool()
    clock.apply([Event(start.type, config, start.occurred_at)], start.occurred_at)
    return offered_load(
        (
            (clock.step_at(env.occurred_at), p.gpus or 1, p.actual_duration or p.duration or 1)
            for env, p in events
            if env.type == "job.submitted"
        ),
        gpus,
    )


def sized(events: list, load: float) -> tuple[list, int, float]:
    """`events` on a pool of whole nodes whose offered load inside the trace's span
    (`OfferedLoad.span`: work past the last arrival left out, so a window's tail does not shrink
    the pool) is closest to `load` (at least one node, and at least the largest job), and the
    pace its arrivals came at. Where that least pool (a node, or the largest job's) is still
    more than the trace can load, the arrivals come closer together instead (every event's time
    from the first times the pace, below 1) until the load inside the span is `load`: the jobs
    stay as they are."""
    biggest = max(p.gpus for env, p in events if env.type == "job.submitted")
    least = NODE * math.ceil(max(NODE, biggest) / NODE)
    gpus = max(least, NODE * round(load_of(events, 1).span / load / NODE))
    pace = 1.0
    if gpus == least:  # the smallest pool its jobs allow: only closer arrivals can load it more
        for _ in range(PACE_TRIES):
            now = load_of(paced(events, pace), gpus).span
            if now >= load * 0.95:
                break
            pace *= now / load
    return (
        [
            (env, p.model_copy(update={"gpus": gpus, "gpus_per_node": NODE}) if env.type == "pool.configured" else p)
            for env, p in paced(events, pace)
        ],
        gpus,
        pace,
    )


def paced(events: list, pace: float) -> list:
    """`events` with each one's time from the first times `pace` (1: as they are)."""
    if pace == 1.0:
        return events
    first = events[0][0].occurred_at
    return [(env.model_copy(update={"occurred_at": first + (env.occurred_at - first) * pace}), p) for env, p in events]


def traces(include_week: bool, include_openb: bool = False, tables: Path | None = None) -> list[tuple[str, list]]:
    """The eight Pollux workloads; the openb window, the week and the real job tables' windows
    present in `tables` (`real_traces`) when asked for."""
    out = [
        (f"pollux-{p.stem.split('-')[1]}", [parse_event(e) for e in pollux_trace(p)])
        for p in sorted(POLLUX.glob("workload-*.csv"))
    ]
    if include_openb:
        out.append(("openb-2days", read_trace(OPENB)))
    if include_week:
        out.append(("week-1000jobs", read_trace(WEEK)))
    if tables is not None:
        out += real_traces(tables)
    return out


def default_bound(events: list) -> int | None:
    """The starvation bound (steps) the trace's pool gets when it gives none: the contract's
    default in minutes over its step."""
    return next(p for env, p in events if env.type == "pool.configured").starvation_bound


def figures(sim, label: str, gaps: bool = False) -> tuple[dict[str, Any], UserMeasures]:
    """A run's whole-trace figures and what users read of it (`user_measures`); with `gaps`,
    also its committed windows' gap to the capacity bound (`report.window_gaps`: legal plans
    only, so not FIFO's, which is exempt from floors)."""
    run = sim.runs[label]
    whole = whole_run(sim, run)
    m = measures(sim, run)
    gap = window_gaps(run) if gaps else {}
    return {
        "value_model": sim.config.value_model,  # the timely value's unit: runs compare only within one
        "value": whole.value,
        "timely_value": whole.timely_value,
        "utilization": whole.utilization,
        "shortfall": whole.realtime_shortfall,
        "window_gap_p50": gap.get("p50"),
        "window_gap_max": gap.get("max"),
        "completed": m.completed,
        "never_started": m.never_started,
        "unfinished": m.unfinished,
        "withdrawn": m.withdrawn,
        "submitted": m.jobs,
        "queue_p50": m.wait.get("p50"),
        "queue_p99": m.wait.get("p99"),
        "queue_max": m.wait.get("max"),
        "wait": m.wait,
        "jct": m.jct,
        "slowdown": m.slowdown,
        "wait_by_size": {k: g.wait for k, g in m.by_size.items()},
        "jct_by_size": {k: g.jct for k, g in m.by_size.items()},
        "fairness_jobs": m.slowdown_jain_jobs,
        "fairness_priority_classes": m.slowdown_jain_priority_classes,
        "makespan": m.makespan,
        "served_worst_day": m.served_worst_day,
        "steps": len(run.commits),
        "legal": not executed_violations(sim, run),
    }, m


def run_trace_bench(
    load: float = 1.25,
    bounds: tuple[int, ...] = (48, 24, 12),
    include_week: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    names: set[str] | None = None,
    include_openb: bool = False,
    tables: Path | None = None,
    completion: bool = False,
) -> list[TraceRow]:
    """Each trace (those of `names`, when given) on its sized pool: FIFO, the heuristic, and the
    heuristic with each starvation bound of `bounds`; with `completion`, the heuristic under the
    `completion` value model too (`COMPLETION_RUNS`: the trace's bound, and reservations that bind
    for the oldest job waiting a step)."""
    rows = []
    chosen = [
        (name, events) for name, events in traces(include_week, include_openb, tables) if names is None or name in names
    ]
    for k, (name, events) in enumerate(chosen):
        if progress is not None:
            progress(name, k, len(chosen))
        events, gpus, pace = sized(events, load)
        load_is = load_of(events, gpus)
        row = TraceRow(name, gpus, load_is.trace, load_is.span, pace)
        base = simulate(events, SimOptions(policies=("fifo", "greedy", "heuristic"), starvation_steps=0))
        row.runs["fifo"], row.users["fifo"] = figures(base, "fifo")
        row.runs["greedy"], row.users["greedy"] = figures(base, "greedy")
        row.runs["heuristic"], _ = figures(base, "heuristic", gaps=True)
        default = simulate(events, SimOptions(policies=("heuristic",)))
        row.runs["heuristic default"], row.users["heuristic"] = figures(default, "heuristic", gaps=True)
        row.runs["heuristic default"]["bound"] = default_bound(events)
        for bound in bounds:
            sim = simulate(events, SimOptions(policies=("heuristic",), starvation_steps=bound))
            row.runs[f"heuristic B={bound}"] = {**figures(sim, "heuristic")[0], "bound": bound}
        for label, reserved, starving_after in COMPLETION_RUNS if completion else ():
            sim = simulate(
                events,
                SimOptions(
                    policies=("heuristic",),
                    value_model="completion",
                    reserved_jobs=reserved,
                    starvation_steps=starving_after,
                ),
            )
            row.runs[label], row.users[label] = figures(sim, "heuristic", gaps=True)
            row.runs[label]["bound"] = default_bound(events) if starving_after is None else starving_after
        rows.append(row)
    if progress is not None:
        progress("traces", len(chosen), len(chosen))
    return rows


def users_targets(rows: list[TraceRow], label: str) -> dict[str, int]:
    """On how many traces the run `label` meets each of the users' targets against FIFO: mean JCT
    <= 0.7x, median wait <= FIFO's, p99 wait <= 1.1x, the largest size bucket's mean wait <= 1.5x
    (the largest with jobs), completions >= FIFO's, every step legal."""
    met = dict.fromkeys(("jct_0_7", "median_wait", "p99_1_1", "largest_1_5", "completions", "legal"), 0)
    for row in rows:
        fifo, run = row.runs["fifo"], row.runs[label]
        big = [k for k, w in fifo["wait_by_size"].items() if w.get("mean") is not None][-1:]
        met["jct_0_7"] += run["jct"]["mean"] <= 0.7 * fifo["jct"]["mean"]
        met["median_wait"] += run["wait"]["p50"] <= fifo["wait"]["p50"]
        met["p99_1_1"] += run["wait"]["p99"] <= 1.1 * fifo["wait"]["p99"]
        met["largest_1_5"] += all(run["wait_by_size"][k]["mean"] <= 1.5 * fifo["wait_by_size"][k]["mean"] for k in big)
        met["completions"] += run["completed"] >= fifo["completed"]
        met["legal"] += run["legal"]
    return met


def table(rows: list[TraceRow]) -> str:
    head = (
        f"{'trace':<16} {'GPUs':>4} {'load':>9}  {'policy':<28} {'done':>5} {'unfin':>5} {'value':>9} "
        f"{'timely':>9} {'util':>6} {'wait mean/p90/p99/max':>24} {'JCT mean/p90':>13} {'Jain':>5} {'prio':>5} "
        f"{'span':>5} {'gap p50':>7} {'max':>6}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        load = f"{row.load:.2f}/{row.load_span:.2f}"
        for label, f in row.runs.items():
            lines.append(
                f"{row.trace:<16} {row.gpus:>4} {load:>9}  {label:<28} {f['completed']:>5} "
                f"{f['unfinished']:>5} {f['value']:>9.0f} {f['timely_value']:>9.0f} "
                f"{f['utilization']:>6.1%} {users.spread_text(f['wait'], ('mean', 'p90', 'p99', 'max')):>24} "
                f"{users.spread_text(f['jct'], ('mean', 'p90')):>13} {_index(f['fairness_jobs']):>5} "
                f"{_index(f['fairness_priority_classes']):>5} {f['makespan']:>5} "
                f"{_share(f.get('window_gap_p50')):>7} {_share(f.get('window_gap_max')):>6}"
                + ("" if f["legal"] else "  ILLEGAL")
            )
    lines += [
        "load: offered work over the pool's capacity through the last arrival, counting every job's work / only "
        "the work inside that span; wait and JCT in the trace's steps, every job counted (an unfinished one to "
        "the run's end); Jain: Jain's index of slowdown (JCT / run time) over jobs; prio: the same over priority "
        "classes of mean slowdown; span: makespan in steps; gap: the committed windows' gap to the capacity "
        "bound, every 6th step (an upper limit on how far from optimal they were)",
        "",
    ]
    for row in rows:
        paced_at = "" if row.pace == 1.0 else f", arrivals {1 / row.pace:.1f}x closer together"
        lines += [
            f"{row.trace}, {row.gpus} GPUs{paced_at}:",
            *users.grouped("by job size (GPU-hours of work)", row.users),
            *(
                [
                    "apps' served share of demand on their least day: "
                    + ", ".join(f"{label} {m.served_worst_day:.2%}" for label, m in row.users.items())
                ]
                if all(m.served_worst_day is not None for m in row.users.values())
                else []
            ),
            "",
        ]
    for p in tradeoff(rows):
        kept = (
            "- (another value model's)"
            if p["gain_kept_median"] is None
            else f"{p['gain_kept_median']:.0%} (least {p['gain_kept_min']:.0%})"
        )
        within = (
            "" if p["p99_within_bound"] is None else f", p99 within FIFO's plus the bound on {p['p99_within_bound']}"
        )
        if p["window_gap_p50_median"] is not None:
            within += (
                f"; committed windows within {p['window_gap_p50_median']:.1%} of the capacity bound "
                f"(median of the traces' p50), {p['window_gap_max']:.1%} at worst"
            )
        lines.append(
            f"{p['label']:<18} keeps {kept} of the timely-value gain over FIFO (median), p99 wait "
            f"{p['p99_over_fifo_mean']:+.1f} steps over FIFO's (mean); of {p['traces']} traces, completes as "
            f"many jobs as FIFO on {p['completes_as_many']}, as much timely value on {p['worth_as_much'] if p['worth_as_much'] is not None else '- (another value model)'}{within}; "
            f"mean wait {p['wait_mean_over_fifo_median']}x FIFO's, mean JCT {p['jct_mean_over_fifo_median']}x "
            "(medians over the traces); users' targets met on: "
            + ", ".join(f"{k} {v}" for k, v in p["users_targets"].items())
        )
    return "\n".join(lines)


def _index(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def as_dict(rows: list[TraceRow]) -> dict[str, Any]:
    return {
        "traces": [
            {
                "trace": r.trace,
                "gpus": r.gpus,
                "load": r.load,
                "load_span": r.load_span,
                "pace": round(r.pace, 4),
                "runs": r.runs,
                "users": {label: asdict(m) for label, m in r.users.items()},
            }
            for r in rows
        ],
        "tradeoff": tradeoff(rows),
    }


def tradeoff(rows: list[TraceRow]) -> list[dict[str, Any]]:
    """Per heuristic run (no bound, the default, then each B): over the traces, the median and
    the least share of the heuristic's timely-value gain over FIFO it keeps, the mean p99 wait
    beside FIFO's, and on how many traces it completes as many jobs as FIFO, is worth as much,
    and (with a bound) keeps its p99 wait within FIFO's plus the bound: the issue's targets."""
    out = []
    labels = [label for label in rows[0].runs if label != "fifo"] if rows else []
    for label in labels:
        kept, p99, done, worth, within = [], [], 0, 0, 0
        wait_ratio, jct_ratio = [], []
        for row in rows:
            fifo, free, run = row.runs["fifo"], row.runs["heuristic"], row.runs[label]
            if fifo["wait"]["mean"] > 0:
                wait_ratio.append(run["wait"]["mean"] / fifo["wait"]["mean"])
            jct_ratio.append(run["jct"]["mean"] / max(fifo["jct"]["mean"], 1e-9))
            comparable = run["value_model"] == fifo["value_model"]
            gain = free["timely_value"] - fifo["timely_value"]
            if gain > 0 and comparable:
                kept.append((run["timely_value"] - fifo["timely_value"]) / gain)
            p99.append(run["queue_p99"] - fifo["queue_p99"])
            done += run["completed"] >= fifo["completed"]
            worth += comparable and run["timely_value"] >= fifo["timely_value"]
            bound = run.get("bound")
            within += bound is not None and run["queue_p99"] <= fifo["queue_p99"] + bound
        bounded = any(row.runs[label].get("bound") is not None for row in rows)
        gap_p50, gap_max = (
            [g for row in rows if (g := row.runs[label].get(key)) is not None]
            for key in ("window_gap_p50", "window_gap_max")
        )
        out.append(
            {
                "label": label,
                "gain_kept_median": round(statistics.median(kept), 3) if kept else None,
                "window_gap_p50_median": round(statistics.median(gap_p50), 4) if gap_p50 else None,
                "window_gap_max": max(gap_max) if gap_max else None,
                "gain_kept_min": round(min(kept), 3) if kept else None,
                "p99_over_fifo_mean": round(statistics.fmean(p99), 2),
                "completes_as_many": done,
                "worth_as_much": worth
                if rows[0].runs[label]["value_model"] == rows[0].runs["fifo"]["value_model"]
                else None,
                "p99_within_bound": within if bounded else None,
                "wait_mean_over_fifo_median": round(statistics.median(wait_ratio), 2) if wait_ratio else None,
                "jct_mean_over_fifo_median": round(statistics.median(jct_ratio), 2) if jct_ratio else None,
                "users_targets": users_targets(rows, label),
                "traces": len(rows),
            }
        )
    return out


def wait_charts(rows: list[TraceRow]) -> dict[str, str]:
    """Per trace, an SVG of FIFO's, greedy's and the heuristic's (default bound) wait by job size."""
    return {row.trace: users.wait_chart(row.users, f"{row.trace}, {row.gpus} GPUs") for row in rows}


def chart(rows: list[TraceRow]) -> str:
    """SVG: x the mean p99 wait over FIFO's (steps), y the median share of the value gain kept,
    one point per bound."""
    points = [p for p in tradeoff(rows) if p["gain_kept_median"] is not None]
    width, height, pad, room = 760, 320, 50, 260  # room: the labels right of the points
    xs = [p["p99_over_fifo_mean"] for p in points] or [0.0]
    lo, hi = min(0.0, *xs), max(1.0, *xs)
    x = lambda v: pad + (v - lo) / (hi - lo) * (width - 2 * pad - room)  # noqa: E731
    y = lambda v: height - pad - max(0.0, min(1.1, v)) / 1.1 * (height - 2 * pad)  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#333"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#333"/>',
        f'<text x="{width / 2 - 110}" y="{height - 12}">mean p99 queueing delay over FIFO (steps)</text>',
        f'<text x="8" y="{pad - 12}">median share of the heuristic\'s timely-value gain over FIFO kept</text>',
        f'<line x1="{pad}" y1="{y(0.8):.1f}" x2="{width - pad}" y2="{y(0.8):.1f}" stroke="#c33" '
        'stroke-dasharray="4 3"/>',
        f'<text x="{width - pad - 60}" y="{y(0.8) - 4:.1f}" fill="#c33">80% kept</text>',
        f'<text x="{pad}" y="{height - pad + 14}">{lo:g}</text>',
        f'<text x="{x(hi) - 10:.1f}" y="{height - pad + 14}">{hi:g}</text>',
        f'<text x="{pad - 30}" y="{y(1.0) + 4:.1f}">100%</text>',
        f'<text x="{pad - 22}" y="{y(0.0) + 4:.1f}">0%</text>',
    ]
    seen: dict[tuple[int, int], int] = {}  # points on the same spot: their labels one under another
    for p in points:
        cx, cy = x(p["p99_over_fifo_mean"]), y(p["gain_kept_median"])
        spot = (round(cx), round(cy))
        below = 14 * seen.get(spot, 0)
        seen[spot] = seen.get(spot, 0) + 1
        out.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="#2a6fb0"/>'
            f'<text x="{cx + 8:.1f}" y="{cy + 4 + below:.1f}">{escape(p["label"].replace("heuristic", "").strip() or "no bound")}'
            f" ({p['completes_as_many']}/{p['traces']} complete as many as FIFO)</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
