"""The ledger: every transaction records its inputs in order and its commits, so a replay from
the start, or from any snapshot, makes the same messages and ends in the same state."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta, timezone

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.feature_jobs import feature_job

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.plan_ahead import hot_plan
from gpualloc.bus.topics import Record
from gpualloc.schemas.published import PassRecorded, PoolSnapshot, PoolSnapshotPart
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import FullModePlan
from gpualloc.solvers.planner.snapshot import SnapshotError, dump_pool, unpack
from gpualloc.solvers.policies.fifo import fifo_schedule
from gpualloc.solvers.release import RULES, NewerRelease

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
RUN = {
    "policy": "heuristic",
    "effort": 0.05,
    "step_seconds": 10,
    "every": 0,
    "replan_work": 4096,
    "rules": RULES,
}  # passes replan small queues


def message(kind: str, payload: dict, n: int, at: datetime) -> bytes:
    return orjson.dumps(
        {
            "event_id": f"e{n}",
            "type": kind,
            "occurred_at": at.isoformat(),
            "pool": "default",
            "schema_version": 1,
            "payload": payload,
        }
    )


def stream(seed: int, count: int) -> list[Record]:
    """Arrivals (a third given by their features, so the forecasters size them and learn from
    their completions; some with time limits), completions, cancellations, traffic, a node going
    down and up, a bad message."""
    rng = random.Random(seed)
    out = [
        Record(
            "gpualloc.config",
            0,
            0,
            "default",
            message("pool.configured", {"gpus": 16, "gpus_per_node": 8, "horizon": 8, "gpu_type": "a100-80gb"}, 0, T0),
        )
    ]
    out.append(
        Record(
            "gpualloc.traffic",
            0,
            0,
            "chat",
            message("app.registered", {"id": "chat", "priority": 6, "min_gpus": 1, "max_gpus": 4}, 1, T0),
        )
    )
    offsets = {"gpualloc.jobs": 0, "gpualloc.traffic": 1, "gpualloc.config": 1}
    for n in range(2, count):
        at = T0 + timedelta(seconds=3 * n)
        roll = rng.random()
        if roll < 0.2:
            topic, body = "gpualloc.jobs", message("job.submitted", feature_job(rng, f"j{n}"), n, at)
        elif roll < 0.6:
            topic, body = (
                "gpualloc.jobs",
                message(
                    "job.submitted",
                    {
                        "id": f"j{n}",
                        "kind": "training",
                        "priority": rng.randint(1, 9),
                        "gpus": rng.choice([1, 2, 4, 8]),
                        "duration": rng.randint(1, 5),
                        **({"time_limit": n % 3 + 1} if n % 4 == 0 else {}),  # some never complete in time
                    },
                    n,
                    at,
                ),
            )
        elif roll < 0.75 and n > 2:
            ended = {"id": f"j{rng.randrange(2, n)}"}
            if rng.random() < 0.5:
                ended["used"] = {"gpus": rng.choice([1, 2]), "peak_memory_gb": rng.uniform(10, 70)}
            topic, body = "gpualloc.jobs", message(rng.choice(["job.completed", "job.cancelled"]), ended, n, at)
        elif roll < 0.9:
            topic, body = (
                "gpualloc.traffic",
                message("traffic.observed", {"app": "chat", "requests_per_s": rng.uniform(0, 5)}, n, at),
            )
        elif roll < 0.95:
            topic, body = (
                "gpualloc.config",
                message("node.status", {"node": 1, "state": rng.choice(["up", "down"])}, n, at),
            )
        else:
            topic, body = "gpualloc.jobs", b"{not json"
        out.append(Record(topic, 0, offsets[topic], None, body))
        offsets[topic] += 1
    return out


def fresh(run: dict = RUN) -> Dispatcher:
    """A dispatcher planning as the recorded `run` says, as the agent's always does."""
    d = Dispatcher("default", interpreter=Pool())
    d.use(run)
    return d


def shared(records: list[Record], seed: int) -> list[Record]:
    """`records` keyed by their pool, on partitions shared with another pool's records (which
    the pool passes over) and a few keyed by the pool but naming the other (dead-lettered)."""
    rng = random.Random(seed)
    out = []
    for r in records:
        if rng.random() < 0.4:
            out.append(Record(r.topic, 0, 0, "other", r.value.replace(b'"pool":"default"', b'"pool":"other"')))
        if rng.random() < 0.05:
            out.append(Record(r.topic, 0, 0, "default", r.value.replace(b'"pool":"default"', b'"pool":"other"')))
        out.append(Record(r.topic, 0, 0, "default", r.value))
    offsets: dict[str, int] = {}
    for k, r in enumerate(out):
        out[k] = Record(r.topic, 0, offsets.setdefault(r.topic, 0), r.key, r.value)
        offsets[r.topic] += 1
    return out


