"""GPU sets leave the process in forms that do not depend on the pool fitting a machine word:
snapshots and ledger entries round-trip exactly at the contract's limits (4,096 GPUs, horizon
336, 10,000 queued jobs with 200-character ids, 64 apps) and every record stays under the
broker's default message limit."""

from __future__ import annotations

import random
import string
from datetime import datetime, timezone
from unittest import mock

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.feature_jobs import feature_job
from support.forecaster_states import largest_job_forecaster
from support.planner_states import loaded_planner

from gpualloc.agent.service import dispatcher
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record, encode
from gpualloc.forecasting.calibration import ERRORS, LEADS, QUANTILES, Calibration, Pending
from gpualloc.forecasting.traffic import AppTraffic
from gpualloc.schemas.features import FEATURES
from gpualloc.schemas.published import PassRecorded, PoolSnapshot, PoolSnapshotPart, RecordedCommit
from gpualloc.solvers.grid import Schedule
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.planner import Planner
from gpualloc.solvers.planner.pool_state import plan_busy
from gpualloc.solvers.planner.records import AppSpec, AppState, FullModePlan, JobSpec, PoolConfig, Running
from gpualloc.solvers.planner.snapshot import dump_planner, dump_pool, dump_schedule, load_planner, load_schedule
from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.policies.heuristic import heuristic_schedule
from gpualloc.solvers.release import RULES

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)
RUN = {"policy": "heuristic", "effort": 0.05, "step_seconds": 10, "every": 0, "rules": RULES}
MESSAGE_LIMIT = 1_000_000  # every record, as the agent sends it: under the broker's default (1 MiB)


def _message(kind: str, payload: dict, n: int) -> bytes:
    return orjson.dumps(
        {
            "event_id": f"e{n}",
            "type": kind,
            "occurred_at": T0.isoformat(),
            "pool": "default",
            "schema_version": 1,
            "payload": payload,
        }
    )


def _dispatcher(planner: Planner | None = None) -> Dispatcher:
    d = Dispatcher("default", interpreter=Pool())
    d.use(RUN)
    if planner is not None:
        d.interpreter.planner, d.interpreter.origin = planner, T0
    return d


def _restored(records: list) -> Dispatcher:
    """A fresh dispatcher restored from a snapshot's records (as `recovery.read_history` reads them)."""
    snap = PoolSnapshot.model_validate(records[0].message["payload"])
    parts = [PoolSnapshotPart.model_validate(r.message["payload"]) for r in records[1:]]
    again = _dispatcher()
    again.restore(snap, {p.part: p.state for p in parts})
    return again


def _same_planner(a: Planner, b: Planner) -> None:
    assert (a.config, a.now, a.week_minute) == (b.config, b.now, b.week_minute)
    assert a.queued == b.queued and a.running == b.running and a.apps == b.apps
    assert (a.down, a.drained, a.committed, a.busy) == (b.down, b.drained, b.committed, b.busy)
    assert a.forecasts.dump() == b.forecasts.dump()


# ---- an app above GPU 63, and older forms ---------------------------------------------------------


def test_an_app_above_gpu_63_is_snapshotted_and_restored():
    d = _dispatcher()
    d.handle(
        [
            Record(
                "gpualloc.config",
                0,
                0,
                "default",
                _message("pool.configured", {"gpus": 72, "gpus_per_node": 8, "horizon": 4}, 0),
            ),
            Record(
                "gpualloc.traffic",
                0,
                0,
                "default",
                _message(
                    "app.registered",
                    {"id": "chat", "priority": 5, "min_gpus": 2, "max_gpus": 2, "current": [70, 71]},
                    1,
                ),
            ),
        ],
        T0,
    )
    d.commit(T0)
    d.seal(RUN)
    held = d.interpreter.planner.apps["chat"].held
    assert held >> 64  # the app holds GPUs above a machine word
    again = _restored(d.snapshot(T0, 0, 1, 0))
    assert again.interpreter.planner.apps["chat"].held == held


