"""Held-out generator of "GenAI-like" clusters (issue 43): three days of a 32-GPU pool in nodes
of 8, as contract input events for `gpualloc simulate` and `gpualloc bench serving --set independent`.

Why held out: it was written without reading the planner, the forecasters or the project's other
generators, from the event contract alone, so that its traces judge the real-time path on a
cluster nobody tuned it for. Never tune on these traces; use them only to judge a change.

  pool.configured   32 GPUs, nodes of 8, 30-minute steps, horizon 48 steps (24 h), h100-80gb
  app.registered    1-3 real-time inference apps (priority 5-10, min 1-2, max 8-12, swap cap 2-4)
  traffic.observed  requests_per_s every 5 minutes per app: a daily curve with noise, gaps of an
                    hour or more without observations, and at least one spike (3-6x the usual
                    level for 5-25 minutes, inside one step)
  job.submitted     ~100-200 batch jobs (fine-tuning, training, evaluation, quantization) with
                    gpus + duration (the user's estimate), features for training/quantization,
                    and actual_duration / actual_used (the truth, for the simulator); run times
                    heavy-tailed (lognormal, Pareto for continued pre-training)
  job.cancelled     ~10-16% of jobs, some soon after submission, some late (likely running),
                    always before the job could have finished
  node.status       one node down for 3-8 hours on day 2 or 3, then up again

Standard library only; deterministic per seed.
Usage: python -m gpualloc.generators.heldout_genai --seed S --out FILE [--summary]
"""

from __future__ import annotations

import argparse
import json
import math
import random
from datetime import datetime, timedelta, timezone
from typing import Any

# --- pool ---------------------------------------------------------------------------------
GPUS = 32
GPUS_PER_NODE = 8
NODES = GPUS // GPUS_PER_NODE
STEP_MIN = 30
HORIZON = 48  # 24 h of 30-minute steps
DAYS = 3
SPAN_S = DAYS * 24 * 3600
GPU_TYPE = "h100-80gb"
GPU_MEM = 79.1  # GiB a framework can use of an H100 80GB
PEAK_TFLOPS = 989.0  # H100 SXM dense bf16
T0 = datetime(2026, 3, 2, 0, 0, 0, tzinfo=timezone.utc)  # a Monday, midnight UTC
POOL = "genai"
OBS_EVERY_S = 300  # traffic observation interval

# --- models (name, params_b, layers, hidden, heads, kv_heads, intermediate, vocab) ----------
MODELS = {
    "llama-1b": (1.24, 16, 2048, 32, 8, 8192, 128256),
    "llama-3b": (3.2, 28, 3072, 24, 8, 8192, 128256),
    "mistral-7b": (7.2, 32, 4096, 32, 8, 14336, 32000),
    "llama-8b": (8.0, 32, 4096, 32, 8, 14336, 128256),
    "qwen-14b": (14.7, 48, 5120, 40, 8, 13824, 152064),
    "qwen-32b": (32.5, 64, 5120, 40, 8, 27648, 152064),
    "llama-70b": (70.6, 80, 8192, 64, 8, 28672, 128256),
}


def iso(sec: int) -> str:
    return (T0 + timedelta(seconds=sec)).strftime("%Y-%m-%dT%H:%M:%SZ")


