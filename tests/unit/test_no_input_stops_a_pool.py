"""No input stops a pool, property-based: sequences of valid but awkward events (configurations
with random subsets of their fields, reconfigurations that shrink the pool or change its default
time limit, apps, jobs given by their sizes or by their features, completions, failures,
cancellations, node states, bindings, traffic) driven through the event interpreter with step
commits between passes. No pass raises: what the pool cannot act on comes back as a `Rejected`
effect or a `rejected` decision; and every committed plan is legal (R1-R5)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from support.builders import T0, ev
from support.examples import examples
from support.feature_jobs import quantization_features, training_features
from support.hostile import HOSTILE_IDS

from gpualloc.schemas.features import GPU_TYPES
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.planner.effects import Decided, Effect, Ended, Event, Failed, Granted, Rejected
from gpualloc.solvers.planner.interpreter import Pool

JOB_IDS = [f"j{k}" for k in range(12)] + HOSTILE_IDS[:4]
APPS = ["chat", "search"]
TRAFFIC = 6  # the most GPUs an app's traffic asks for
EXPECTED = (Decided, Rejected, Failed, Ended, Granted)


def configuration(rng: random.Random) -> dict[str, Any]:
    """A `pool.configured` of random shape, each optional field present or not."""
    gpus = rng.choice([8, 16, 24, 32])
    fields: dict[str, Any] = {"gpus": gpus}
    optional = {
        "gpus_per_node": lambda: rng.choice([n for n in (1, 2, 4, 8) if gpus % n == 0]),
        "horizon": lambda: rng.randint(2, 10),
        "step_minutes": lambda: rng.choice([1, 15, 60]),
        "gpu_type": lambda: rng.choice(sorted(GPU_TYPES)),
        "gpu_memory_gb": lambda: rng.choice([24, 80, 141]),
        "time_limit": lambda: rng.randint(1, 6),
        "starvation_steps": lambda: rng.randint(1, 5),
        "swap_cap": lambda: rng.randint(0, 4),
    }
    for name, value in optional.items():
        if rng.random() < 0.5:
            fields[name] = value()
    return fields


def job(rng: random.Random) -> dict[str, Any]:
    """A job given by its sizes, by its features (sized by the pool), or by both."""
    base: dict[str, Any] = {"id": rng.choice(JOB_IDS), "priority": rng.randint(1, 9), "requeue": rng.random() < 0.7}
    if rng.random() < 0.3:
        base["time_limit"] = rng.randint(1, 5)
    sizes = {"gpus": rng.choice([1, 2, 4, 8, 16, 64]), "duration": rng.randint(1, 6)}
    roll = rng.random()
    if roll < 0.4:
        return {**base, "kind": "training", **sizes}
    kind, features = (
        ("training", training_features(rng)) if rng.random() < 0.7 else ("quantization", quantization_features(rng))
    )
    if rng.random() < 0.3:
        features["gpu_type"] = rng.choice(sorted(GPU_TYPES))
    return {**base, "kind": kind, "features": features, **(sizes if roll < 0.6 else {})}


def ended(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A job's completion (with what it used, or not), failure (by every reason) or cancellation."""
    job_id = rng.choice(JOB_IDS)
    roll = rng.random()
    if roll < 0.4:
        used = {"gpus": rng.choice([1, 4, 8, 64]), "duration": rng.randint(1, 9), "peak_memory_gb": rng.uniform(0, 200)}
        return "job.completed", {"id": job_id, "used": {k: v for k, v in used.items() if rng.random() < 0.5}}
    if roll < 0.8:
        reason = rng.choice([None, "error", "out_of_memory", "time_limit"])
        return "job.failed", {"id": job_id, "detail": "x", **({"reason": reason} if reason else {})}
    return "job.cancelled", {"id": job_id}


def event(rng: random.Random) -> tuple[str, dict[str, Any]]:
    roll = rng.random()
    if roll < 0.08:
        return "pool.configured", configuration(rng)
    if roll < 0.4:
        return "job.submitted", job(rng)
    if roll < 0.65:
        return ended(rng)
    if roll < 0.72:
        app = {"id": rng.choice(APPS), "priority": rng.randint(1, 9), "min_gpus": rng.randint(0, 4)}
        if rng.random() < 0.5:  # below the most traffic asks, too: demand above the ceiling
            app["max_gpus"] = rng.randint(0, 12)
        if rng.random() < 0.3:
            app["current"] = sorted(rng.sample(range(16), rng.randint(0, 3)))
        return "app.registered", app
    if roll < 0.82:
        return "traffic.observed", {"app": rng.choice(APPS), "gpus": rng.randint(0, TRAFFIC)}
    if roll < 0.92:
        return "node.status", {"node": rng.randint(0, 7), "state": rng.choice(["up", "drained", "down"])}
    state = rng.choice(["bound", "released", "failed"])
    return "binding.reported", {"node": rng.randint(0, 3), "job_id": rng.choice(JOB_IDS), "gpus": [0], "status": state}


def passes(seed: int, count: int) -> list[list[Event]]:
    """`count` passes of a few events each, a minute apart, some stamped out of order; the first
    configures the pool with random fields."""
    rng = random.Random(seed)
    out: list[list[Event]] = [[ev("pool.configured", configuration(rng), ref="c0")]]
    for k in range(1, count):
        batch = []
        for n in range(rng.randint(1, 5)):
            kind, payload = event(rng)
            try:  # only valid events: the contract's refusals are the dispatcher's, not the core's
                batch.append(ev(kind, payload, minutes=k - rng.random(), ref=f"{k}.{n}"))
            except ValidationError:
                continue
        out.append(batch)
    return out


def legal(committed_window, schedule) -> list[str]:
    return [str(v) for v in check_plan(committed_window, to_grid(committed_window, schedule))]


@settings(max_examples=examples(100), deadline=None)
@given(
    seed=st.integers(0, 10**9),
    count=st.integers(2, 30),
    commit_every=st.integers(1, 3),
    replan_work=st.sampled_from([0, 64, 10**6]),
)
def test_no_sequence_of_valid_events_makes_a_pass_raise_and_every_commit_is_legal(
    seed, count, commit_every, replan_work
):
    pool = Pool(replan_work=replan_work)
    for k, batch in enumerate(passes(seed, count)):
        effects: list[Effect] = pool.apply(batch, T0 + timedelta(minutes=k))
        assert all(isinstance(e, EXPECTED) for e in effects)
        assert all(e.reason for e in effects if isinstance(e, Rejected))
        if pool.planner is not None and k % commit_every == 0:
            commit = pool.commit().commit
            assert legal(commit.window, commit.schedule) == [], f"step {commit.step}"
