"""Hostile input, property-based: a pool's good events interleaved with bad ones of every kind
(tests/hostile.py). Nothing raises; each bad record is answered by exactly one dead letter or
`rejected` decision naming the field; and the pool ends exactly as it does without the bad ones:
the same decisions for the good jobs, the same commits, the same planner state."""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta, timezone

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.hostile import HOSTILE_IDS, envelope, hostile, job, topic_of

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record
from gpualloc.schemas.limits import LIMITS
from gpualloc.schemas.published import InputRejected
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.snapshot import dump_pool
from gpualloc.solvers.release import RULES

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)
GPUS = 16
RUN = {"policy": "heuristic", "effort": 0.05, "step_seconds": 10, "every": 0, "rules": RULES}
FIELD_AND_RULE = re.compile(r"^[\w.\[\](), ]+: \S")  # "gpus: must be ...", "payload.duration: Input should ..."


def good_passes(seed: int, passes: int) -> list[list[bytes]]:
    """The pool, an app, jobs (some with ids full of shell metacharacters), traffic, a node
    going down and up: every event valid, in passes of a few."""
    rng = random.Random(seed)
    n = 0

    def make(kind: str, payload: dict, at: datetime) -> bytes:
        nonlocal n
        n += 1
        return orjson.dumps(envelope(kind, payload, f"good-{n}", at))

    out = [
        [
            make("pool.configured", {"gpus": GPUS, "gpus_per_node": 8, "horizon": 8}, T0),
            make("app.registered", {"id": "chat", "priority": 5, "min_gpus": 1, "max_gpus": 4}, T0),
        ]
    ]
    ids = iter(HOSTILE_IDS + [f"j{k}" for k in range(10_000)])
    for k in range(1, passes):
        at = T0 + timedelta(seconds=5 * k)
        batch = []
        for _ in range(rng.randint(0, 4)):
            roll = rng.random()
            if roll < 0.7:
                batch.append(
                    make(
                        "job.submitted",
                        job(
                            next(ids),
                            gpus=rng.choice([1, 2, 4, 8]),
                            duration=rng.randint(1, 4),
                            priority=rng.randint(1, 9),
                        ),
                        at,
                    )
                )
            elif roll < 0.9:
                batch.append(make("traffic.observed", {"app": "chat", "gpus": rng.randint(0, 5)}, at))
            else:
                batch.append(make("node.status", {"node": 1, "state": rng.choice(["up", "down"])}, at))
        out.append(batch)
    return out


def run(passes: list[list[bytes]], commit_every: int):
    """The agent's way with these passes (pass k at T0 + 5k s, a commit every few passes):
    the dispatcher, its outputs, and which record each output answers."""
    d = Dispatcher("default", interpreter=Pool())
    d.use(RUN)
    outputs = []
    offsets: dict[str, int] = {}
    for k, values in enumerate(passes):
        now = T0 + timedelta(seconds=5 * k)
        records = []
        for value in values:
            topic = f"gpualloc.{topic_of(value)}"
            records.append(Record(topic, 0, offsets.setdefault(topic, 0), "default", value))
            offsets[topic] += 1
        outputs += [o.message for o in d.handle(records, now)]
        if d.interpreter.planner is not None and k % commit_every == 0:
            outputs += [o.message for o in d.commit(now)]
        d.seal(RUN)
    return d, outputs