def live(
    records: list[Record],
    cuts: list[int],
    commits: list[int],
    adopt_at: int | None = None,
    run: dict = RUN,
    aheads: dict[int, bool] | None = None,
):
    """The agent's way: passes of records (split at `cuts`), a commit after some passes, a ledger
    entry per pass; an offered full-mode plan (FIFO's, to be adopted or not) at `adopt_at`; after
    the passes in `aheads`, the window cut for the next boundary's plan, made ahead (`aheads[k]`:
    made in time for its boundary, else never delivered). A snapshot after each pass but those
    whose cut waits for its boundary (the agent takes none then): None in their place."""
    d = fresh(run)
    aheads = aheads or {}
    outputs, entries, snapshots = [], [], []
    bounds = [0] + sorted(set(cuts)) + [len(records)]
    for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        now = T0 + timedelta(seconds=5 * k)
        out = d.handle(records[lo:hi], now) if hi > lo else []
        for _ in range(commits[k % len(commits)]):
            plan = None
            if k == adopt_at and d.interpreter.planner is not None:
                problem = d.interpreter.planner.window_problem()
                plan = FullModePlan(d.interpreter.planner.now, fifo_schedule(problem), 0.0)
            if d.interpreter.planner is not None:
                out += d.commit(now, plan)
        if k in aheads and (problem := d.cut(now)) is not None and aheads[k]:
            d.planned_ahead(d.interpreter.planner.now, hot_plan(problem, run["policy"], run["effort"]))
        sealed = d.seal(run)
        outputs += out
        if sealed:
            entries.append(PassRecorded.model_validate(sealed[-1].message["payload"]))
            snapshots.append(
                None
                if d.interpreter.planner is not None and d.interpreter.planner.ahead is not None
                else PoolSnapshot.model_validate(d.snapshot(now, 0, len(entries), 0)[0].message["payload"])
            )
    return d, [o.message for o in outputs], entries, snapshots


def unsolved(ahead):
    return ahead and dataclasses.replace(ahead, schedule=None)


def replay(entries: list[PassRecorded], records: list[Record], start: Dispatcher | None = None):
    index = {(r.topic, r.partition, r.offset): r for r in records}
    d = start or fresh()
    out = []
    for entry in entries:
        out += d.replay(entry, lambda t, p, o: index[t, p, o]).outputs
    return d, [o.message for o in out]


