"""`gpualloc bench serving`: FIFO against the heuristic on the project's own serving and
generated traces, judged by the real-time targets: shortfall at most max(10, 1.5x FIFO's)
GPU-steps, timely value at least 1.2x FIFO's, completions at least FIFO's.

Four sets, all made here from their seeds: `tuned` (the traces changes to the real-time
path were measured on while they were made), `held-out` (run after a choice, never to make
one; two of its traces were since read to find a cause), `unseen` (other seeds, pool sizes
and app counts, never read: each change is judged there, before and after, once) and
`independent` (another author's generator, `generators/heldout_genai.py`, never tuned on). Each trace runs whole (every job until it finishes), so every submitted job is counted.
Settings come as `gpualloc simulate` takes them (--settings, GPUALLOC_SIMULATION__..., e.g.
GPUALLOC_SIMULATION__FORECAST__REALTIME_PRICED=false for the fixed headroom quantile).

Each run also reports every app's served share of its demand (`report.served_share`, whole run
and per day) beside the GPU-hours it held and of them those idle (held past its demand), so a
policy cannot look better at serving by holding more; `strip` runs the traces with apps that
register without a `profile` (the first app of each trace, or all of them)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal

from gpualloc.generators import heldout_genai
from gpualloc.generators.serving import serving_trace
from gpualloc.generators.traces import generate_trace
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.settings import SimulationSettings
from gpualloc.solvers.simulation.report import DayReport, executed_violations, held_over_step, served_share, whole_run
from gpualloc.solvers.simulation.results import PolicyRun, Simulation
from gpualloc.solvers.simulation.simulator import SimOptions, simulate
from gpualloc.solvers.simulation.user_measures import UserMeasures, measures

Strip = Literal["none", "first", "all"]  # which apps register without a `profile`
SERVED = 0.99  # the served share every app should have every day (the default's target)
SERVED_RESERVED = 0.997  # ...and with `forecast.realtime_node_reserve`


@dataclass(frozen=True)
class Trace:
    # "serving" (generators/serving.py), "generate" (generators/traces.py, three days) or "genai"
    # (generators/heldout_genai.py: 32 GPUs, three days; `gpus` and `apps` are the generator's own)
    kind: str
    gpus: int
    seed: int
    apps: int = 3

    @property
    def name(self) -> str:
        apps = "" if self.apps == 3 or self.kind == "genai" else f" {self.apps} apps"
        return f"{self.kind} {self.gpus} GPUs{apps} seed {self.seed}"

    def events(self, strip: Strip = "none") -> list[dict[str, Any]]:
        """The trace's envelopes, made from its seed (as `gpualloc trace serving|generate` writes
        them); `strip`: the first app's registration, or every app's, without its `profile`."""
        if self.kind == "serving":
            made = serving_trace(self.seed, 3, self.gpus, apps=self.apps)
        elif self.kind == "genai":
            made = heldout_genai.generate(self.seed)[0]
        else:
            made = generate_trace(self.gpus, 3, 150 * self.gpus // 32, self.apps, self.seed)
        return without_profiles(made, strip)


def without_profiles(events: list[dict[str, Any]], strip: Strip) -> list[dict[str, Any]]:
    """`events` with the `profile` left out of the first `app.registered` (`first`) or of each (`all`)."""
    out, stripped = [], 0
    for e in events:
        if e["type"] == "app.registered" and (strip == "all" or (strip == "first" and not stripped)):
            stripped += 1
            e = {**e, "payload": {k: v for k, v in e["payload"].items() if k != "profile"}}
        out.append(e)
    return out


SETS: dict[str, tuple[Trace, ...]] = {
    "tuned": (
        *(Trace("serving", 32, s) for s in (0, 1, 2, 3, 4, 5, 6, 7, 9)),
        Trace("serving", 64, 1),
        Trace("serving", 16, 1),
        *(Trace("serving", 32, s, apps) for s in (100, 101, 102, 103) for apps in (1, 2)),
        *(Trace("generate", 32, s) for s in (1, 2, 3, 4, 5, 7)),
        Trace("generate", 64, 9),
    ),
    "held-out": (
        *(Trace("serving", 32, s) for s in (20, 21, 22, 40, 41, 42, 43)),
        Trace("serving", 24, 24),
        Trace("serving", 48, 44),
        Trace("serving", 64, 23, 5),
        Trace("generate", 32, 20),
        Trace("generate", 32, 21),
        Trace("generate", 64, 22, 4),
    ),
    "unseen": (
        *(Trace("serving", 32, s) for s in range(200, 210)),
        *(Trace("serving", 32, s, 2) for s in range(210, 216)),
        *(Trace("serving", 32, s, 1) for s in range(216, 219)),
        Trace("serving", 48, 220),
        Trace("serving", 64, 221, 5),
        Trace("serving", 24, 222),
        Trace("serving", 16, 223),
        Trace("serving", 128, 224, 6),
        Trace("generate", 32, 225),
        Trace("generate", 32, 226),
        Trace("generate", 64, 227, 4),
    ),
    "independent": tuple(Trace("genai", 32, s) for s in range(1, 9)),
}


@dataclass(frozen=True)
class Judged:
    trace: str
    fifo: DayReport
    heuristic: DayReport
    violations: int = 0  # online rules either run broke (`report.executed_violations`)
    # per run ("fifo", "heuristic"), per app: `report.served_share`'s whole, days and worst_day,
    # with held_gpu_hours, idle_gpu_hours and ceiling_days (`app_service`)
    served: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # per run ("fifo", "heuristic"): what users read of its jobs (`user_measures.measures`)
    users: dict[str, UserMeasures] = field(default_factory=dict)

    def least_share(self, run: str = "heuristic") -> float | None:
        """The least served share any app had on any day of `run` (None: no app)."""
        return min(
            (s["worst_day"] for s in self.served.get(run, {}).values() if s["worst_day"] is not None), default=None
        )

    def app_days(self, run: str = "heuristic") -> list[float]:
        """Every app's share on every day with demand."""
        return [d for s in self.served.get(run, {}).values() for d in s["days"] if d is not None]

    def served_met(self, share: float, run: str = "heuristic") -> bool:
        """Every app served at least `share` of its demand on every day."""
        return all(d >= share for d in self.app_days(run))

    def least_ceiling(self) -> float | None:
        """The least share of an app's demand on a day that lay within its `max_gpus`: the most
        of it any run could serve (None: no app)."""
        ceilings = [c for s in self.served.get("fifo", {}).values() for c in s["ceiling_days"] if c is not None]
        return min(ceilings, default=None)

    def servable(self, share: float) -> bool:
        """Some run could serve every app `share` of its demand every day (`least_ceiling`)."""
        least = self.least_ceiling()
        return least is None or least >= share

    @property
    def shortfall_met(self) -> bool:
        return self.heuristic.realtime_shortfall <= max(10.0, 1.5 * self.fifo.realtime_shortfall)

    @property
    def all_met(self) -> bool:
        return (
            self.shortfall_met
            and self.heuristic.timely_value >= 1.2 * self.fifo.timely_value
            and self.heuristic.completed >= self.fifo.completed
        )


