"""A pool's set-up window (`pool.configured.setup_seconds`): no arrival starts before it closes,
and step 0's commit plans the backlog with every app registered in it, so apps sent beside a
backlog keep their floors whichever poll brings them; off, the pool decides as it always has. And
a configuration that needs newer planning rules (`rules`) is refused by name."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
from support.builders import T0, ev
from test_ledger import RUN, fresh, live, message, replay, stream
from test_ledger import T0 as LEDGER_T0

from gpualloc.bus.topics import Record
from gpualloc.schemas.events import parse_event
from gpualloc.solvers.planner.effects import Decided, Event, Rejected
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.reasons import SETUP
from gpualloc.solvers.planner.snapshot import dump_pool
from gpualloc.solvers.release import RULES, package_version

POOL = {"gpus": 256, "gpus_per_node": 8, "horizon": 24, "step_minutes": 60}
APPS = [{"id": f"app{k}", "priority": 5, "min_gpus": 16, "max_gpus": 48} for k in range(3)]


def backlog(n: int, seed: int = 0) -> list[Event]:
    """`n` jobs of 1-8 GPUs and 2-12 steps: more work than a 256-GPU pool holds in its window."""
    rng = random.Random(seed)
    return [
        ev(
            "job.submitted",
            {
                "id": f"j{k}",
                "kind": "training",
                "priority": rng.randint(1, 9),
                "gpus": rng.choice([1, 2, 4, 8]),
                "duration": rng.randint(2, 12),
            },
            ref=f"j{k}",
        )
        for k in range(n)
    ]


def apps() -> list[Event]:
    return [ev("app.registered", app, ref=app["id"]) for app in APPS]


def set_up(setup_seconds: float | None, jobs: int = 1000) -> tuple[Pool, list, list]:
    """The burst as a platform sends it: the backlog, then the configuration (both read in one
    poll), then the apps a poll later, 2 ms on; the effects of both passes."""
    pool = Pool(replan_work=4096)
    config = POOL if setup_seconds is None else {**POOL, "setup_seconds": setup_seconds}
    first = pool.apply([*backlog(jobs), ev("pool.configured", config)], T0)
    second = pool.apply(apps(), T0 + timedelta(milliseconds=2))
    return pool, first, second


def actions(effects: list) -> list[tuple[str, str, int | None]]:
    return [(e.decision.job_id, e.decision.action, e.decision.start_step) for e in effects if isinstance(e, Decided)]


def test_off_the_pool_decides_as_without_the_field():
    """Absent or 0: step 0 begins at the configuration and the arrivals of its pass start at once
    (the decisions, commits and state the same either way)."""
    runs = []
    for window in (None, 0):
        pool, first, second = set_up(window, jobs=300)
        assert pool.origin == T0 and pool.next_boundary() == T0 and not pool.setting_up(T0)
        commit = pool.commit()
        runs.append((actions(first), second, commit.commit.assignments, dump_pool(pool)))
    assert runs[0] == runs[1]
    assert any(action == "start" for _, action, _ in runs[0][0])


def test_without_a_window_a_backlog_read_with_the_configuration_costs_the_apps_their_floors():
    _, first, second = set_up(None)
    assert any(e.decision.action == "start" for e in first if isinstance(e, Decided))
    refused = [e for e in second if isinstance(e, Rejected)]
    assert len(refused) == 3 and all(r.reason.startswith("min_gpus: 16 GPUs cannot be kept") for r in refused)


def test_nothing_starts_in_the_window_and_step_0_begins_when_it_closes():
    pool, first, second = set_up(5)
    assert pool.origin == T0 + timedelta(seconds=5) and pool.next_boundary() == pool.origin
    assert pool.setting_up(T0) and not pool.setting_up(pool.origin)
    decided = [e.decision for e in first if isinstance(e, Decided)]
    assert len(decided) == 1000 and not pool.planner.running
    assert {d.action for d in decided} == {"planned", "queued"}
    at_zero = [d for d in decided if d.action == "planned" and d.start_step == 0]
    assert at_zero and all(SETUP in d.reason for d in at_zero)
    assert second == []  # every app registered: nothing runs, so every floor fits


def test_apps_registered_in_the_window_hold_their_floors_from_the_first_commit():
    pool, _, _ = set_up(5)
    commit = pool.commit().commit
    assert commit.step == 0 and commit.started
    for app in APPS:
        held = len(commit.assignments[app["id"]])
        assert app["min_gpus"] <= held <= app["max_gpus"], (app["id"], held)
    assert len(pool.planner.queued) > 500  # the backlog larger than the pool waits its turn
    later = pool.commit().commit
    assert all(APPS[k]["min_gpus"] <= len(later.assignments[a["id"]]) for k, a in enumerate(APPS))


def test_an_arrival_after_the_window_starts_at_once_and_a_later_configuration_does_not_reopen_it():
    pool, _, _ = set_up(5, jobs=20)
    origin = pool.origin
    pool.commit()
    resized = {**POOL, "gpus": 512, "setup_seconds": 5}
    later = origin + timedelta(minutes=1)
    assert pool.apply([ev("pool.configured", resized, minutes=1)], later) == []
    assert pool.origin == origin and pool.planner.config.gpus == 512
    job = ev("job.submitted", {"id": "late", "kind": "training", "priority": 9, "gpus": 8, "duration": 2}, 1, "late")
    [decided] = pool.apply([job], later)
    assert decided.decision.action == "start"


def test_a_window_opened_by_a_later_configuration_is_ignored():
    pool = Pool()
    pool.apply([ev("pool.configured", POOL)], T0)
    pool.apply([ev("pool.configured", {**POOL, "setup_seconds": 60})], T0)
    assert pool.origin == T0 and not pool.setting_up(T0)
    [decided] = pool.apply(backlog(1), T0)
    assert decided.decision.action == "start"


@pytest.mark.parametrize("value", [-1, 600.5, "nan", "inf"])
def test_a_window_out_of_range_is_refused_naming_the_field(value):
    with pytest.raises(ValueError, match="setup_seconds"):
        parse_event(
            {
                "event_id": "c",
                "type": "pool.configured",
                "occurred_at": T0.isoformat(),
                "payload": {"gpus": 8, "setup_seconds": value},
            }
        )


def windowed(records: list[Record], setup_seconds: float) -> list[Record]:
    """`records` with their pool configured with a set-up window."""
    config = {"gpus": 16, "gpus_per_node": 8, "horizon": 8, "gpu_type": "a100-80gb", "setup_seconds": setup_seconds}
    first = records[0]
    return [
        Record(first.topic, first.partition, first.offset, first.key, message("pool.configured", config, 0, LEDGER_T0)),
        *records[1:],
    ]


@pytest.mark.parametrize("seed", [3, 11, 2026])
def test_a_replay_with_a_window_makes_the_same_messages_and_state(seed):
    """Passes every 5 s, the window 12 s: passes 0-2 lie in it (no commit: the agent commits a
    step only once its start has come), the later ones commit; a replay from the start, and from
    a snapshot taken in the window, makes the same messages and ends in the same state."""
    records = windowed(stream(seed, 60), 12)
    cuts = list(range(4, 60, 4))
    commits = [0, 0, 0] + [1, 0, 2] * 6
    d, outputs, entries, snapshots = live(records, cuts, commits)
    decided = [
        (datetime.fromisoformat(m["occurred_at"]), m["payload"]) for m in outputs if m["type"] == "allocation.decided"
    ]
    early = [p for at, p in decided if at < LEDGER_T0 + timedelta(seconds=12)]
    assert early and all(p["action"] != "start" for p in early)
    assert any(m["payload"]["started"] for m in outputs if m["type"] == "plan.committed")
    again, replayed = replay(entries, records)
    assert replayed == outputs and dump_pool(again.interpreter) == dump_pool(d.interpreter)
    restored = fresh()
    restored.restore(snapshots[1])  # taken after pass 1, in the window
    assert restored.interpreter.origin == LEDGER_T0 + timedelta(seconds=12)
    tail, _ = replay(entries[2:], records, restored)
    assert dump_pool(tail.interpreter) == dump_pool(d.interpreter) and tail.seq == d.seq


def test_a_configuration_needing_newer_rules_is_refused_and_the_pool_goes_on():
    pool = Pool()
    newer = {**POOL, "rules": RULES + 2}
    effects = pool.apply([*backlog(2), ev("pool.configured", newer, ref="cfg")], T0)
    assert effects == [
        Rejected(
            "cfg",
            f"rules: this configuration needs planning rules {RULES + 2}; this agent plans by rules {RULES} "
            f"(gpualloc {package_version()}): upgrade the agent",
        )
    ]
    assert pool.planner is None and len(pool.pending) == 2  # its events wait for a configuration it can plan by
    effects = pool.apply([ev("pool.configured", {**POOL, "rules": RULES})], T0)
    assert [e.decision.action for e in effects if isinstance(e, Decided)] == ["start", "start"]
    [refused] = pool.apply([ev("pool.configured", {**newer, "gpus": 512}, ref="resize")], T0)
    assert refused.ref == "resize" and refused.reason.startswith("rules: ") and pool.planner.config.gpus == 256


def test_the_agent_dead_letters_a_configuration_needing_newer_rules():
    d = fresh(RUN)
    config = message("pool.configured", {"gpus": 16, "rules": RULES + 1}, 0, LEDGER_T0)
    [letter] = [o.message for o in d.handle([Record("gpualloc.config", 0, 0, "default", config)], LEDGER_T0)]
    assert letter["type"] == "input.rejected"
    assert letter["payload"]["reason"].startswith(f"rules: this configuration needs planning rules {RULES + 1}; ")
    assert d.interpreter.planner is None
