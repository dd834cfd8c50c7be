"""The real runs' section of `gpualloc bench forecast --real` as a table (from the bench's JSON)."""

from __future__ import annotations

from typing import Any


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _range(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{low:.2f}-{high:.2f}"


def table(result: dict[str, Any]) -> str:
    files = ", ".join(f"{source} {path}" for source, path in result["files"].items())
    out = [
        f"real runs on one H200 ({files}); pool of {result['pool_gpus']} GPUs, "
        f"{result['step_minutes']}-minute steps; memory at one GPU, error max(f/t, t/f) - 1",
    ]
    head = (
        f"  {'view':<24} {'runs':>4} {'ran':>4} {'oom':>3}  {'mem err':>7} {'below':>6} {'<-10%':>6} "
        f"{'>+25%':>6} {'f/need':>9}  {'oom@1':>5} {'count':>6} {'refused':>7}  {'time err':>8} {'f/hours':>9}"
    )
    out += [head, "  " + "-" * (len(head) - 2)]
    for view in result["views"].values():
        f = view["figures"]
        out.append(
            f"  {view['label']:<24} {f['runs']:>4} {f['ran']:>4} {f['oom']:>3}  "
            f"{_pct(f['memory_median_error']):>7} {_pct(f['memory_below_need']):>6} "
            f"{_pct(f['memory_under_10']):>6} {_pct(f['memory_over_25']):>6} "
            f"{_range(f['memory_ratio_min'], f['memory_ratio_max']):>9}  "
            f"{f['oom_given_one']:>2}/{f['oom']:<2} {_pct(f['count_right']):>6} {f['refused']:>7}  "
            f"{_pct(f['time_median_error']):>8} {_range(f['time_ratio_min'], f['time_ratio_max']):>9}"
        )
    out.append(
        "  below: forecast under the need; <-10% / >+25%: more than 10% under / 25% over; oom@1: runs that ran "
        "out of memory given one GPU; count: runs that ran given one GPU"
    )
    out.append("  leave one model out, per model")
    head = f"    {'model':<18} {'runs':>4} {'mem err':>7} {'below':>6} {'f/need':>9} {'time err':>8} {'oom@1':>5}"
    out.append(head)
    for model, f in result["leave_one_model_out_per_model"].items():
        out.append(
            f"    {model:<18} {f['runs']:>4} {_pct(f['memory_median_error']):>7} {_pct(f['memory_below_need']):>6} "
            f"{_range(f['memory_ratio_min'], f['memory_ratio_max']):>9} {_pct(f['time_median_error']):>8} "
            f"{f['oom_given_one']:>2}/{f['oom']:<2}"
        )
    out.append(
        "  per GPU type (cold; a run runs out where it needs more than the type's usable GiB, one that ran out on "
        "the H200 everywhere)"
    )
    head = (
        f"    {'GPU type':<14} {'usable':>7} {'runs out':>8} {'started there':>13} {'fit':>4} "
        f"{'refused there':>13} {'>1 GPU there':>12}  of them OOM on H200"
    )
    out.append(head)
    for gpu_type, g in result["gpu_types"].items():
        out.append(
            f"    {gpu_type:<14} {_num(g['usable_gib'], '.1f'):>7} {g['runs_out']:>8} {g['started_where_out']:>13} "
            f"{g['fits']:>4} {g['refused_where_fits']:>13} {g['more_than_one_where_fits']:>12}  "
            f"{g['of_them_oom_on_h200']}"
        )
    missed = [name for name, ok in result["targets"].items() if not ok]
    out.append(
        "  targets (cold): " + ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in result["targets"].items())
    )
    if missed:
        out.append("  missed: " + ", ".join(missed))
    return "\n".join(out)