def test_an_app_never_committed_keeps_held_minus_one_and_version_2_forms_read():
    planner = Planner(PoolConfig(gpus=128, gpus_per_node=8, horizon=4), scheduler=heuristic_schedule)
    planner.realtime.register_app(AppSpec("chat", priority=5, min_gpus=1, max_gpus=4))
    planner.busy = [0xFF, 0xFF, 1 << 127, 0]
    data = orjson.loads(orjson.dumps(dump_planner(planner)))
    assert data["busy"] == [[2, "ff"], [1, format(1 << 127, "x")], [1, "0"]]  # runs of equal steps
    assert load_planner(data, heuristic_schedule).apps["chat"].held == -1
    assert data["apps"]["chat"][-3:] == ["-1", None, "0"]  # `before`, its last observation, GPUs granted
    data["apps"]["chat"] = data["apps"]["chat"][:8]  # version 2: no `before`...
    data["apps"]["chat"][-1] = 12  # ...and `held` a JSON integer
    data["busy"] = ["ff", "ff", format(1 << 127, "x"), "0"]  # version 2: a hex mask per step
    old = load_planner(data, heuristic_schedule)
    assert old.apps["chat"].held == 12 and old.apps["chat"].before == 12 and old.busy == planner.busy


def test_ledger_schedules_are_gpu_runs_with_app_sets_once_per_change_and_older_hex_ones_still_read():
    schedule = Schedule({"j": (3, 0xF0F << 4000)}, {"chat": [0b111] * 5 + [0b11 << 4094] * 2, "idle": [0, 0]})
    data = dump_schedule(schedule)
    assert data == {
        "batch": {"j": [3, [4000, 4004, 4008, 4012]]},
        "realtime": {"chat": [[5, [0, 3]], [2, [4094, 4096]]], "idle": [[2, []]]},
    }
    assert load_schedule(orjson.loads(orjson.dumps(data))) == schedule
    older = {
        "batch": {"j": [3, format(0xF0F << 4000, "x")]},
        "realtime": {"chat": ["7"] * 5 + [format(0b11 << 4094, "x")] * 2, "idle": ["0", "0"]},
    }
    assert load_schedule(older) == schedule


# ---- the property at the contract's limits ----------------------------------------------------------


@st.composite
def planners(draw) -> tuple[Planner, Schedule]:
    """A planner over up to 4,096 GPUs and 336 steps with random GPU sets (apps' among the highest
    GPUs), and a schedule of its window with apps' sets changing at a few steps."""
    nodes = draw(st.sampled_from([1, 8, 9, 16, 128, 512]))
    gpus, horizon = 8 * nodes, draw(st.integers(1, 336))
    masks = st.integers(0, (1 << gpus) - 1)
    high = st.integers(0, 63).map(lambda k: ((1 << min(k + 1, gpus)) - 1) << (gpus - min(k + 1, gpus)))
    planner = Planner(PoolConfig(gpus, 8, horizon), now=draw(st.integers(0, 10_000)), scheduler=heuristic_schedule)
    for k in range(draw(st.integers(0, 4))):
        planner.apps[f"app{k}"] = AppState(AppSpec(f"app{k}", 1.0 + k), held=draw(st.one_of(st.just(-1), high, masks)))
    for k in range(draw(st.integers(0, 4))):
        planner.running[f"r{k}"] = Running(
            JobSpec(f"r{k}", "training", 1.0, 1, 5, 0), draw(masks), draw(st.integers(0, 99))
        )
    planner.down, planner.drained, planner.committed = draw(masks), draw(masks), draw(masks)
    some = draw(st.lists(masks, min_size=1, max_size=4))
    planner.busy = draw(st.none() | st.lists(st.sampled_from(some), min_size=horizon, max_size=horizon))
    schedule = Schedule(
        {f"j{k}": (draw(st.integers(0, horizon - 1)), draw(masks)) for k in range(draw(st.integers(0, 3)))},
        {app: draw(st.lists(st.sampled_from(some + [0]), min_size=horizon, max_size=horizon)) for app in planner.apps},
    )
    return planner, schedule


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None)
@given(state=planners(), part_bytes=st.integers(40, 2_000))
def test_snapshots_and_ledger_schedules_round_trip_exactly_at_any_size(state, part_bytes):
    planner, schedule = state
    data = orjson.loads(orjson.dumps(dump_planner(planner)))  # raises on a number beyond 64 bits
    _same_planner(load_planner(data, heuristic_schedule), planner)
    recorded = RecordedCommit.model_validate(
        orjson.loads(orjson.dumps(RecordedCommit(seq=1, schedule=dump_schedule(schedule)).model_dump(mode="json")))
    )
    assert load_schedule(recorded.schedule) == schedule
    d = _dispatcher(planner)
    with mock.patch.object(dispatcher, "SNAPSHOT_BYTES", part_bytes):  # split into parts of this size
        records = d.snapshot(T0, 0, 1, 0)
    assert all(len(r.message["payload"]["state"]) <= part_bytes and encode(r.message) for r in records)
    _same_planner(_restored(records).interpreter.planner, planner)


