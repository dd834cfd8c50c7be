"""Fit the measured constants of the training physics (`gpualloc.forecasting.physics.Measured`)
to the real runs of `benchmarks/real`, and report each fit's leave-one-model-out errors: each
model's runs forecast by constants fitted without them (what a model the constants never saw
should expect).

    .venv/bin/pip install scipy && .venv/bin/python deploy/measure/fit_physics.py

Three fits, each least squares in log space: the allocated peak (bytes a token of activations and
logits by regime, eager attention's scores, Adafactor's temporaries), the reserve over it (with and
without checkpointing), the step time (achieved shares, the width they halve at, eager attention,
the optimizer's and dequantization's slowdowns, each layer's overhead). Prints `Measured(...)` to
paste into physics.py, and the errors.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from gpualloc.forecasting import physics
from gpualloc.forecasting.real_runs import real_run

REAL = Path(__file__).resolve().parents[2] / "benchmarks" / "real"
# the runs fitted to; gpualloc-h200-aside.jsonl is kept aside, never fitted to
FITTED = [REAL / "h200-runs.jsonl", REAL / "gpualloc-h200-runs.jsonl"]
MEMORY = ["act_width", "act_mlp", "logits", "eager_scores", "adafactor_copies"]
RESERVE = ["reserve", "reserve_checkpointed"]
TIME = ["achieved", "achieved_fp32", "width_half", "eager_attention", "optimizer_slowdown", "dequantize_slowdown"]
TIME += ["layer_seconds", "launch_seconds"]
REGIMES = ("mixed", "half", "fp32")


def records() -> list[dict]:
    """The runs that ran, each with its features (one optimizer step a micro-batch, as measured)."""
    out = []
    for path in FITTED:
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [dict(r, features=real_run(r, accumulation=1).features) for r in out if r["outcome"] == "ok"]


def flatten(k: physics.Measured, names: list[str]) -> list[float]:
    out: list[float] = []
    for name in names:
        value = getattr(k, name)
        out += [value[r] for r in REGIMES] if isinstance(value, dict) else [value]
    return out


def unflatten(k: physics.Measured, names: list[str], x: list[float]) -> physics.Measured:
    changes, i = {}, 0
    for name in names:
        if isinstance(getattr(k, name), dict):
            changes[name] = dict(zip(REGIMES, x[i : i + 3]))
            i += 3
        else:
            changes[name] = x[i]
            i += 1
    return dataclasses.replace(k, **changes)


def allocated(r: dict, k: physics.Measured) -> float:
    parts = physics.memory_parts_gb(r["features"], 1, k)
    return sum(parts.values()) - parts["runtime"]


def residuals(names: list[str], what: str, base: physics.Measured, runs: list[dict], x: list[float]) -> np.ndarray:
    k = unflatten(base, names, list(x))
    out = []
    for r in runs:
        if what == "allocated":
            out.append(math.log(max(allocated(r, k), 1e-3) / r["peak_allocated_gib"]))
        elif what == "reserved":
            needed = sum(physics.memory_parts_gb(r["features"], 1, k).values())
            out.append(math.log(needed / (r["peak_reserved_gib"] + r.get("cuda_context_gib", 0.6))))
        else:
            out.append(math.log(physics.step_seconds(r["features"], "h200-141gb", 1, k) / r["step_seconds"]))
    return np.array(out)


def fit(names: list[str], what: str, base: physics.Measured, runs: list[dict]) -> physics.Measured:
    x0 = flatten(base, names)
    solved = least_squares(lambda x: residuals(names, what, base, runs, x), x0, bounds=(0, np.inf))
    return unflatten(base, names, list(solved.x))


def fit_all(runs: list[dict], base: physics.Measured) -> physics.Measured:
    k = fit(MEMORY, "allocated", base, runs)
    k = fit(RESERVE, "reserved", k, runs)
    return fit(TIME, "time", k, runs)


def report(label: str, errors: list[float]) -> None:
    factors = [math.exp(e) - 1 for e in errors]
    print(
        f"{label}: median |error| {statistics.median(abs(e) for e in factors):.3f}, "
        f"more than 10% under {sum(e < -0.1 for e in factors)}/{len(factors)}, "
        f"more than 25% over {sum(e > 0.25 for e in factors)}/{len(factors)}, "
        f"range {min(factors):+.3f} to {max(factors):+.3f}"
    )


def main() -> None:
    runs = records()
    fitted = fit_all(runs, physics.MEASURED)
    print(fitted)
    for what in ("allocated", "reserved", "time"):
        names = {"allocated": MEMORY, "reserved": MEMORY + RESERVE, "time": TIME}[what]
        report(f"in sample, {what}", list(residuals(names, what, fitted, runs, flatten(fitted, names))))
    held_out: dict[str, list[float]] = {"reserved": [], "time": []}
    for model in sorted({r["model"] for r in runs}):
        k = fit_all([r for r in runs if r["model"] != model], fitted)
        mine = [r for r in runs if r["model"] == model]
        held_out["reserved"] += list(residuals([], "reserved", k, mine, []))
        held_out["time"] += list(residuals([], "time", k, mine, []))
    for what, errors in held_out.items():
        report(f"leave one model out, {what}", errors)
    spread = float(np.std(held_out["reserved"]))
    print(f"log spread of the needed memory's leave-one-model-out errors: {spread:.4f}")


if __name__ == "__main__":
    main()