def app_service(sim: Simulation, run: PolicyRun) -> dict[str, dict[str, Any]]:
    """Per app: `served_share` (whole, days, worst_day), the GPU-hours it held through
    `Simulation.apps_until` and of them those idle: held less served (share x demand); and its
    `ceiling_days`: per day, the share of its demand within its `max_gpus`, the most any run serves."""
    per_day, minutes, held = 24 * 60 // sim.config.step_minutes, sim.config.step_minutes, held_over_step(run)
    # app -> GPU-minutes held, and per day [GPU-minutes of demand, of it within max_gpus]
    hours: dict[str, float] = dict.fromkeys(sim.demand, 0.0)
    days: dict[str, list[list[float]]] = {app: [] for app in sim.demand}
    for k, commit in enumerate(run.commits):
        if sim.apps_until is not None and commit.step > sim.apps_until:
            break
        for app in sim.demand:
            hours[app] += _integral(
                held.get((commit.step, app)) or [(0.0, len(commit.assignments.get(app, ())))], minutes
            )
            need = sim.within.get((app, commit.step)) or [(0.0, sim.demand[app][commit.step])]
            while len(days[app]) <= k // per_day:
                days[app].append([0.0, 0.0])
            days[app][k // per_day][0] += _integral(need, minutes)
            days[app][k // per_day][1] += _integral([(at, min(n, sim.limits[app][1])) for at, n in need], minutes)
    out = {}
    for app, share in served_share(sim, run).items():
        demand_minutes = sum(d for d, _ in days[app])
        served = float(share["whole"] or 0.0) * demand_minutes  # type: ignore[arg-type]
        out[app] = {
            **share,
            "held_gpu_hours": round(hours[app] / 60, 2),
            "idle_gpu_hours": round(max(0.0, hours[app] - served) / 60, 2),
            "ceiling_days": [round(c / d, 4) if d else None for d, c in days[app]],
        }
    return out


def _integral(pieces: list[tuple[float, int]], minutes: int) -> float:
    """GPU-minutes over a step of `minutes` of a count given from each minute on."""
    ends = [at for at, _ in pieces[1:]] + [float(minutes)]
    return sum(n * (end - at) for (at, n), end in zip(pieces, ends))


def options(settings: SimulationSettings) -> SimOptions:
    """FIFO and the heuristic, with `settings` (the CLI's: flags, GPUALLOC_* variables, file)."""
    return SimOptions(
        policies=("fifo", "heuristic"), forecast_settings=settings.forecast, replan_work=settings.replan_work
    )


def judge(trace: Trace, run_with: SimOptions, strip: Strip = "none") -> Judged:
    """The trace run whole by FIFO and the heuristic: each run's whole-run row, the online
    rules the runs broke, and each app's service (`app_service`)."""
    sim = simulate([parse_event(e) for e in trace.events(strip)], run_with)
    fifo, heuristic = sim.runs["fifo"], sim.runs["heuristic"]
    broken = len(executed_violations(sim, fifo)) + len(executed_violations(sim, heuristic))
    served = {"fifo": app_service(sim, fifo), "heuristic": app_service(sim, heuristic)}
    users = {"fifo": measures(sim, fifo), "heuristic": measures(sim, heuristic)}
    return Judged(trace.name, whole_run(sim, fifo), whole_run(sim, heuristic), broken, served, users)


def run_serving_targets(
    names: list[str],
    run_with: SimOptions,
    progress: Callable[[str], None] | None = None,
    strip: Strip = "none",
) -> dict[str, list[Judged]]:
    """Every trace of the sets `names`, judged; `progress(trace)` after each."""
    out: dict[str, list[Judged]] = {}
    for name in names:
        out[name] = []
        for trace in SETS[name]:
            out[name].append(judge(trace, run_with, strip))
            if progress:
                progress(trace.name)
    return out


def summary(rows: list[Judged]) -> dict[str, Any]:
    """What a set's rows add up to: traces meeting the shortfall target and all three, the
    heuristic's objective and shortfall summed (FIFO's beside them), moves per app-step averaged;
    apps' service: traces whose every app had at least 99% (and 99.7%) of its demand every day
    (and those whose apps' `max_gpus` leave 99% servable at all),
    the share of app-days at 99% or more, the least and the mean app-day share, and the idle GPU-hours apps held."""
    n = len(rows)
    days = {run: [d for r in rows for d in r.app_days(run)] for run in ("heuristic", "fifo")}
    least = {run: [s for r in rows if (s := r.least_share(run)) is not None] for run in ("heuristic", "fifo")}
    return {
        "traces": n,
        "all_targets_met": sum(r.all_met for r in rows),
        "shortfall_target_met": sum(r.shortfall_met for r in rows),
        "objective": round(sum(r.heuristic.objective for r in rows), 1),
        "fifo_objective": round(sum(r.fifo.objective for r in rows), 1),
        "shortfall": round(sum(r.heuristic.realtime_shortfall for r in rows), 1),
        "fifo_shortfall": round(sum(r.fifo.realtime_shortfall for r in rows), 1),
        "moves": round(sum(r.heuristic.realtime_moves for r in rows) / n, 4) if n else 0.0,
        "idle_moves": round(sum(r.heuristic.realtime_idle_moves for r in rows) / n, 4) if n else 0.0,
        "servable_99": sum(r.servable(SERVED) for r in rows),
        "served_99": sum(r.served_met(SERVED) for r in rows),
        "served_99_7": sum(r.served_met(SERVED_RESERVED) for r in rows),
        "fifo_served_99": sum(r.served_met(SERVED, "fifo") for r in rows),
        "app_days_99": round(sum(d >= SERVED for d in days["heuristic"]) / len(days["heuristic"]), 4)
        if days["heuristic"]
        else None,
        "fifo_app_days_99": round(sum(d >= SERVED for d in days["fifo"]) / len(days["fifo"]), 4)
        if days["fifo"]
        else None,
        "least_share": min(least["heuristic"], default=None),
        "fifo_least_share": min(least["fifo"], default=None),
        "mean_share": round(statistics.fmean(days["heuristic"]), 4) if days["heuristic"] else None,
        "fifo_mean_share": round(statistics.fmean(days["fifo"]), 4) if days["fifo"] else None,
        "idle_gpu_hours": round(sum(_idle(r, "heuristic") for r in rows), 1),
        "fifo_idle_gpu_hours": round(sum(_idle(r, "fifo") for r in rows), 1),
        "ratio_traces": len(_ratios(rows, "wait")),
        "wait_mean_over_fifo_median": round(statistics.median(ratios), 2)
        if (ratios := _ratios(rows, "wait"))
        else None,
        "jct_mean_over_fifo_median": round(statistics.median(ratios), 2) if (ratios := _ratios(rows, "jct")) else None,
        "misses": [r.trace for r in rows if not r.all_met],
    }


def table(sets: dict[str, list[Judged]]) -> str:
    """A line a trace and a summary a set."""
    lines = []
    for name, rows in sets.items():
        lines += [
            f"{name}:",
            f"{'trace':<32} {'objective':>9} {'fifo':>9} {'short':>7} {'fifo':>7} {'timely':>7} "
            f"{'done/fifo':>9} {'moves':>6} {'idle':>6} {'served':>7} {'fifo':>7} {'ceiling':>7} "
            f"{'wait':>11} {'JCT':>11}",
            *(_line(r) for r in rows),
            ", ".join(f"{k} {v}" for k, v in summary(rows).items() if k != "misses"),
            "",
        ]
    return "\n".join(lines)


def as_dict(sets: dict[str, list[Judged]]) -> dict[str, Any]:
    """Each set's summary and every trace's rows."""
    return {
        name: {
            "summary": summary(rows),
            "traces": {
                r.trace: {
                    "fifo": asdict(r.fifo),
                    "heuristic": asdict(r.heuristic),
                    "served": r.served,
                    "violations": r.violations,
                    "users": {run: asdict(m) for run, m in r.users.items()},
                }
                for r in rows
            },
        }
        for name, rows in sets.items()
    }


def _ratios(rows: list[Judged], figure: str) -> list[float]:
    """Per trace where both runs finished every job they kept (FIFO holds its apps' reservations
    past the trace's last event and can leave jobs unstarted at the cap, whose times would then
    be the cap's), the heuristic's mean `figure` ("wait" or "jct") over FIFO's, where FIFO's is
    not 0."""
    out = []
    for r in rows:
        if not r.users or any(m.unfinished for m in r.users.values()):
            continue
        fifo, heuristic = getattr(r.users["fifo"], figure), getattr(r.users["heuristic"], figure)
        if fifo and fifo["mean"]:
            out.append(heuristic["mean"] / fifo["mean"])
    return out


def _idle(r: Judged, run: str) -> float:
    return float(sum(s["idle_gpu_hours"] for s in r.served.get(run, {}).values()))


def _means(r: Judged, figure: str) -> str:
    """The heuristic's and FIFO's mean `figure` (steps), as "h/f"."""
    if not r.users:
        return "-"
    h, f = getattr(r.users["heuristic"], figure), getattr(r.users["fifo"], figure)
    return f"{h['mean']:g}/{f['mean']:g}" if h and f else "-"


def _share(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _line(r: Judged) -> str:
    h, f = r.heuristic, r.fifo
    verdict = "met" if r.all_met else "shortfall missed" if not r.shortfall_met else "missed"
    if r.violations:
        verdict += f", {r.violations} VIOLATIONS"
    return (
        f"{r.trace:<32} {h.objective:>9.1f} {f.objective:>9.1f} {h.realtime_shortfall:>7.1f} "
        f"{f.realtime_shortfall:>7.1f} {h.timely_value / f.timely_value if f.timely_value else 0:>6.2f}x "
        f"{h.completed:>4}/{f.completed:<4} {h.realtime_moves:>6.3f} {h.realtime_idle_moves:>6.3f} "
        f"{_share(r.least_share()):>7} {_share(r.least_share('fifo')):>7} {_share(r.least_ceiling()):>7} "
        f"{_means(r, 'wait'):>11} {_means(r, 'jct'):>11}  {verdict}"
    )
