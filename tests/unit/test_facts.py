"""What was bound stays bound across releases: a ledger replayed by a planner of other rules is
held to the facts each entry recorded (jobs where and since when they were bound, their time
limits, apps' sets, the committed step's GPUs), and the pool it rebuilds commits as the one that
wrote the ledger would have: no bound job moved, dropped or doubled."""

from __future__ import annotations

import random
from datetime import timedelta
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from test_ledger import RUN, T0, fresh, live, stream

from gpualloc.agent.operator.audit import compare
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.history import with_facts
from gpualloc.bus.topics import Record, Topics
from gpualloc.schemas.published import PassFactsPart, PassRecorded
from gpualloc.solvers.planner.facts import Change, Facts, dump_change, hold, load_change
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.pool_state import PlannerState
from gpualloc.solvers.planner.records import JobSpec, PoolConfig, Running
from gpualloc.solvers.release import RULES, NewerRelease

OTHER_RULES = {**RUN, "policy": "fifo"}  # a planner that decides otherwise from the same inputs


def bound(d: Dispatcher) -> tuple:
    """What `d`'s pool has bound: running jobs (GPUs, start, limit), apps' sets, committed GPUs."""
    view = d.reads.view
    assert view is not None
    return (
        {job_id: (r.mask, r.start, r.spec.time_limit) for job_id, r in view.running.items()},
        {app_id: (a.held, a.before, a.granted) for app_id, a in view.apps.items()},
        d.interpreter.facts().committed,
        d.seq,
    )


def replayed_by_other_rules(entries: list[PassRecorded], records: list[Record], facts: bool = True):
    """`entries` replayed by FIFO's rules (with their recorded facts, or, `facts` False, as a
    release that recorded none would have them); the dispatcher and where the replay's own
    facts differed from the recorded ones."""
    index = {(r.topic, r.partition, r.offset): r for r in records}
    d = fresh()
    differs = []
    for entry in entries:
        entry = entry.model_copy(update={"run": {**entry.run, **OTHER_RULES}, **({} if facts else {"facts": None})})
        differs.append(d.replay(entry, lambda t, p, o: index[t, p, o]).differs)
    return d, differs


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(0, 80), max_size=30))
def test_a_replay_by_other_rules_holds_every_bound_job_where_it_was_bound(seed, cuts):
    records = stream(seed, 80)
    d, _, entries, _ = live(records, cuts, [1, 0, 2])
    other, differs = replayed_by_other_rules(entries, records)
    assert bound(other) == bound(d)
    # the pool it rebuilt commits alike: every running job on its GPUs, nothing moved or doubled
    other.use(RUN)  # a restarted agent plans by its own settings from here on
    later = T0 + timedelta(hours=1)
    held = set(d.reads.view.running)  # bound before the commit: kept, or failed at their time limits alike
    mine = d.commit(later)[-1].message["payload"]["assignments"]
    theirs = other.commit(later)[-1].message["payload"]["assignments"]
    for job_id in held:
        assert theirs.get(job_id) == mine.get(job_id), job_id
    # then each plans anew (the planners' histories differ, so what each starts may differ): what
    # either has bound stays where it is in its own later commits
    for _ in range(2):
        before = theirs
        kept = set(other.reads.view.running)
        theirs = other.commit(later)[-1].message["payload"]["assignments"]
        for job_id in kept:
            assert theirs.get(job_id) in (before.get(job_id), None), job_id
        owners = [g for gpus in theirs.values() for g in gpus]
        assert len(owners) == len(set(owners))


def test_without_recorded_facts_other_rules_lose_what_was_bound():
    """The test above can fail: the same ledger replayed by other rules without its facts binds
    other jobs than were bound (and the replay says where the facts differ when it has them)."""
    records = stream(7, 80)
    d, _, entries, _ = live(records, [10, 20, 30, 40, 50, 60], [1, 0, 2])
    other, _ = replayed_by_other_rules(entries, records, facts=False)
    assert bound(other)[0] != bound(d)[0]
    _, differs = replayed_by_other_rules(entries, records)
    assert any(differs)
    assert any("facts.started" in x for x in differs if x)


def test_a_replay_by_its_own_rules_plans_the_facts_it_recorded():
    records = stream(3, 80)
    _, _, entries, _ = live(records, [15, 30, 45, 60], [1, 2, 0])
    index = {(r.topic, r.partition, r.offset): r for r in records}
    again = fresh()
    assert all(entry.facts is not None for entry in entries)
    assert [again.replay(entry, lambda t, p, o: index[t, p, o]).differs for entry in entries] == [None] * len(entries)


