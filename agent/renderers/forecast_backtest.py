"""`gpualloc forecast backtest`: the forecasters' backtests on a trace, as tables or JSON."""

from __future__ import annotations

from gpualloc.forecasting.backtest import job_backtest, job_summary, traffic_backtest
from gpualloc.schemas.settings import ForecastSettings


def backtest(events: list, settings: ForecastSettings, share: float = 0.2) -> dict:
    """Both backtests' figures (a part is empty when the trace has nothing for it)."""
    return {
        "jobs": job_summary(job_backtest(events, settings), share),
        "traffic": traffic_backtest(events, settings),
        "settings": settings.model_dump(),
        "held_out_share": share,
    }


def table(result: dict) -> str:
    lines = []
    jobs = result["jobs"]
    if jobs["jobs"]:
        lines.append(
            f"jobs: the last {jobs['held_out']} of {jobs['jobs']} given by their features, sized at "
            "submission, learned from completions as they came"
        )
        head = (
            f"{'kind':<13} {'variant/algorithm':<18} {'jobs':>5}  {'MdAPE':>6}  {'in interval':>11}  "
            f"{'<= planned':>10}  {'GPUs right':>10}"
        )
        lines += [head, "-" * len(head)]
        for row in jobs["rows"] + [{"kind": "all", "group": "", **jobs["all"]}]:
            lines.append(
                f"{row['kind']:<13} {row['group']:<18} {row['jobs']:>5}  {_pct(row['duration_mdape']):>6}  "
                f"{_pct(row['interval_coverage']):>11}  {_pct(row['within_planned']):>10}  "
                f"{_pct(row['gpus_right']):>10}"
            )
        s = result["settings"]
        lines.append(
            f"interval: {s['interval']:.0%}; planned at the {s['training_quantile']:.0%} (training) and "
            f"{s['quantization_quantile']:.0%} (quantization) quantiles"
        )
    else:
        lines.append("jobs: none given by their features")
    traffic = result["traffic"]
    if traffic:
        lines.append("")
        lines.append(
            "traffic: from the third week on, each step forecast one step ahead, learning online as the agent does"
        )
        head = (
            f"{'app':<24} {'weeks':>5}  {'forecast under':>14} {'over':>6}  {'profile under':>13} {'over':>6}  "
            f"{'peak under':>10} {'over':>6}"
        )
        lines += [head, "-" * len(head)]
        for app, r in traffic.items():
            if not r["steps"]:
                lines.append(f"{app:<24} {r['note']}")
                continue
            prof = r["profile"] or {"under_share": None, "over_share": None}
            lines.append(
                f"{app:<24} {r['weeks']:>5}  {_pct(r['forecast']['under_share']):>14} "
                f"{_pct(r['forecast']['over_share']):>6}  {_pct(prof['under_share']):>13} "
                f"{_pct(prof['over_share']):>6}  {_pct(r['peak']['under_share']):>10} "
                f"{_pct(r['peak']['over_share']):>6}"
            )
        lines.append("under: share of steps planned below demand; over: GPUs planned above demand, as a share of it")
        lines += _calibration(traffic)
    else:
        lines.append("traffic: no app observed")
    return "\n".join(lines)


def _calibration(traffic: dict) -> list[str]:
    """Per app and quantile: the share of steps under (target 1 - q) and GPUs over, by lead."""
    scored = [(app, r) for app, r in traffic.items() if r["steps"] and r["quantiles"]]
    if not scored:
        return []
    leads = list(next(iter(scored[0][1]["quantiles"].values()))["by_lead"])
    head = f"{'app':<24} {'q':>5}  " + "  ".join(f"{'lead ' + lead + ' under':>14} {'over':>6}" for lead in leads)
    lines = ["", "calibration: each q's forecasts made 1 to 64 steps ahead", head, "-" * len(head)]
    for app, r in scored:
        for q, c in r["quantiles"].items():
            cells = "  ".join(
                f"{_pct(c['by_lead'][lead]['under_share']):>14} {_pct(c['by_lead'][lead]['over_share']):>6}"
                for lead in leads
            )
            lines.append(f"{app:<24} {q:>5}  {cells}")
    return lines


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"
