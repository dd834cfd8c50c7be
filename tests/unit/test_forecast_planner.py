"""Forecasts in the planner: jobs given by their features are sized and say so in their
decisions, completions and traffic teach the forecasters, the window's real-time curves come
from the traffic forecaster, and all of it survives snapshots and replays and stays legal."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.feature_jobs import LORA_7B, feature_job, training_features

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record
from gpualloc.generators.synthetic import forecast_trace
from gpualloc.schemas.events import parse_event
from gpualloc.schemas.published import AllocationDecided
from gpualloc.schemas.settings import ForecastSettings
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan
from gpualloc.solvers.planner.effects import Decided, Event
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import dump_pool, load_pool
from gpualloc.solvers.release import RULES
from gpualloc.solvers.simulation.report import executed_violations, forecast_price, mistakes, report, spikes
from gpualloc.solvers.simulation.simulator import SimOptions, simulate
from gpualloc.solvers.simulation.trace_events import informed

T0 = datetime(2026, 1, 5, tzinfo=timezone.utc)  # a Monday
POOL = {"gpus": 16, "gpus_per_node": 8, "horizon": 12, "step_minutes": 60, "gpu_type": "a100-80gb"}
RUN = {"policy": "heuristic", "effort": 0.05, "step_seconds": None, "every": 0, "rules": RULES}


def ev(kind: str, payload: dict, hours: float = 0, ref=None) -> Event:
    env, p = parse_event(
        {
            "event_id": f"e-{kind}-{hours}-{ref}",
            "type": kind,
            "pool": "default",
            "occurred_at": (T0 + timedelta(hours=hours)).isoformat(),
            "payload": payload,
        }
    )
    return Event(env.type, p, env.occurred_at, ref)


def configured() -> Pool:
    pool = Pool()
    pool.apply([ev("pool.configured", POOL)], T0)
    return pool


LORA = LORA_7B | {"dataset_tokens_m": 200, "lora_rank": 16}


def test_a_job_given_by_its_features_is_sized_and_its_decision_says_so():
    pool = configured()
    [effect] = pool.apply([ev("job.submitted", {"id": "f", "kind": "training", "priority": 5, "features": LORA})], T0)
    d = effect.decision
    assert isinstance(effect, Decided) and d.action == "start" and d.forecast.forecast == ("gpus", "duration")
    assert len(d.gpus) == d.forecast.gpus
    assert pool.planner.running["f"].spec.duration == d.forecast.duration >= round(d.forecast.median)  # runs from now
    assert "forecast gpus and duration" in d.reason and "80% interval" in d.reason
    given = pool.apply(
        [ev("job.submitted", {"id": "g", "kind": "training", "priority": 5, "gpus": 2, "features": LORA})], T0
    )[0].decision
    assert given.forecast.forecast == ("duration",) and len(given.gpus) == 2


def test_the_dispatcher_publishes_the_forecast_with_its_interval():
    d = Dispatcher("default", interpreter=Pool())
    d.use(RUN)

    def body(kind: str, payload: dict, n: int) -> bytes:
        return orjson.dumps({"event_id": f"e{n}", "type": kind, "occurred_at": T0.isoformat(), "payload": payload})

    out = d.handle(
        [
            Record("gpualloc.config", 0, 0, None, body("pool.configured", POOL, 0)),
            Record(
                "gpualloc.jobs",
                0,
                0,
                None,
                body("job.submitted", {"id": "f", "kind": "training", "priority": 5, "features": LORA}, 1),
            ),
        ],
        T0,
    )
    [decided] = [
        AllocationDecided.model_validate(o.message["payload"]) for o in out if o.message["type"] == "allocation.decided"
    ]
    f = decided.forecast
    assert f.forecast == ["gpus", "duration"] and f.interval[0] < f.median < f.interval[1] and f.coverage == 0.8
    assert f.quantile == 0.7 and f.duration >= f.median and len(decided.gpus) == f.gpus


def test_completions_teach_the_duration_and_the_next_forecast_follows():
    pool, hours = configured(), 0
    first = pool.apply([ev("job.submitted", {"id": "probe", "kind": "training", "priority": 5, "features": LORA})], T0)[
        0
    ].decision.forecast
    pool.apply([ev("job.cancelled", {"id": "probe"})], T0)
    for k in range(40):  # each such job really takes three times the forecast
        pool.apply(
            [ev("job.submitted", {"id": f"j{k}", "kind": "training", "priority": 5, "features": LORA}, hours)],
            T0 + timedelta(hours=hours),
        )
        pool.commit()
        for _ in range(3 * round(first.median)):
            pool.commit()
        hours += 3 * round(first.median) + 1
        pool.apply([ev("job.completed", {"id": f"j{k}"}, hours)], T0 + timedelta(hours=hours))
    model = pool.planner.forecasts.jobs.models["training"]
    assert model.duration.examples == 40
    later = pool.apply(
        [ev("job.submitted", {"id": "again", "kind": "training", "priority": 5, "features": LORA}, hours)],
        T0 + timedelta(hours=hours),
    )[0].decision.forecast
    assert later.median > 2.5 * first.median


def traffic_pool(weeks: int, profile: list[int]) -> Pool:
    """A pool with one app whose demand is 6 GPUs on weekday afternoons and 1 otherwise, planned
    at the settings' quantile (an empty queue would price its headroom at the top)."""
    pool = Pool(forecast=ForecastSettings(realtime_priced=False))
    pool.apply([ev("pool.configured", POOL)], T0)
    pool.apply([ev("app.registered", {"id": "chat", "priority": 8, "max_gpus": 8, "profile": profile})], T0)
    for h in range(weeks * 168):
        busy = (h // 24) % 7 < 5 and 12 <= h % 24 < 18
        pool.apply([ev("traffic.observed", {"app": "chat", "gpus": 6 if busy else 1}, h)], T0 + timedelta(hours=h))
        pool.commit()
    return pool


def test_the_window_takes_real_time_demand_from_the_traffic_forecaster_not_the_profile():
    pool = traffic_pool(2, [3] * 24)  # the registered prior says 3 all day
    assert pool.planner.now == 2 * 168  # Monday 00:00 again
    [app] = pool.planner.window_problem().realtime
    assert app.demand[:12] == (1,) * 12  # the night and morning as observed, not the profile's 3
    pool.commit(), pool.commit()
    [app] = pool.planner.window_problem().realtime
    # steps 12-13, the weekday afternoon: 6 GPUs, or 5 on the hours the 0.9 quantile, calibrated
    # on whole GPUs, leaves short (about a tenth of all hours, on a stream this regular its peaks)
    assert all(5 <= d <= 6 for d in app.demand[10:12]) and app.demand[:10] == (1,) * 10
    fresh = configured()
    fresh.apply([ev("app.registered", {"id": "chat", "priority": 8, "max_gpus": 8, "profile": [3] * 24})], T0)
    assert fresh.planner.window_problem().realtime[0].demand == (3,) * 12  # no history: the prior


def test_a_restored_pool_forecasts_and_decides_as_the_original():
    pool = traffic_pool(1, [2] * 24)
    rng = random.Random(7)
    for k in range(30):
        pool.apply(
            [
                ev(
                    "job.submitted",
                    {"id": f"t{k}", "kind": "training", "priority": 5, "features": training_features(rng)},
                    168,
                )
            ],
            T0 + timedelta(hours=168),
        )
        pool.commit()
    for job_id in list(pool.planner.running)[:10]:
        pool.apply(
            [ev("job.completed", {"id": job_id, "used": {"peak_memory_gb": 33.0}}, 170)], T0 + timedelta(hours=170)
        )
    assert pool.planner.forecasts.jobs.models["training"].parts.examples > 0  # the correction physics 2 learns
    state = orjson.loads(orjson.dumps(dump_pool(pool)))
    twin = load_pool(
        state, Pool(forecast=ForecastSettings(realtime_priced=False))
    )  # the run's settings: a snapshot keeps none
    arrivals = [ev("job.submitted", feature_job(rng, f"n{k}"), 171) for k in range(8)]
    mine = [e.decision for e in pool.apply(arrivals, T0 + timedelta(hours=171))]
    theirs = [e.decision for e in twin.apply(arrivals, T0 + timedelta(hours=171))]
    assert mine == theirs and any(d.forecast for d in mine)
    assert pool.planner.window_problem() == twin.planner.window_problem()


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(1, 12))
def test_plans_with_forecast_jobs_are_legal(seed, steps):
    rng, pool = random.Random(seed), configured()
    for step in range(steps):
        at = T0 + timedelta(hours=step)
        pool.apply([ev("job.submitted", feature_job(rng, f"s{step}-{k}"), step) for k in range(rng.randint(0, 4))], at)
        problem, schedule = pool.planner.plan()
        assert check_plan(problem, to_grid(problem, schedule)) == []
        commit = pool.commit().commit
        assert check_plan(commit.window, to_grid(commit.window, commit.schedule)) == []