# ---- the whole pool at the limits -----------------------------------------------------------------

ID_CHARS = string.ascii_letters + string.digits + "-_.:/"


def _ident(rng: random.Random, prefix: str) -> str:
    """A 200-character id, random enough that compression cannot shrink it away."""
    return (prefix + "".join(rng.choices(ID_CHARS, k=200)))[:200]


def limits_planner(seed: int = 0) -> Planner:
    """4,096 GPUs (8 a node), horizon 336; 64 apps of 16 GPUs each on the highest GPUs, with a
    traffic history of six weeks and demand observed for every step ahead; job forecasters with
    every group on every GPU type and the most model corrections they keep; the other GPUs run
    jobs ending at many different steps; 10,000 queued jobs, 30% given by features; every id 200
    characters. Built directly: planning 10,000 arrivals one by one would take minutes."""
    rng = random.Random(seed)
    gpus, horizon, app_gpus = 4096, 336, 16
    p = Planner(
        PoolConfig(gpus, 8, horizon, 30, gpu_type="h100-80gb", gpu_memory_gb=80.0, starvation_steps=96),
        now=5000,
        scheduler=heuristic_schedule,
        week_minute=1234,
    )
    for k in range(64):
        app_id = _ident(rng, f"app{k}-")
        p.apps[app_id] = AppState(
            AppSpec(
                app_id, rng.uniform(1, 100), 1, 32, 4, [rng.randint(1, 32) for _ in range(24)], rng.uniform(0.5, 50)
            ),
            {p.now + t: rng.randint(1, 32) for t in range(horizon)},
            ((1 << app_gpus) - 1) << (gpus - app_gpus * (k + 1)),
        )
        p.forecasts.traffic.apps[app_id] = AppTraffic(  # six weeks of hours, two of errors, every lead pending
            loads={h: rng.uniform(0, 40) for h in range(6 * 168)},
            calibration=Calibration(
                errors=[rng.uniform(-1, 1) for _ in range(ERRORS)],
                offsets=[rng.uniform(-0.1, 0.1) for _ in QUANTILES],
                pending=Pending(6 * 168, rng.uniform(0, 4), [rng.randint(1, 40) for _ in QUANTILES]),
                lead_pending=[
                    {6 * 168 + k: [rng.randint(1, 40) for _ in QUANTILES] for k in range(lead)} for lead in LEADS
                ],
            ),
            last=6 * 168 - 1,
        )
    g = 0
    while g < gpus - 64 * app_gpus:
        size = rng.choice([1, 2, 4, 8])
        job_id = _ident(rng, "run-")
        p.running[job_id] = Running(
            JobSpec(job_id, "training", rng.uniform(1, 9), size, rng.randint(1, 500), p.now - 3),
            ((1 << size) - 1) << g,
            p.now - rng.randint(0, 100),
        )
        g += size
    for n in range(10_000):
        job_id = _ident(rng, f"q{n}-")
        kind, features = rng.choice(["training", "batch_inference", "quantization"]), None
        if rng.random() < 0.3:
            payload = feature_job(rng, job_id)
            kind, features = payload["kind"], FEATURES[payload["kind"]].model_validate(payload["features"])
        p.queued[job_id] = JobSpec(
            job_id,
            kind,
            rng.uniform(1, 9),
            rng.choice([1, 2, 4, 8, 64, 512]),
            rng.randint(1, 100_000),
            p.now - rng.randint(0, 4000),
            rng.random() < 0.5,
            features,
        )
    p.forecasts.jobs = largest_job_forecaster(seed)
    p.down, p.drained = 0xFF << 800, 0xFFFF << 1600
    p.committed = (1 << gpus) - 1 - p.down
    p.busy = plan_busy(p, Schedule(), 0)
    return p


