"""`plan.committed`'s tentative plan and parts (`gpualloc.schemas.commits`): the rectangles give
back exactly the grid of the schedule, a commit at the contract's limits splits into parts that
each fit a Kafka message under the default limit, and the parts give back the whole commit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from functools import partial
from types import SimpleNamespace

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.examples import examples
from test_property import generator_args

from gpualloc.agent.operator import audit
from gpualloc.agent.operator.audit import compare
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record, Topics
from gpualloc.generators.scenarios import generate_scenario
from gpualloc.schemas import Scenario
from gpualloc.schemas.commits import PART_BYTES, Parts, commit_grid, latest, merge, split, tentative_plan
from gpualloc.schemas.events import envelope
from gpualloc.schemas.gpu_runs import gpu_runs
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.published import PassRecorded, PlanCommitted
from gpualloc.schemas.settings import SolveOptions
from gpualloc.solvers import compile_scenario
from gpualloc.solvers.grid import batch_spans, to_grid
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import is_blocker
from gpualloc.solvers.policies import policy
from gpualloc.solvers.release import RULES

T0 = datetime(2026, 12, 2, tzinfo=UTC)


def reference_grid(gpus: int, steps: int, batch: dict, realtime: dict) -> list[list[str | None]]:
    """The grid cell by cell, as `to_grid` writes it: batch blocks, then apps over them."""
    grid: list[list[str | None]] = [[None] * steps for _ in range(gpus)]
    for job_id, (start, end, mask) in batch.items():
        for g in range(gpus):
            if mask >> g & 1:
                for t in range(start, end):
                    grid[g][t] = job_id
    for app_id, masks in realtime.items():
        for t, mask in enumerate(masks):
            for g in range(gpus):
                if mask >> g & 1:
                    grid[g][t] = app_id
    return grid


def message(plan: dict, assignments: dict, started: list[str], seq: int = 7) -> dict:
    payload = PlanCommitted(
        step=3,
        seq=seq,
        step_start=T0,
        assignments=assignments,
        plan=plan,
        source="heuristic",
        objective=1.5,
        started=started,
        frontier={"gpualloc.jobs:0": 12},
    )
    return envelope("plan.committed", payload, T0, f"default:commit:{seq}")


@settings(max_examples=examples(300), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(generator_args())
def test_the_plan_of_a_generated_window_gives_back_its_grid(args):
    problem = compile_scenario(Scenario.model_validate(generate_scenario(**args)))
    schedule = policy("heuristic").solve(problem, SolveOptions()).schedule
    plan = tentative_plan(problem.gpus, problem.horizon, batch_spans(problem, schedule), schedule.realtime)
    assert commit_grid({"plan": plan}) == to_grid(problem, schedule)
    PlanCommitted.model_validate(message(plan, {}, [])["payload"])  # the contract's model takes it


@st.composite
def windows(draw):
    """Any masks at all (not only legal plans): blocks of several ranges, apps whose sets jump."""
    gpus, steps = draw(st.integers(1, 40)), draw(st.integers(1, 12))
    mask = st.integers(0, (1 << gpus) - 1)
    batch = {}
    for k in range(draw(st.integers(0, 6))):
        start = draw(st.integers(0, steps - 1))
        batch[f"j{k}"] = (start, draw(st.integers(start, steps)), draw(mask))
    realtime = {f"a{k}": draw(st.lists(mask, min_size=0, max_size=steps)) for k in range(draw(st.integers(0, 3)))}
    return gpus, steps, batch, realtime


@settings(max_examples=examples(400), deadline=None, derandomize=True)
@given(windows(), st.integers(600, 3000))
def test_any_window_round_trips_and_splits_into_parts_that_fit(window, limit):
    gpus, steps, batch, realtime = window
    plan = tentative_plan(gpus, steps, batch, realtime)
    assert commit_grid({"plan": plan}) == reference_grid(gpus, steps, batch, realtime)
    assignments = {
        h: [g for g0, g1, t0, _ in rects if t0 == 0 for g in range(g0, g1)] for h, rects in plan["holders"].items()
    }
    assignments = {h: gs for h, gs in assignments.items() if gs}
    whole = message(plan, assignments, sorted(h for h in assignments if h.startswith("j")))
    parts = split(whole, limit)
    assert all(len(orjson.dumps(p)) <= limit for p in parts)
    assert [p["payload"]["part"] for p in parts] == list(range(1, len(parts) + 1))
    assert {p["event_id"] for p in parts} == {"default:commit:7"} | {
        f"default:commit:7:{i}" for i in range(2, len(parts) + 1)
    }
    ids = [set(p["payload"]["assignments"]) for p in parts]
    assert sum(map(len, ids)) == len(set().union(*ids))  # each holder's assignment in one part
    back = merge([p["payload"] for p in reversed(parts)])
    assert back["assignments"] == assignments and sorted(back["started"]) == whole["payload"]["started"]
    assert commit_grid(back) == commit_grid(whole["payload"])
    assert {k: v for k, v in back.items() if k not in ("plan", "started")} == {
        k: v for k, v in whole["payload"].items() if k not in ("plan", "started")
    }


def test_gpu_runs_are_the_contiguous_ranges():
    assert gpu_runs(0) == [] and gpu_runs(0b1) == [(0, 1)]
    assert gpu_runs(0b1110_0110) == [(1, 3), (5, 8)]
    assert gpu_runs(((1 << 4096) - 1) ^ (1 << 2048)) == [(0, 2048), (2049, 4096)]


def at_the_limits(seed: int = 0) -> tuple[dict, dict, dict, list[str]]:
    """A window at the contract's limits: 4,096 GPUs, horizon 336, 64 apps (8 GPUs each, one
    moving a GPU up every step), 10,000 placed jobs of 1-8 GPUs with 200-character ids (half of
    them 4-byte UTF-8 characters, the most bytes an id can take), 3,584 of them running now."""
    rng = random.Random(seed)
    G, T, apps = LIMITS.gpus, LIMITS.horizon, LIMITS.apps
    realtime = {}
    for a in range(apps):
        base = G - 8 * apps + 8 * a
        realtime[f"app-{a:02d}-" + "x" * 190] = [
            0xFF << base if a % 2 else (0x7F << base) | (1 << (base + 7 - t % 2)) for t in range(T)
        ]
    batch, lanes = {}, G - 8 * apps
    k = 0
    for lane in range(lanes):  # three or so jobs one after the other on each GPU
        t = 0
        while t < T and k < LIMITS.queued_jobs:
            end = min(T, t + rng.randint(60, 200))
            job_id = f"{k:06d}" + ("\U0001f680" if k % 2 else "j") * (LIMITS.id_chars - 6)
            batch[job_id] = (t, end, 1 << lane)
            k, t = k + 1, end
    assignments = {h: [g for g in range(G) if mask >> g & 1] for h, (t0, _, mask) in batch.items() if t0 == 0}
    assignments |= {a: [g for g in range(G) if masks[0] >> g & 1] for a, masks in realtime.items()}
    return batch, realtime, assignments, [h for h, (t0, _, _) in batch.items() if t0 == 0]


@pytest.mark.slow
def test_a_commit_at_the_contracts_limits_splits_into_parts_under_a_megabyte():
    batch, realtime, assignments, started = at_the_limits()
    assert len(batch) == LIMITS.queued_jobs and max(len(h) for h in batch) == LIMITS.id_chars
    plan = tentative_plan(LIMITS.gpus, LIMITS.horizon, batch, realtime)
    whole = message(plan, assignments, started)
    parts = split(whole)
    sizes = [len(orjson.dumps(p)) for p in parts]
    assert len(parts) > 1 and max(sizes) <= PART_BYTES < 1_000_000, sizes
    for p in parts:
        PlanCommitted.model_validate(p["payload"])
    collector = Parts()
    got = [collector.add(p["payload"]) for p in parts[1:] + parts[:1]]  # in any order: whole once all are in
    assert got[:-1] == [None] * (len(parts) - 1) and got[-1] is not None
    back = got[-1]
    assert back["assignments"] == assignments and sorted(back["started"]) == sorted(started)
    assert back["plan"]["holders"] == plan["holders"]
    assert commit_grid(back) == reference_grid_fast(LIMITS.gpus, LIMITS.horizon, batch, realtime)


def reference_grid_fast(gpus: int, steps: int, batch: dict, realtime: dict) -> list[list[str | None]]:
    """`reference_grid` for one-GPU blocks and app masks, without a loop over every GPU."""
    grid: list[list[str | None]] = [[None] * steps for _ in range(gpus)]
    for job_id, (start, end, mask) in batch.items():
        grid[mask.bit_length() - 1][start:end] = [job_id] * (end - start)
    for app_id, masks in realtime.items():
        for t, mask in enumerate(masks):
            for lo, hi in gpu_runs(mask):
                for g in range(lo, hi):
                    grid[g][t] = app_id
    return grid


@pytest.mark.slow
def test_parts_of_different_commits_are_never_mixed_and_bad_sets_are_refused():
    batch, realtime, assignments, started = at_the_limits()
    plan = tentative_plan(LIMITS.gpus, LIMITS.horizon, batch, realtime)
    a, b = split(message(plan, assignments, started, seq=7)), split(message(plan, assignments, started, seq=8))
    collector = Parts()
    outs = [collector.add(p["payload"]) for p in [a[0], b[0], *b[1:], *a[1:]]]
    assert [o["seq"] for o in outs if o is not None] == [8, 7]
    try:
        merge([a[0]["payload"], b[1]["payload"]])
    except ValueError as e:
        assert "parts" in str(e) and "seq 7" in str(e)
    else:
        raise AssertionError("parts of two commits merged")


RUN = {"policy": "heuristic", "effort": 0.05, "step_seconds": 10, "every": 0, "rules": RULES}


def stream(count: int) -> list[Record]:
    """A pool of 32 GPUs with an app, arrivals with long ids, some of them ending."""
    rng = random.Random(count)

    def record(topic: str, offset: int, kind: str, payload: dict) -> Record:
        return Record(
            f"gpualloc.{topic}",
            0,
            offset,
            "default",
            orjson.dumps(
                {
                    "event_id": f"{topic}-{offset}",
                    "type": kind,
                    "occurred_at": "2026-12-02T00:00:00Z",
                    "pool": "default",
                    "schema_version": 1,
                    "payload": payload,
                }
            ),
        )

    out = [
        record("config", 0, "pool.configured", {"gpus": 32, "gpus_per_node": 8, "horizon": 12}),
        record(
            "traffic",
            0,
            "app.registered",
            {
                "id": "chat",
                "priority": 6,
                "min_gpus": 1,
                "max_gpus": 6,
                "profile": [rng.randint(1, 6) for _ in range(24)],
            },
        ),
    ]
    for n in range(count):
        if n > 4 and rng.random() < 0.2:
            out.append(record("jobs", n, "job.completed", {"id": f"job-{rng.randrange(n):04d}-" + "x" * 40}))
        else:
            out.append(
                record(
                    "jobs",
                    n,
                    "job.submitted",
                    {
                        "id": f"job-{n:04d}-" + "x" * 40,
                        "kind": "training",
                        "priority": rng.randint(1, 9),
                        "gpus": rng.choice([1, 2, 4, 8]),
                        "duration": rng.randint(1, 6),
                    },
                )
            )
    return out


def test_split_commits_replay_alike_and_the_audit_compares_them_part_by_part(monkeypatch):
    records = stream(60)
    index = {(r.topic, r.partition, r.offset): r for r in records}
    d = Dispatcher("default", interpreter=Pool(), part_bytes=1500)
    d.use(RUN)
    outputs, entries, grids = [], [], {}
    for k in range(0, len(records), 6):
        now = T0 + timedelta(seconds=5 * k)
        out = d.handle(records[k : k + 6], now)
        if d.interpreter.planner is not None:
            out += d.commit(now)
            grids[d.seq] = to_grid(d.last_commit.window, d.last_commit.schedule)
        entries.append(PassRecorded.model_validate(d.seal(RUN)[-1].message["payload"]))
        outputs += [o.message for o in out]
    commits = [m for m in outputs if m["type"] == "plan.committed"]
    assert all(len(orjson.dumps(m)) <= 1500 for m in commits) and max(m["payload"]["parts"] for m in commits) >= 3
    for seq, grid in grids.items():  # each commit's parts give back its whole plan (blockers shown idle)
        whole = latest(m["payload"] for m in commits if m["payload"]["seq"] == seq)
        assert commit_grid(whole) == [[None if c and is_blocker(c) else c for c in row] for row in grid]
    again = Dispatcher("default", interpreter=Pool(), part_bytes=1500)
    assert [o.message for e in entries for o in again.replay(e, lambda t, p, o: index[t, p, o]).outputs] == outputs
    history = SimpleNamespace(entries=entries, record_at=lambda t, p, o: index[t, p, o])
    monkeypatch.setattr(audit, "Dispatcher", partial(Dispatcher, part_bytes=1500))  # the agent's part size
    result = compare("default", Topics(), history, {m["event_id"]: m for m in outputs})
    assert result.ok and result.commits == len(grids), result.lines()
    forged = dict(commits[-1], payload={**commits[-1]["payload"], "assignments": {"x": [0]}})
    result = compare("default", Topics(), history, {m["event_id"]: m for m in outputs} | {forged["event_id"]: forged})
    assert [m.split(" (")[0] for m in result.mismatches] == [f"plan.committed {forged['event_id']}"]