@pytest.mark.slow
def test_the_simulator_prices_forecast_error_against_an_oracle():
    events = [parse_event(e) for e in forecast_trace(seed=3, weeks=2, gpus=16, gpus_per_node=8)]
    sim = simulate(events, SimOptions(policies=("fifo", "heuristic"), forecast=True, days=10))
    assert list(sim.runs) == ["fifo/oracle", "fifo/forecast", "heuristic/oracle", "heuristic/forecast"]
    for run in sim.runs.values():
        assert executed_violations(sim, run) == []
    oracle, forecast = sim.runs["heuristic/oracle"], sim.runs["heuristic/forecast"]
    assert all(d.forecast is None for d in oracle.decisions)
    sized = [d for d in forecast.decisions if d.forecast is not None]
    assert len(sized) > 0.9 * len(forecast.decisions) and all(
        d.forecast.forecast == ("gpus", "duration") for d in sized
    )
    price = forecast_price(report(sim), sim)["heuristic"]
    assert price["oracle_value"] > price["fifo_oracle_value"] and price["gain_kept"] is not None
    again = simulate(events, SimOptions(policies=("heuristic",), forecast=True, days=10))
    assert [c.assignments for c in again.runs["heuristic/forecast"].commits] == [
        c.assignments for c in forecast.commits
    ]