def test_facts_round_trip_and_rebuild_the_pool_they_came_from():
    records = stream(11, 60)
    d, _, entries, _ = live(records, [20, 40], [1, 1, 0])
    facts = Facts()
    for entry in entries:
        assert entry.facts is not None
        change = load_change(entry.facts)
        assert dump_change(change) == entry.facts
        facts = change.after(facts)
    assert {k: (r.mask, r.start) for k, r in facts.running.items()} == {
        k: (r.mask, r.start) for k, r in d.reads.view.running.items()
    }
    assert facts.committed == d.interpreter.facts().committed


def test_damaged_facts_name_what_is_wrong():
    with pytest.raises(ValueError, match="facts: not a recorded change"):
        load_change({"started": {"j": [["training", 1, 2, 3, 0, True, None], [0, 2, 4], 0]}})
    assert not Change()


def test_an_entry_of_a_newer_release_is_refused_with_its_versions():
    records = stream(5, 30)
    _, _, entries, _ = live(records, [10], [1])
    index = {(r.topic, r.partition, r.offset): r for r in records}
    newer = entries[0].model_copy(update={"run": {**entries[0].run, "rules": RULES + 1, "schema": 7}})
    with pytest.raises(
        NewerRelease, match=rf"ledger entry 1: written by a newer release \(schema 7, rules {RULES + 1}\)"
    ):
        fresh().replay(newer, lambda t, p, o: index[t, p, o])


def test_facts_at_the_contracts_limits_travel_in_parts():
    """4,096 one-GPU jobs with 200-character ids started in one pass: the entry's facts go in
    `pass.facts.part` records of at most a message each, and read back whole."""
    rng = random.Random(1)
    d = Dispatcher("default", interpreter=Pool())
    d.use({**RUN, "replan_work": 0})
    config = Record(
        "gpualloc.config",
        0,
        0,
        None,
        b'{"event_id":"c","type":"pool.configured","occurred_at":"2026-11-29T12:00:00Z","pool":"default",'
        b'"schema_version":1,"payload":{"gpus":4096,"gpus_per_node":8,"horizon":336}}',
    )
    d.handle([config], T0)
    d.seal(RUN)
    jobs = []
    for n in range(4096):
        job_id = f"{n:06d}" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(194))
        body = (
            b'{"event_id":"e%d","type":"job.submitted","occurred_at":"2026-11-29T12:00:00Z","pool":"default",'
            b'"schema_version":1,"payload":{"id":"%s","kind":"training","priority":3,"gpus":1,"duration":40}}'
            % (n, job_id.encode())
        )
        jobs.append(Record("gpualloc.jobs", 0, n, None, body))
    d.handle(jobs, T0)
    assert len(d.reads.view.running) == 4096
    sealed = d.seal(RUN)
    parts, entry = sealed[:-1], PassRecorded.model_validate(sealed[-1].message["payload"])
    assert parts and entry.facts is None and entry.facts_parts == len(parts)
    for part in parts:
        assert len(part.message["payload"]["text"]) <= 800_000
    (joined,) = with_facts([entry], [(None, PassFactsPart.model_validate(p.message["payload"])) for p in parts])
    assert len(joined.facts["started"]) == 4096
    with pytest.raises(ValueError, match="ledger entry 2: its facts' part 1 is missing"):
        with_facts([entry], [])


def upgraded(seed: int, at: int):
    """A pool whose agent of other rules (FIFO's, labelled the heuristic of rules 0) wrote the
    ledger for `records[:at]`, then an agent of this release recovered from that ledger and went
    on: the whole ledger, its records and every message published."""
    records = stream(seed, 90)
    index = {(r.topic, r.partition, r.offset): r for r in records}
    old, old_out, old_entries, _ = live(records[:at], [10, 25], [1, 0, 2], run=OTHER_RULES)
    relabelled = [e.model_copy(update={"run": {**e.run, "policy": "heuristic", "rules": 0}}) for e in old_entries]
    new = fresh()
    for entry in relabelled:
        new.replay(entry, lambda t, p, o: index[t, p, o])
    new.use(RUN)
    assert bound(new) == bound(old)
    outputs, entries = list(old_out), list(relabelled)
    for k in range(at, len(records), 7):
        now = T0 + timedelta(seconds=3 * k)
        outputs += [o.message for o in new.handle(records[k : k + 7], now)]
        outputs += [o.message for o in new.commit(now)]
        entries.append(PassRecorded.model_validate(new.seal(RUN)[-1].message["payload"]))
    return entries, index, outputs