def step_floor_s(sec: float) -> int:
    return int(sec // (STEP_MIN * 60)) * STEP_MIN * 60


# --- durations (pool steps of 30 minutes), heavy-tailed --------------------------------------
def lognormal_steps(rng: random.Random, median: float, sigma: float, hi: int) -> int:
    return max(1, min(hi, math.ceil(median * math.exp(rng.gauss(0.0, sigma)))))


def pareto_steps(rng: random.Random, xm: float, alpha: float, hi: int) -> int:
    return max(1, min(hi, math.ceil(xm * rng.paretovariate(alpha))))


# --- jobs ----------------------------------------------------------------------------------
def training_features(
    rng: random.Random, model: str, variant: str, gpus: int, actual_steps: int
) -> tuple[dict[str, Any], int]:
    """Features whose token count matches the job's true run time (with an MFU the run got)."""
    p, layers, hidden, heads, kv, inter, vocab = MODELS[model]
    seq_len = rng.choice([2048, 4096, 4096, 8192])
    micro = rng.choice([1, 1, 2, 4])
    global_batch = micro * gpus * rng.choice([4, 8, 16, 32])
    if variant in ("lora", "qlora", "dora"):
        flop_per_param_token = 4.0 * (1.3 if variant == "qlora" else 1.0)
    elif variant == "dpo":
        flop_per_param_token = 8.0
    else:
        flop_per_param_token = 6.0
    mfu = rng.uniform(0.28, 0.45)
    seconds = actual_steps * STEP_MIN * 60 * rng.uniform(0.85, 1.0)  # setup eats a little
    tokens = seconds * gpus * PEAK_TFLOPS * 1e12 * mfu / (flop_per_param_token * p * 1e9)
    epochs = 1 if variant == "cpt" else rng.choice([1, 1, 2, 3])
    f = {
        "variant": variant,
        "params_b": p,
        "layers": layers,
        "hidden_size": hidden,
        "seq_len": seq_len,
        "dataset_tokens_m": round(max(0.01, tokens / epochs / 1e6), 2),
        "epochs": epochs,
        "global_batch": global_batch,
        "micro_batch": micro,
        "precision": "bf16",
        "optimizer": rng.choice(["adamw", "adamw", "adamw_8bit"]) if variant != "cpt" else "adamw",
        "gradient_checkpointing": p >= 7 or variant in ("full", "cpt", "dpo"),
        "zero_stage": 3 if gpus > 1 and variant in ("full", "cpt", "dpo") else (2 if gpus > 1 else 0),
        "flash_attention": True,
        "vocab_size": vocab,
        "intermediate_size": inter,
        "attention_heads": heads,
        "kv_heads": kv,
    }
    if variant in ("lora", "qlora", "dora"):
        f["lora_rank"] = rng.choice([8, 16, 32, 64])
        f["lora_targets"] = rng.choice(["attention", "attention_mlp", "all_linear"])
    if variant == "dpo":
        f["reference_model"] = True
    opt_steps = max(1, int(tokens / (global_batch * seq_len)))
    return f, opt_steps


def make_job(rng: random.Random, n: int, t_submit: int) -> dict[str, Any]:
    r = rng.random()
    if r < 0.45:  # fine-tuning
        variant, model, gpus = rng.choice(
            [
                ("lora", "llama-8b", 1),
                ("lora", "mistral-7b", 1),
                ("lora", "llama-3b", 1),
                ("qlora", "qwen-14b", 1),
                ("qlora", "qwen-32b", 1),
                ("qlora", "llama-70b", 2),
                ("dora", "llama-8b", 1),
                ("lora", "qwen-14b", 2),
                ("lora", "qwen-32b", 4),
                ("full", "llama-1b", 1),
                ("full", "llama-3b", 2),
                ("full", "llama-8b", 4),
                ("full", "llama-8b", 8),
                ("full", "qwen-14b", 8),
                ("dpo", "llama-8b", 8),
                ("full", "qwen-32b", 16),
            ]
        )
        # the 16-GPU full fine-tune is rare: re-draw most of the time
        if gpus == 16 and rng.random() < 0.6:
            variant, model, gpus = "full", "llama-8b", 8
        actual = lognormal_steps(rng, 3.0, 1.0, 96)
        kind, tag = "training", "ft"
    elif r < 0.55:  # (continued pre-)training: long, Pareto tail
        model, gpus = rng.choice(
            [
                ("llama-1b", 4),
                ("llama-1b", 8),
                ("llama-3b", 4),
                ("llama-3b", 8),
                ("llama-8b", 8),
                ("llama-8b", 16),
            ]
        )
        variant = "cpt"
        actual = pareto_steps(rng, 5.0, 1.4, 96)
        kind, tag = "training", "train"
    elif r < 0.85:  # evaluation / offline batch inference
        model, gpus = rng.choice(
            [
                ("llama-8b", 1),
                ("mistral-7b", 1),
                ("llama-3b", 1),
                ("qwen-14b", 1),
                ("qwen-14b", 2),
                ("qwen-32b", 2),
                ("qwen-32b", 4),
                ("llama-70b", 4),
                ("llama-70b", 8),
            ]
        )
        variant = None
        actual = lognormal_steps(rng, 2.0, 0.9, 24)
        kind, tag = "batch_inference", "eval"
    else:  # quantization
        model, gpus = rng.choice(
            [
                ("llama-8b", 1),
                ("mistral-7b", 1),
                ("qwen-14b", 1),
                ("qwen-32b", 1),
                ("qwen-32b", 2),
                ("llama-70b", 2),
                ("llama-70b", 4),
            ]
        )
        variant = None
        actual = lognormal_steps(rng, 2.0, 0.6, 12)
        kind, tag = "quantization", "quant"

    job_id = f"{tag}-{model}-{n:03d}"
    priority = rng.choices(range(1, 11), weights=[6, 8, 10, 12, 14, 12, 10, 8, 6, 4])[0]
    # the user's estimate: usually padded, sometimes short
    declared = max(1, min(100000, math.ceil(actual * math.exp(rng.gauss(0.2, 0.35)))))
    peak = round(GPU_MEM * rng.uniform(0.45, 0.93), 1)
    payload: dict[str, Any] = {"id": job_id, "kind": kind, "priority": priority, "gpus": gpus, "duration": declared}
    used: dict[str, Any] = {"gpus": gpus, "duration": actual, "peak_memory_gb": peak}
    if kind == "training" and variant is not None:
        feats, opt_steps = training_features(rng, model, variant, gpus, actual)
        payload["features"] = feats
        used["steps"] = opt_steps
    elif kind == "quantization":
        algo, bits = rng.choice(
            [("awq", 4), ("gptq", 4), ("gptq", 8), ("smoothquant", 8), ("fp8", 8), ("bnb_nf4", 4), ("gguf_k", 5)]
        )
        qf: dict[str, Any] = {
            "params_b": MODELS[model][0],
            "algorithm": algo,
            "bits": bits,
            "calibration_samples": rng.choice([128, 256, 512, 1024]),
            "seq_len": 2048,
        }
        if algo in ("awq", "gptq"):
            qf["group_size"] = 128
        payload["features"] = qf
        used["steps"] = qf["calibration_samples"]
    payload["actual_duration"] = actual
    payload["actual_used"] = used
    return payload


def job_arrivals(rng: random.Random, count: int) -> list[int]:
    """Arrival seconds over three days, busier in working hours (UTC 7-20), every day alike."""

    def rate(sec: float) -> float:
        h = (sec / 3600.0) % 24
        return 1.0 + 1.6 * math.exp(-(((h - 13.5) / 4.0) ** 2))

    out = []
    # a small backlog at the start
    for _ in range(rng.randint(3, 6)):
        out.append(rng.randint(60, 900))
    while len(out) < count:
        s = rng.uniform(900, SPAN_S - 1800)
        if rng.random() * 2.6 < rate(s):
            out.append(int(s))
    return sorted(out)


# --- real-time apps and their traffic --------------------------------------------------------
APP_NAMES = ["chat-assistant", "code-completion", "rag-search"]


def make_apps(rng: random.Random) -> list[dict[str, Any]]:
    apps = []
    n = rng.randint(1, 3)
    for i, name in enumerate(rng.sample(APP_NAMES, n)):
        max_g = rng.randint(8, 12)
        min_g = rng.randint(1, 2)
        rps_per_gpu = float(rng.choice([12, 20, 35, 50, 80]))
        trough = rng.uniform(0.8, 2.0)  # GPUs needed at night
        peak = rng.uniform(4.0, min(8.0, max_g - 1.5))  # GPUs needed at the daily peak
        peak_hour = rng.uniform(12.0, 19.0)  # UTC
        apps.append(
            {
                "id": name,
                "priority": rng.randint(5, 10),
                "min_gpus": min_g,
                "max_gpus": max_g,
                "swap_cap": rng.randint(2, 4),
                "rps_per_gpu": rps_per_gpu,
                "trough": trough,
                "peak": peak,
                "peak_hour": peak_hour,
                "offset_s": 11 + 17 * i,  # observation phase within the 5-minute tick
                "with_profile": rng.random() < 0.5,
            }
        )
    return apps


def level_gpus(app: dict[str, Any], sec: float) -> float:
    h = (sec / 3600.0) % 24
    shape = 0.5 * (1 + math.cos(2 * math.pi * (h - app["peak_hour"]) / 24))
    return float(app["trough"] + (app["peak"] - app["trough"]) * shape**1.5)


def traffic_events(
    rng: random.Random, app: dict[str, Any], spike: bool
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, int]], dict[str, Any] | None]:
    """(seconds, payload) observations, plus a description of its gaps and spike."""
    ticks = list(range(app["offset_s"], SPAN_S, OBS_EVERY_S))
    # gaps: 1-3 stretches of 60-240 minutes with no observations at all
    gaps: list[tuple[int, int]] = []
    for _ in range(rng.randint(1, 3)):
        for _try in range(50):
            length = rng.randint(12, 48) * OBS_EVERY_S
            start = rng.randint(2 * 3600, SPAN_S - length - 3600)
            if all(start + length + 3600 < a or b + 3600 < start for a, b in gaps):
                gaps.append((start, start + length))
                break
    # spike: 1-5 observations (5-25 minutes) inside one step, 3-6x the usual level
    spike_info = None
    if spike:
        for _try in range(200):
            step0 = rng.randint(2, DAYS * 48 - 2) * STEP_MIN * 60
            k = rng.randint(1, 5)
            first = rng.randint(0, 6 - k)
            s0 = step0 + app["offset_s"] + first * OBS_EVERY_S
            s1 = s0 + (k - 1) * OBS_EVERY_S
            if s1 >= step0 + STEP_MIN * 60:
                continue
            if any(not (s1 + 3600 < a or b + 3600 < s0) for a, b in gaps):
                continue
            spike_info = {"start": s0, "end": s1, "mult": rng.uniform(3.0, 6.0), "obs": k}
            break
    # noise: AR(1) in logs plus white noise
    ar, phi, out = 0.0, 0.9, []
    for t in ticks:
        ar = phi * ar + rng.gauss(0.0, 0.05)
        if any(a <= t < b for a, b in gaps):
            continue
        g = level_gpus(app, t) * math.exp(ar + rng.gauss(0.0, 0.06))
        if spike_info and spike_info["start"] <= t <= spike_info["end"]:
            g *= spike_info["mult"]
        rps = round(max(0.0, g * app["rps_per_gpu"]), 2)
        out.append((t, {"app": app["id"], "requests_per_s": rps}))
    return out, gaps, spike_info