def decisions(outputs: list[dict]) -> dict[str, tuple]:
    return {
        m["payload"]["input_event_id"]: (
            m["payload"]["job_id"],
            m["payload"]["action"],
            tuple(m["payload"]["gpus"]),
            m["payload"]["start_step"],
        )
        for m in outputs
        if m["type"] == "allocation.decided"
    }


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 100_000), passes=st.integers(2, 25), bad=st.integers(1, 60), commit_every=st.integers(1, 3))
def test_bad_messages_are_each_answered_once_and_change_nothing(seed, passes, bad, commit_every):
    rng = random.Random(seed)
    good = good_passes(seed, passes)
    mixed = [list(values) for values in good]
    sent: list[str] = []
    for n in range(bad):
        k = rng.randrange(1, len(mixed))  # after the pool's configuration...
        recent = [orjson.loads(v)["event_id"] for values in good[max(0, k - 2) : k] for v in values]
        value = hostile(rng, n, T0 + timedelta(seconds=5 * k), GPUS, recent)
        mixed[k].insert(rng.randrange(len(mixed[k]) + 1), value)
        sent.append(value)
    clean, clean_out = run(good, commit_every)
    dirty, dirty_out = run(mixed, commit_every)

    letters = [InputRejected.model_validate(m["payload"]) for m in dirty_out if m["type"] == "input.rejected"]
    refused = {e: d for e, d in decisions(dirty_out).items() if d[1] == "rejected" and e.startswith("bad-")}
    assert len(letters) + len(refused) == bad  # each bad message answered once...
    assert not any(m["type"] == "input.rejected" for m in clean_out)
    for letter in letters:
        assert FIELD_AND_RULE.match(letter.reason), letter.reason  # ...naming the field and the rule
        assert len(letter.original) <= LIMITS.original_chars and len(letter.reason) <= LIMITS.text_chars
        assert len(orjson.dumps(letter.model_dump())) < 200_000  # a dead letter stays far below the broker's limit
    assert {e: d for e, d in decisions(dirty_out).items() if e not in refused} == decisions(clean_out)
    commits = [
        [m["payload"][k] for k in ("step", "assignments", "plan", "objective")]
        for m in dirty_out
        if m["type"] == "plan.committed"
    ]
    assert commits == [
        [m["payload"][k] for k in ("step", "assignments", "plan", "objective")]
        for m in clean_out
        if m["type"] == "plan.committed"
    ]
    assert dump_pool(dirty.interpreter)["planner"] == dump_pool(clean.interpreter)["planner"]


def test_an_event_id_reused_with_another_payload_is_dead_lettered_and_a_redelivery_dropped():
    first = orjson.dumps(envelope("job.submitted", job("a"), "e1", T0))
    again = orjson.dumps(envelope("job.submitted", job("a"), "e1", T0 + timedelta(seconds=1)))  # resent later
    other = orjson.dumps(envelope("job.submitted", job("b"), "e1", T0))
    d, out = run([[orjson.dumps(envelope("pool.configured", {"gpus": 8}, "c", T0)), first], [again], [other]], 5)
    assert [m["payload"]["job_id"] for m in out if m["type"] == "allocation.decided"] == ["a"]
    (letter,) = [m["payload"] for m in out if m["type"] == "input.rejected"]
    assert letter["reason"].startswith("event_id: 'e1' was used before by another event")


def test_a_dead_letter_keeps_a_cut_original_with_its_length_and_digest():
    import hashlib

    value = orjson.dumps(envelope("job.submitted", job("big", pad="z" * 900_000), "e9", T0))
    d, out = run([[orjson.dumps(envelope("pool.configured", {"gpus": 8}, "c", T0)), value]], 5)
    (letter,) = [m["payload"] for m in out if m["type"] == "input.rejected"]
    assert letter["reason"] == f"value: {len(value)} bytes, more than the limit of {LIMITS.input_bytes}"
    assert letter["truncated"] and len(letter["original"]) == LIMITS.original_chars
    assert letter["original_bytes"] == len(value) and letter["original_sha256"] == hashlib.sha256(value).hexdigest()


def test_an_event_more_than_a_horizon_ahead_is_refused_and_one_within_it_taken():
    config = orjson.dumps(envelope("pool.configured", {"gpus": 8, "horizon": 4}, "c", T0))
    near = orjson.dumps(envelope("job.submitted", job("near"), "e1", T0 + timedelta(seconds=39)))  # 4 steps of 10 s
    far = orjson.dumps(envelope("job.submitted", job("far"), "e2", T0 + timedelta(seconds=41)))
    d, out = run([[config, near, far]], 5)
    assert [m["payload"]["job_id"] for m in out if m["type"] == "allocation.decided"] == ["near"]
    (letter,) = [m["payload"] for m in out if m["type"] == "input.rejected"]
    assert letter["reason"].startswith("occurred_at: ") and "more than one horizon (4 steps)" in letter["reason"]
