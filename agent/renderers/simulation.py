"""The simulator's report: a table per policy and day, JSON, and an SVG chart of the days."""

from __future__ import annotations

from dataclasses import asdict
from html import escape

from gpualloc.solvers.policies import online_policy
from gpualloc.solvers.simulation.report import (
    DayReport,
    executed_violations,
    forecast_price,
    full_mode_figures,
    mistakes,
)
from gpualloc.solvers.simulation.results import PolicyRun, Simulation, base_policy
from gpualloc.solvers.simulation.user_measures import measures, sim_offered_load
from gpualloc.solvers.value_models import COMPLETION

from . import user_measures

KNOWN_WORDS = {"gpus": "true GPUs", "durations": "true duration", "sizes": "true GPUs and duration"}


def table(rows: list[DayReport], sim: Simulation) -> str:
    head = (
        f"{'policy':<15} {'day':>4}  {'util':>6}  {'value':>10}  {'timely':>10}  {'objective':>10}  {'rt short':>8}  "
        f"{'GPU-min':>8}  {'moves':>6}  "
        f"{'started':>7}  "
        f"{'done':>5}  {'queue':>6}  {'JCT':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        day = "all" if r.day is None else str(r.day)
        q = "-" if r.mean_queue_steps is None else f"{r.mean_queue_steps:.1f}"
        jct = "-" if r.mean_completion_steps is None else f"{r.mean_completion_steps:.1f}"
        lines.append(
            f"{r.policy:<15} {day:>4}  {r.utilization:>6.1%}  {r.value:>10.1f}  {r.timely_value:>10.1f}  "
            f"{r.objective:>10.1f}  "
            f"{r.realtime_shortfall:>8.2f}  {r.realtime_shortfall_minutes:>8.0f}  {r.realtime_moves:>6.3f}  "
            f"{r.started:>7}  {r.completed:>5}  {q:>6}  {jct:>6}"
        )
    scope = (
        f"whole trace: each run until its jobs finished, at most {sim.cap} steps"
        if sim.drained
        else "within the days simulated"
    )
    lines.append("")
    lines += user_measures.lines({p: measures(sim, run) for p, run in sim.runs.items()}, sim_offered_load(sim), scope)
    lines.append("")
    for policy, run in sim.runs.items():
        bad = executed_violations(sim, run)
        lines.append(
            f"{policy}: {'legal at every committed step' if not bad else f'{len(bad)} VIOLATIONS, first: {bad[0]}'}"
            + (
                f"; full mode adopted at {len(run.full_mode_adopted)} of {len(run.full_mode)} runs"
                if online_policy(base_policy(policy)).full_mode is not None
                else ""
            )
        )
        figures = full_mode_figures(run)
        if figures:
            gap = figures["hot_gap"]
            assert isinstance(gap, dict)  # full_mode_figures: hot_gap is _spread's dict[str, float]
            lines.append(
                f"{policy}: full mode solved {figures['solves']} snapshots, beat the hot path's plan on "
                f"{figures['improved']} (by {figures['improvement_mean'] or 0:.2%} on average), adopted "
                f"{figures['adopted']}; the hot path's gap to the bound on its snapshot "
                f"({figures['capacity_bounds']} of them the capacity relaxation's): "
                + (f"p50 {gap['p50']:.2%}, p90 {gap['p90']:.2%}, max {gap['max']:.2%}" if gap else "no bound")
            )
        whole = next((r for r in rows if r.policy == policy and r.day is None), None)
        if whole is not None and whole.realtime_moves:
            lines.append(
                f"{policy}: apps moved {whole.realtime_moves:.3f} GPUs per app-step, "
                f"{whole.realtime_idle_moves:.3f} of them for nothing (every GPU left stayed idle)"
            )
        if run.grants:
            given = [g for _, g in run.grants if g.added]
            back = [g for _, g in run.grants if g.released]
            lines.append(
                f"{policy}: {len(given)} reactive grants within their step, {sum(len(g.added) for g in given)} GPUs; "
                f"{len(back)} handed back idle, {sum(len(g.released) for g in back)} GPUs"
            )
        lost = mistakes(sim, run)
        if run.out_of_memory:
            lines.append(
                f"{policy}: {lost['out_of_memory_restarts']} out-of-memory restarts (jobs started below their "
                f"true GPUs), {lost['gpu_hours_lost']:g} GPU-hours held for nothing"
            )
        if lost["gpu_hours_beyond_need"]:
            lines.append(
                f"{policy}: {lost['gpu_hours_beyond_need']:g} GPU-hours held by jobs past their true GPUs "
                "(no value: they run no faster)"
            )
        refused = refusals(run)
        lines.append(f"{policy}: {len(refused)} inputs refused" + (f", first: {refused[0]}" if refused else ""))
    for policy, price in forecast_price(rows, sim).items():
        kept = "-" if price["gain_kept"] is None else f"{price['gain_kept']:.1%}"
        kept_objective = "-" if price["objective_gain_kept"] is None else f"{price['objective_gain_kept']:.1%}"
        ratio = "-" if price["shortfall_ratio"] is None else f"{price['shortfall_ratio']:.2f}x"
        steady = "-" if price["steady_shortfall_ratio"] is None else f"{price['steady_shortfall_ratio']:.2f}x"
        lines.append(
            f"{policy}: forecast-driven keeps {kept} of the oracle's value gain over fifo/oracle "
            f"({price['forecast_value']:.1f} vs {price['oracle_value']:.1f}, fifo {price['fifo_oracle_value']:.1f}) "
            f"and {kept_objective} of its objective gain ({price['forecast_objective']:.1f} vs "
            f"{price['oracle_objective']:.1f}, fifo {price['fifo_oracle_objective']:.1f}); "
            f"real-time shortfall {price['forecast_shortfall']} vs {price['oracle_shortfall']} ({ratio}), "
            f"of which at one-step spikes {price['forecast_spike_shortfall']} vs "
            f"{price['oracle_spike_shortfall']} ({steady} away from them)"
        )
        for part, known in price["known"].items():
            kept_known = "-" if known["objective_gain_kept"] is None else f"{known['objective_gain_kept']:.1%}"
            lines.append(
                f"{policy}: knowing every job's {KNOWN_WORDS[part]}, traffic as it comes: objective "
                f"{known['objective']:.1f} ({known['worth']:+.1f} on the forecast run's), real-time shortfall "
                f"{known['shortfall']}; forecast-driven keeps {kept_known} of its objective gain over fifo/oracle"
            )
    timely = (
        "timely value the real-time part of it and, for batch work, each finished job's completion value "
        "(priority x time_decay^JCT / (1 - time_decay): the completion value model)"
        if sim.config.value_model == COMPLETION
        else "timely value the same with each batch GPU-step discounted by the pool's time_decay per step since "
        "its job arrived"
    )
    lines.append(
        "queue and JCT in steps (a job never started waits to the run's end); value is undiscounted "
        f"priority x GPU-steps (real-time: served only), {timely}, objective the timely value less "
        "realtime_penalty x priority x real-time GPU-steps short; slowdown is JCT / run time, 'Jain jobs' "
        "Jain's index of it over jobs, 'Jain prio' over priority classes of its mean (1: alike)"
    )
    return "\n".join(lines)


def refusals(run: PolicyRun) -> list[str]:
    """What the pool refused: jobs decided `rejected` (a size no block fits, say) and events it
    could not act on (the agent's dead letters), each with its reason."""
    return [f"job {d.job_id!r} rejected: {d.reason}" for d in run.decisions if d.action == "rejected"] + [
        f"step {step}: {reason}" for step, reason in run.rejected
    ]


def as_json(rows: list[DayReport], sim: Simulation) -> dict:
    return {
        "steps": sim.steps,
        "gpus": sim.config.gpus,
        "drained": sim.drained,
        "cap": sim.cap,
        "rows": [asdict(r) for r in rows],
        "jobs": {p: asdict(measures(sim, run)) for p, run in sim.runs.items()},
        "offered_load": asdict(sim_offered_load(sim)),
        "full_mode": {p: full_mode_figures(run) for p, run in sim.runs.items() if run.full_mode_runs},
        "violations": {p: executed_violations(sim, run) for p, run in sim.runs.items()},
        "refused": {p: refusals(run) for p, run in sim.runs.items()},
        "forecast_price": forecast_price(rows, sim),
        "sizing": {p: mistakes(sim, run) for p, run in sim.runs.items()},
        "reactive_grants": {p: sum(1 for _, g in run.grants if g.added) for p, run in sim.runs.items()},
        "reactive_releases": {p: sum(1 for _, g in run.grants if g.released) for p, run in sim.runs.items()},
    }


def wait_chart(sim: Simulation, title: str) -> str:
    """`user_measures.wait_chart` of every run of `sim`."""
    return user_measures.wait_chart({p: measures(sim, run) for p, run in sim.runs.items()}, title)


def chart(rows: list[DayReport]) -> str:
    """Grouped bars: utilization and value per day, one colour per policy."""
    days = sorted({r.day for r in rows if r.day is not None})
    policies = list(dict.fromkeys(r.policy for r in rows))
    by = {(r.policy, r.day): r for r in rows}
    top_value = max((r.value for r in rows if r.day is not None), default=1) or 1
    panel, bar, gap = 180, 14, 40
    width = max(160 * len(policies) + 80, 90 + len(days) * (bar * len(policies) + 20))
    height = 2 * (panel + gap) + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    for k, (metric, scale, label) in enumerate(
        (("utilization", 1.0, "utilization"), ("value", top_value, "value per day"))
    ):
        y0 = 30 + k * (panel + gap)
        out.append(f'<text x="10" y="{y0 - 8}" font-weight="bold">{escape(label)}</text>')
        out.append(f'<line x1="60" y1="{y0 + panel}" x2="{width - 10}" y2="{y0 + panel}" stroke="#333"/>')
        for d, day in enumerate(days):
            x0 = 70 + d * (bar * len(policies) + 20)
            for p, policy in enumerate(policies):
                r = by.get((policy, day))
                if r is None:
                    continue
                h = panel * getattr(r, metric) / scale
                out.append(
                    f'<rect x="{x0 + p * bar}" y="{y0 + panel - h:.1f}" width="{bar - 2}" height="{h:.1f}" '
                    f'fill="{online_policy(base_policy(policy)).colour}"><title>{escape(policy)} day {day}: '
                    f"{getattr(r, metric):.3f}</title></rect>"
                )
            out.append(f'<text x="{x0}" y="{y0 + panel + 14}">day {day}</text>')
    for p, policy in enumerate(policies):
        x = 70 + p * 160
        out.append(
            f'<rect x="{x}" y="{height - 24}" width="12" height="12" fill="{online_policy(base_policy(policy)).colour}"/>'
            f'<text x="{x + 16}" y="{height - 14}">{escape(policy)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