def test_the_audit_replays_its_own_rules_and_judges_older_ones_by_the_contract():
    entries, index, outputs = upgraded(21, 45)
    history = SimpleNamespace(entries=entries, record_at=lambda t, p, o: index[t, p, o])
    published = {m["event_id"]: m for m in outputs}
    result = compare("default", Topics(), history, published)
    older = sum(e.run.get("rules", 1) < RULES for e in entries)
    assert result.ok, result.lines()
    assert (result.judged, result.replayed) == (older, len(entries) - older) and older and result.replayed
    assert any("judged by R1-R5" in line for line in result.lines())


def test_the_audit_finds_a_bound_job_moved_across_the_upgrade():
    """Judged entries are held to the contract: a published commit of the older rules that moves a
    running job is reported (the check can fail)."""
    entries, index, outputs = upgraded(21, 45)
    history = SimpleNamespace(entries=entries, record_at=lambda t, p, o: index[t, p, o])
    top = max(e.seq for e in entries if e.run.get("rules", 1) < RULES)
    forged = next(
        m
        for m in reversed(outputs)
        if m["type"] == "plan.committed"
        and m["payload"]["seq"] <= top
        and not m["payload"].get("reactive")
        and any(k.startswith("j") for k in m["payload"]["assignments"])
    )
    job = next(k for k in forged["payload"]["assignments"] if k.startswith("j"))
    moved = dict(forged, payload={**forged["payload"], "assignments": {**forged["payload"]["assignments"], job: [15]}})
    result = compare("default", Topics(), history, {m["event_id"]: m for m in outputs} | {moved["event_id"]: moved})
    assert any(job in v for v in result.illegal), result.lines()


def test_hold_binds_a_job_with_the_limit_it_was_bound_with_on_the_same_gpus():
    """A replay that started the job on the same GPUs at the same step, with another time limit
    and duration (forecasters that learnt otherwise): the recorded ones win."""
    state = PlannerState(PoolConfig(gpus=8, gpus_per_node=8, horizon=8), now=3)
    state.running["j"] = Running(JobSpec("j", "training", 3.0, 2, 4, 3, time_limit=5), 0b11, 3)
    state.committed = 0b11
    bound_spec = JobSpec("j", "training", 3.0, 2, 4, 3, time_limit=2)
    assert hold(state, Facts(), Change({"j": Running(bound_spec, 0b11, 3)}, {}, {}, 0b11))
    assert (state.running["j"].spec.time_limit, state.running["j"].spec.duration) == (2, 2)


@pytest.mark.parametrize("seed", [70, 78])
def test_the_audit_judges_older_rules_that_adopted_full_mode_plans_by_their_own_commits(seed):
    """An older planner's adopted full-mode plan, replayed on a window this planner made
    otherwise, is adopted only where legal here: the audit judges the published commits (legal on
    the recorder's windows), not the replay's, and goes on to the end."""
    rng = random.Random(seed)
    records = stream(seed, 90)
    cuts = sorted(rng.sample(range(1, 90), rng.randint(3, 30)))
    commits = [rng.choice([0, 1, 1, 2]) for _ in range(5)]
    k = len(cuts) + 1
    adopt_at = sorted(rng.sample(range(k), min(k, rng.randint(0, 4))))
    aheads = {i: rng.random() < 0.7 for i in rng.sample(range(k), min(k, rng.randint(0, 8)))}
    _, outputs, entries, _ = live(
        records, cuts, commits, adopt_at=adopt_at[0] if adopt_at else None, run=OTHER_RULES, aheads=aheads
    )
    assert any(c.schedule is not None for e in entries for c in e.commits)  # a full-mode plan was adopted
    older = [e.model_copy(update={"run": {**e.run, "policy": "heuristic", "rules": 1}}) for e in entries]
    index = {(r.topic, r.partition, r.offset): r for r in records}
    result = compare(
        "default",
        Topics(),
        SimpleNamespace(entries=older, record_at=lambda t, p, o: index[t, p, o]),
        {m["event_id"]: m for m in outputs},
    )
    assert result.ok and result.judged == len(entries), result.lines()