def test_one_step_spikes_are_told_from_ramps_and_plateaus():
    demand = {"a": [4, 4, 20, 4, 4, 6, 9, 13, 13, 13, 1, 3, 1], "b": [0, 0, 3, 0]}
    assert spikes(demand) == {("a", 2), ("a", 11), ("b", 2)}  # not the ramp 4-13, not the drop to 1


def test_a_job_forecast_below_its_true_gpus_runs_out_of_memory_and_is_sized_up_until_it_runs():
    """The truth says the job needs 4 GPUs; the cold forecast gives it fewer: it runs out of
    memory a step after each start, the pool reads the job.failed, re-sizes it at least twice the
    count, and it finally runs on 4; the oracle, told 4, never fails. Every step stays legal."""
    rng = random.Random(7)
    job = feature_job(rng, "small") | {"actual_duration": 3, "actual_used": {"gpus": 4}}
    # sharded (ZeRO-3), so that a larger count holds less a GPU: without sharding no count needs less than one
    layout = {"tensor_parallel": 1, "pipeline_parallel": 1, "zero_stage": 3}
    job["kind"], job["features"] = "training", training_features(rng) | layout
    config = {"gpus": 16, "gpus_per_node": 8, "horizon": 8, "step_minutes": 60, "gpu_type": "h100-80gb"}
    events = [parse_event(_raw("pool.configured", config, 0)), parse_event(_raw("job.submitted", job, 1))]
    sim = simulate(events, SimOptions(policies=("heuristic",), forecast=True))
    forecast, oracle = sim.runs["heuristic/forecast"], sim.runs["heuristic/oracle"]
    given = [gpus for _, _, gpus, _ in forecast.out_of_memory]
    assert given and all(g < 4 for g in given) and given == sorted(given)
    assert "small" in forecast.finished and not oracle.out_of_memory and "small" in oracle.finished
    assert forecast.failed["small"] == [step for _, step, _, _ in forecast.out_of_memory]
    last = len(next(c for c in forecast.commits if c.step == forecast.started["small"]).assignments["small"])
    assert last >= 4
    assert mistakes(sim, forecast) == {
        "out_of_memory_restarts": len(given),
        "gpu_hours_lost": float(sum(lost for *_, lost in forecast.out_of_memory)),
        "gpu_hours_beyond_need": float((last - 4) * 3),  # its last run held `last` GPUs for 3 one-hour steps
    }
    # the steps that ran out of memory did no work: both runs did the job's 4 GPUs x 3 steps once
    work = job["priority"] * 4 * 3
    assert [r.value for r in report(sim) if r.day is None] == [work, work]
    assert all(executed_violations(sim, run) == [] for run in sim.runs.values())


def _raw(kind: str, payload: dict, minutes: int) -> dict:
    return {
        "event_id": f"{kind}-{minutes}",
        "type": kind,
        "pool": "default",
        "occurred_at": (T0 + timedelta(minutes=minutes)).isoformat(),
        "payload": payload,
    }