@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.integers(0, 60), max_size=25),
    commits=st.lists(st.integers(0, 2), min_size=1, max_size=6),
    adopt_at=st.integers(0, 10),
    aheads=st.dictionaries(st.integers(0, 25), st.booleans(), max_size=8),
)
def test_a_replay_of_the_ledger_makes_the_same_messages_and_state(seed, cuts, commits, adopt_at, aheads):
    records = stream(seed, 60)
    d, outputs, entries, snapshots = live(records, cuts, commits, adopt_at, aheads=aheads)
    again, replayed = replay(entries, records)
    assert replayed == outputs
    assert dump_pool(again.interpreter) == dump_pool(d.interpreter)
    assert (again.seq, again.txn, again.frontier) == (d.seq, d.txn, d.frontier)
    if (
        d.interpreter.planner is not None
    ):  # the same cut waits (a replay makes its plan, which the agent may not have had yet)
        assert unsolved(again.interpreter.planner.ahead) == unsolved(d.interpreter.planner.ahead)
    taken = [k for k, snap in enumerate(snapshots[: len(entries) // 2]) if snap is not None]
    if len(entries) > 2 and taken:  # from a snapshot in the middle: the same end state
        k = taken[-1] + 1
        restored = fresh()
        restored.restore(snapshots[k - 1])
        tail, _ = replay(entries[k:], records, restored)
        assert dump_pool(tail.interpreter) == dump_pool(d.interpreter) and tail.seq == d.seq


@settings(max_examples=examples(15), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.integers(0, 90), max_size=25),
    commits=st.lists(st.integers(0, 2), min_size=1, max_size=6),
)
@example(seed=3381, cuts=[3, 27], commits=[2])  # a reactive commit in a pass that passed over another pool's record
def test_a_keyed_pool_on_a_shared_partition_replays_alike_and_reads_only_its_records(seed, cuts, commits):
    records = shared(stream(seed, 60), seed)
    keyed = {**RUN, "keyed": True}
    d, outputs, entries, snapshots = live(records, cuts, commits, run=keyed)
    again, replayed = replay(entries, records)
    assert replayed == outputs and (not entries or again.frontier == entries[-1].frontier)
    listed = {(t, o) for entry in entries for t, _, first, last in entry.inputs for o in range(first, last + 1)}
    assert all(r.key == "default" for r in records if (r.topic, r.offset) in listed)  # never another pool's
    ends = {f"{t}:0": sum(1 for r in records if r.topic == t) for t in {r.topic for r in records}}
    assert d.frontier == ends  # past the other pool's records too, so a restart does not read them again
    strays = [r for r in records if r.key == "default" and b'"pool":"other"' in r.value]
    letters = [
        m for m in outputs if m["type"] == "input.rejected" and "must be the record's key" in m["payload"]["reason"]
    ]
    assert len(letters) == len(strays)
    plain = fresh()  # a single-pool agent takes the pool's records by their envelope, whatever the key
    assert not any(
        m.message["type"] == "input.rejected" and "record's key" in m.message["payload"]["reason"]
        for m in plain.handle(records, T0)
    )


def test_the_ledger_entry_lists_inputs_as_runs_and_the_frontier():
    records = stream(3, 12)
    d = fresh()
    d.handle(records, T0)
    d.commit(T0)
    entry = PassRecorded.model_validate(d.seal(RUN)[-1].message["payload"])
    covered = sum(last - first + 1 for _, _, first, last in entry.inputs)
    assert covered == len(records) and entry.commits[0].seq == 1 and entry.run == RUN
    assert entry.frontier == {
        f"{t}:0": max(r.offset for r in records if r.topic == t) + 1 for t in {r.topic for r in records}
    }
    assert d.seal(RUN) == []  # nothing consumed or committed since


def test_a_snapshot_of_another_version_is_refused_with_a_reason():
    d = fresh()
    d.handle(stream(1, 5), T0)
    d.commit(T0)
    d.seal(RUN)
    snap = PoolSnapshot.model_validate(d.snapshot(T0, 0, 1, 0)[0].message["payload"])
    with pytest.raises(NewerRelease, match="written by a newer release \\(snapshot version 99"):
        fresh().restore(snap.model_copy(update={"version": 99}))
    with pytest.raises(SnapshotError, match="version 1: this release reads versions 2, 3, 4"):
        fresh().restore(snap.model_copy(update={"version": 1}))
    with pytest.raises(SnapshotError, match="damaged"):
        fresh().restore(snap.model_copy(update={"state": "not a snapshot"}))


def test_the_dedup_window_in_a_snapshot_is_bounded_by_steps():
    d = Dispatcher("default", interpreter=Pool(step_seconds=10), dedup_steps=1)
    d.handle(stream(2, 30), T0)
    for _ in range(4):
        d.commit(T0)
    d.handle(
        [
            Record(
                "gpualloc.jobs",
                0,
                999,
                None,
                message(
                    "job.submitted",
                    {"id": "late", "kind": "training", "priority": 1, "gpus": 1, "duration": 1},
                    999,
                    T0,
                ),
            )
        ],
        T0,
    )
    d.seal(RUN)
    snap = PoolSnapshot.model_validate(d.snapshot(T0, 0, 1, 0)[0].message["payload"])
    assert [entry[0] for entry in unpack(snap.state)["seen"]] == ["e999"]


def test_a_snapshot_stays_under_the_message_limit(monkeypatch):
    from gpualloc.agent.service import dispatcher

    d = fresh()
    d.handle(stream(4, 40), T0)
    d.commit(T0)
    d.seal(RUN)
    [whole] = d.snapshot(T0, 0, 1, 0)
    full = len(whole.message["payload"]["state"])
    monkeypatch.setattr(dispatcher, "SNAPSHOT_BYTES", full - 1)  # the window must shrink to fit
    [record] = d.snapshot(T0, 0, 1, 0)
    smaller = PoolSnapshot.model_validate(record.message["payload"])
    assert len(smaller.state) < full and 0 < len(unpack(smaller.state)["seen"]) < 40
    size = full // 5  # not even the pool fits one record: the state is split into parts
    monkeypatch.setattr(dispatcher, "SNAPSHOT_BYTES", size)
    records = d.snapshot(T0, 0, 1, 3)
    snap = PoolSnapshot.model_validate(records[0].message["payload"])
    parts = [PoolSnapshotPart.model_validate(r.message["payload"]) for r in records[1:]]
    assert snap.parts == len(records) > 1 and [p.part for p in parts] == list(range(1, len(records)))
    assert [r.key for r in records] == ["default"] + [f"default\x00{p.part}" for p in parts]
    assert {r.partition for r in records} == {3} and all(len(r.message["payload"]["state"]) <= size for r in records)
    assert len(records) == -(-len(snap.state + "".join(p.state for p in parts)) // size)
    restored = fresh()
    restored.restore(snap, {p.part: p.state for p in parts})
    assert dump_pool(restored.interpreter) == dump_pool(d.interpreter)
    assert restored.seen.newest() == d.seen.newest()[len(d.seen) - len(restored.seen) :]  # the newest that fit
    with pytest.raises(SnapshotError, match="part 2 of parts 1-"):
        fresh().restore(snap, {p.part: p.state for p in parts if p.part != 2})