# --- the trace -------------------------------------------------------------------------------
def generate(seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rng = random.Random(seed)
    events = []  # (sec, order, type, event_id suffix, payload)
    order = 0

    def add(sec: int, typ: str, eid: str, payload: dict[str, Any]) -> None:
        nonlocal order
        events.append((sec, order, typ, eid, payload))
        order += 1

    add(
        0,
        "pool.configured",
        "pool-configured",
        {
            "gpus": GPUS,
            "gpus_per_node": GPUS_PER_NODE,
            "horizon": HORIZON,
            "step_minutes": STEP_MIN,
            "time_decay": 0.95,
            "realtime_penalty": 8.0,
            "swap_cap": 2,
            "gpu_type": GPU_TYPE,
        },
    )

    apps = make_apps(rng)
    spiky = set(a["id"] for a in apps if rng.random() < 0.4)
    if not spiky:
        spiky.add(rng.choice(apps)["id"])
    summary: dict[str, Any] = {"seed": seed, "step_minutes": STEP_MIN, "apps": [], "jobs": 0, "cancelled": []}
    for i, app in enumerate(apps):
        reg = {k: app[k] for k in ("id", "priority", "min_gpus", "max_gpus", "swap_cap", "rps_per_gpu")}
        if app["with_profile"]:
            reg["profile"] = [min(app["max_gpus"], math.ceil(level_gpus(app, h * 3600 + 1800))) for h in range(24)]
        add(1 + i, "app.registered", f"app-registered:{app['id']}", reg)
        obs, gaps, spike = traffic_events(rng, app, app["id"] in spiky)
        for j, (t, p) in enumerate(obs):
            add(t, "traffic.observed", f"traffic:{app['id']}:{j}", p)
        summary["apps"].append(
            {
                "id": app["id"],
                "priority": app["priority"],
                "min": app["min_gpus"],
                "max": app["max_gpus"],
                "swap_cap": app["swap_cap"],
                "rps_per_gpu": app["rps_per_gpu"],
                "observations": len(obs),
                "gaps_h": [(round(a / 3600, 2), round((b - a) / 3600, 2)) for a, b in gaps],
                "spike": None
                if spike is None
                else {
                    "at_h": round(spike["start"] / 3600, 2),
                    "observations": spike["obs"],
                    "x": round(spike["mult"], 1),
                },
            }
        )

    # jobs
    count = rng.randint(110, 190)
    for n, t in enumerate(job_arrivals(rng, count)):
        job = make_job(rng, n, t)
        add(t, "job.submitted", f"job-submitted:{job['id']}", job)
        summary["jobs"] += 1
        if rng.random() < 0.13:
            # latest safe moment: before the job could possibly have finished (it starts at the
            # earliest in its submission's step and then runs actual_duration steps)
            deadline = step_floor_s(t) + job["actual_duration"] * STEP_MIN * 60 - 120
            if deadline - t < 300:
                continue
            if rng.random() < 0.5:
                when = t + rng.randint(120, min(deadline - t, 3600))  # soon: likely still queued
                how = "early"
            else:
                lo = t + (deadline - t) // 2
                when = rng.randint(lo, deadline)  # late: likely running
                how = "late"
            if when >= SPAN_S - 60:
                continue
            add(
                when,
                "job.cancelled",
                f"job-cancelled:{job['id']}",
                {"id": job["id"], "detail": f"cancelled by user ({how})"},
            )
            summary["cancelled"].append((job["id"], how, round(when / 3600, 2)))

    # node outage on day 2 or 3
    node = rng.randrange(NODES)
    dur = rng.randint(3 * 12, 8 * 12) * 300  # 3-8 hours
    down = rng.randint(24 * 3600, SPAN_S - dur - 3600)
    add(
        down,
        "node.status",
        f"node-status:{node}:down",
        {"node": node, "state": "down", "detail": "health check failed: XID 79, GPU fell off the bus"},
    )
    add(
        down + dur,
        "node.status",
        f"node-status:{node}:up",
        {"node": node, "state": "up", "detail": "node repaired and back in service"},
    )
    summary["outage"] = {
        "node": node,
        "down_h": round(down / 3600, 2),
        "up_h": round((down + dur) / 3600, 2),
        "hours": round(dur / 3600, 2),
    }

    # strictly increasing timestamps (one-second resolution)
    events.sort(key=lambda e: (e[0], e[1]))
    lines, last = [], -1
    for sec, _o, typ, eid, payload in events:
        sec = max(sec, last + 1)
        last = sec
        lines.append(
            {
                "event_id": f"{POOL}-s{seed}:{eid}",
                "type": typ,
                "occurred_at": iso(sec),
                "pool": POOL,
                "schema_version": 1,
                "payload": payload,
            }
        )
    return lines, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--summary", action="store_true", help="print what the trace holds (JSON)")
    args = ap.parse_args()
    lines, summary = generate(args.seed)
    with open(args.out, "w", encoding="utf-8") as fh:
        for ev in lines:
            fh.write(json.dumps(ev, separators=(",", ":")) + "\n")
    if args.summary:
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