def test_a_ledger_entry_that_names_no_physics_replays_with_version_1():
    """Agents before `forecast.physics` decided with version 1: their entries replay with it; an
    entry that names a version replays with that one, and the pool's forecasters follow."""
    d = Dispatcher("default", interpreter=Pool())
    d.use(RUN)
    assert d.interpreter.forecast.physics == 1
    d.use({**RUN, "forecast": ForecastSettings().model_dump()})
    assert d.interpreter.forecast.physics == 3
    pool = configured()
    pool.use("heuristic", 0.05, None, 0, ForecastSettings(physics=1))
    assert pool.planner.forecasts.jobs.physics == 1


def test_a_known_run_gets_the_truth_of_its_part_and_the_forecast_runs_traffic():
    """A run told part of the truth: each job with its true GPUs, duration or both (the rest of
    a job given by its features withheld, as from the forecast run), and each traffic observation
    at its own step, as the forecast run meets it; the oracle's come a window ahead."""
    events = [parse_event(e) for e in forecast_trace(seed=4, weeks=1, gpus=16, gpus_per_node=8)]
    timed = [(k // 5, env, p) for k, (env, p) in enumerate(events)]
    config = configured().planner.config
    jobs = [p for _, env, p in timed if env.type == "job.submitted"]
    assert jobs and all(p.features for p in jobs)
    true_gpus = [p.actual_used.gpus if p.actual_used and p.actual_used.gpus else p.gpus for p in jobs]
    true_steps = [p.actual_duration or p.duration for p in jobs]
    for mode, gpus, steps in (
        ("gpus-known", true_gpus, [None] * len(jobs)),
        ("durations-known", [None] * len(jobs), true_steps),
        ("sizes-known", true_gpus, true_steps),
    ):
        told = [p for _, env, p in informed(timed, mode, config) if env.type == "job.submitted"]
        assert [p.gpus for p in told] == gpus and [p.duration for p in told] == steps, mode
    traffic = [s for s, env, _ in timed if env.type == "traffic.observed"]
    assert [s for s, env, _ in informed(timed, "gpus-known", config) if env.type == "traffic.observed"] == traffic
    oracle = informed(timed, "oracle", config)
    assert [s for s, env, _ in oracle if env.type == "traffic.observed"] != traffic


@pytest.mark.slow
def test_what_knowing_part_of_the_jobs_truth_is_worth_beside_the_forecast_run():
    events = [parse_event(e) for e in forecast_trace(seed=3, weeks=1, gpus=16, gpus_per_node=8)]
    options = SimOptions(policies=("fifo", "heuristic"), forecast=True, known=("gpus", "sizes"), days=4)
    sim = simulate(events, options)
    modes = ("oracle", "forecast", "gpus-known", "sizes-known")
    assert list(sim.runs) == [f"{p}/{m}" for p in ("fifo", "heuristic") for m in modes]
    assert all(executed_violations(sim, run) == [] for run in sim.runs.values())
    for mode in ("gpus-known", "sizes-known"):
        known = sim.runs[f"heuristic/{mode}"]
        assert not known.out_of_memory and all(
            d.forecast is None or "gpus" not in d.forecast.forecast for d in known.decisions
        )
    price = forecast_price(report(sim), sim)["heuristic"]
    assert set(price["known"]) == {"gpus", "sizes"}
    for part, worth in price["known"].items():
        assert worth["worth"] == pytest.approx(worth["objective"] - price["forecast_objective"], abs=0.02)
        gain = worth["objective"] - price["fifo_oracle_objective"]
        assert gain > 0  # knowing part of the truth, the heuristic beats the FIFO oracle on this trace
        kept = (price["forecast_objective"] - price["fifo_oracle_objective"]) / gain
        assert worth["objective_gain_kept"] == pytest.approx(kept, abs=1e-4)
    with pytest.raises(ValueError, match="known: 'memory' is none of gpus, durations, sizes"):
        simulate(events, SimOptions(forecast=True, known=("memory",)))


def test_a_jobs_steps_count_the_gpus_that_do_its_work():
    """Value counts a job's true need while it runs on at least that, nothing on fewer (it is
    running out of memory), and no GPU past it (a job runs no faster on more); without a known
    need, every GPU it holds."""
    events = [parse_event(e) for e in forecast_trace(seed=4, weeks=1, gpus=16, gpus_per_node=8)]
    sim = simulate(events, SimOptions(policies=("heuristic",), days=1))
    job = next(iter(sim.needs))
    need = sim.needs[job]
    assert [sim.useful_gpus(job, n) for n in (need - 1, need, 2 * need)] == [0, need, need]
    assert sim.useful_gpus("not-in-the-trace", 8) == 8