@pytest.mark.slow
def test_a_pool_at_the_limits_is_snapshotted_in_records_under_the_message_limit_and_restored():
    d = _dispatcher(limits_planner())
    for n in range(20_000):  # a de-duplication window of long ids: it takes what room the pool leaves
        d.seen.add(_ident(random.Random(n), f"e{n}-"), 5000, "0123456789abcdef")
    records = d.snapshot(T0, 0, 1, 0)
    sizes = [len(encode(r.message)) for r in records]
    assert len(records) > 1 and max(sizes) < MESSAGE_LIMIT, sizes
    again = _restored(records)
    _same_planner(again.interpreter.planner, d.interpreter.planner)
    assert 0 < len(again.seen) <= len(d.seen)
    assert again.seen.newest() == d.seen.newest()[len(d.seen) - len(again.seen) :]


@pytest.mark.slow
def test_a_snapshot_in_fewer_parts_than_the_last_drops_the_older_parts_keys():
    d = _dispatcher(limits_planner())
    many = d.snapshot(T0, 0, 1, 0)
    assert len(many) > 2 and all(r.message is not None for r in many)
    d.interpreter.planner.queued.clear()  # the pool drains: its state fits fewer records
    fewer = d.snapshot(T0, 0, 1, 0)
    kept = [r for r in fewer if r.message is not None]
    tombstones = [r for r in fewer if r.message is None]
    assert 1 <= len(kept) < len(many)
    assert [r.key for r in tombstones] == [f"default\x00{i}" for i in range(len(kept), len(many))]
    assert {r.key for r in kept} | {r.key for r in tombstones} == {r.key for r in many}  # every older key
    _same_planner(_restored(kept).interpreter.planner, d.interpreter.planner)


def test_a_schedule_of_64_apps_over_336_steps_is_recorded_in_a_bounded_entry():
    """Each app's set changes at every step (the worst for runs over time), each a run of GPUs."""
    realtime = {f"{k:03d}" + "a" * 197: [0xFFFF << (16 * ((k + t) % 256)) for t in range(336)] for k in range(64)}
    schedule = Schedule({}, realtime)
    entry = PassRecorded(txn=1, now=T0, commits=[RecordedCommit(seq=1, schedule=dump_schedule(schedule))])
    size = len(orjson.dumps(entry.model_dump(mode="json")))
    assert size < dispatcher.SCHEDULE_BYTES  # 64 x 336 sets a step, in hex 22 MB
    assert load_schedule(entry.commits[0].schedule) == schedule


def _offered() -> tuple[Dispatcher, FullModePlan]:
    """A pool whose hot path (FIFO) a full-mode plan (the heuristic's) beats, and that plan."""
    planner = loaded_planner(scheduler=fifo_schedule)
    problem = planner.window_problem()
    schedule = heuristic_schedule(problem, 0.25)
    return _dispatcher(planner), FullModePlan(planner.now, schedule, objective_of(problem, schedule))


def test_an_adopted_plan_recorded_in_the_older_hex_form_replays_to_the_same_commit():
    d, plan = _offered()
    published = [o.message for o in d.commit(T0, plan)]
    assert published[0]["payload"]["source"] == "milp"
    entry = d.seal(RUN)[-1].message["payload"]
    schedule = d.last_commit.schedule
    entry["commits"][0]["schedule"] = {  # as ledgers before 2026-12-02 recorded it
        "batch": {job_id: [start, format(mask, "x")] for job_id, (start, mask) in schedule.batch.items()},
        "realtime": {app_id: [format(m, "x") for m in masks] for app_id, masks in schedule.realtime.items()},
    }
    again, _ = _offered()
    replayed = again.replay(PassRecorded.model_validate(entry), lambda *where: None).outputs
    assert [o.message for o in replayed] == published
    assert dump_pool(again.interpreter) == dump_pool(d.interpreter)


def test_a_full_mode_plan_whose_record_would_outgrow_the_ledger_is_not_adopted(monkeypatch):
    d, plan = _offered()
    commit = d.commit(T0, plan)[0].message["payload"]
    assert commit["source"] == "milp"
    recorded = d.seal(RUN)[-1].message["payload"]["commits"][0]
    assert load_schedule(recorded["schedule"]) == d.last_commit.schedule

    monkeypatch.setattr(dispatcher, "SCHEDULE_BYTES", len(orjson.dumps(recorded["schedule"])) - 1)
    d, plan = _offered()
    commit = d.commit(T0, plan)[0].message["payload"]
    assert commit["source"] == "heuristic"
    assert commit["full_mode"].startswith("not adopted: its ledger record would take")
    assert d.seal(RUN)[-1].message["payload"]["commits"][0]["schedule"] is None
