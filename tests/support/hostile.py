"""Bad input for the agent, by kind: raw bytes, broken envelopes and payloads of every input
type, out-of-range numbers, ids that are not ids, reused event ids, unknown jobs and apps,
timestamps far ahead. Each bad message must be answered by exactly one dead letter (or a
`rejected` decision) and change nothing else; `hostile()` draws one, `HOSTILE_IDS` are legal ids
full of shell metacharacters that must be decided like any other.

Used by the pure property test (tests/test_hostile_input.py) and the real-broker flood
(tests/test_hostile_kafka.py), so both try the same cases.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any, Callable

import orjson

from gpualloc.bus.topics import Topics
from gpualloc.schemas.limits import LIMITS

# legal ids (printable, bounded) that a shell or a path would misread: decided like any other
HOSTILE_IDS = [
    "$(touch /tmp/gpualloc-pwned)",
    "a;rm -rf ~|b&&c",
    "`id`",
    "../../etc/passwd",
    "x' OR '1'='1",
    "%s%n%x",
    "* ? [a-z] {1,2}",
    "job with spaces",
    "ünïcødé-作业-🚀",
    "-rf",
    "--help",
]


def envelope(kind: str, payload: Any, event_id: str, at: datetime, pool: Any = "default", **extra: Any) -> dict:
    return {
        "event_id": event_id,
        "type": kind,
        "occurred_at": at.isoformat(),
        "pool": pool,
        "schema_version": 1,
        "payload": payload,
        **extra,
    }


def job(job_id: str, gpus: Any = 1, duration: Any = 2, priority: Any = 2, **extra: Any) -> dict:
    return {"id": job_id, "kind": "training", "priority": priority, "gpus": gpus, "duration": duration, **extra}


def _raw(rng: random.Random, n: int, at: datetime) -> bytes:
    """Bytes that are no contract message at all."""
    return rng.choice(
        [
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))),
            b'\xff\xfe\xfa not utf-8 {"event_id": 1}',
            b"{not json",
            b"",
            b"   ",
            b"NaN",
            b'{"priority": NaN}',
            b'{"gpus": 1e400}',
            b"[]",
            b"1",
            b'"a string"',
            b"null",
            b"true",
            b"[" * 5000 + b"]" * 5000,
            b'{"a":' * 3000 + b"1" + b"}" * 3000,
            orjson.dumps(
                envelope("job.submitted", job(f"big-{n}", pad="x" * (LIMITS.input_bytes + 10)), f"bad-{n}", at)
            ),
            orjson.dumps(envelope("job.submitted", job(f"huge-{n}", pad="y" * 1_000_000), f"bad-{n}", at)),
        ]
    )


def _envelope(rng: random.Random, n: int, at: datetime) -> dict:
    """A broken envelope around a good payload."""
    good = job(f"env-{n}")
    e = envelope("job.submitted", good, f"bad-{n}", at)
    breaks: list[Callable[[dict], None]] = [
        lambda m: m.pop("event_id"),
        lambda m: m.update(event_id=""),
        lambda m: m.update(event_id=7),
        lambda m: m.update(event_id="x" * (LIMITS.id_chars + 1)),
        lambda m: m.update(event_id=f"bad\n{n}"),
        lambda m: m.update(type="job.exploded"),
        lambda m: m.update(type="plan.committed"),
        lambda m: m.pop("type"),
        lambda m: m.update(schema_version=2),
        lambda m: m.update(schema_version="1"),
        lambda m: m.update(occurred_at="yesterday"),
        lambda m: m.update(occurred_at="2026-01-01T00:00:00"),
        lambda m: m.update(occurred_at=(at + timedelta(days=3650)).isoformat()),
        lambda m: m.update(occurred_at=None),
        lambda m: m.update(pool=5),
        lambda m: m.update(pool="po\nol"),
        lambda m: m.update(payload=[1, 2]),
        lambda m: m.update(payload=None),
        lambda m: m.pop("payload"),
    ]
    rng.choice(breaks)(e)
    return e


def _payload(rng: random.Random, n: int, at: datetime, gpus: int) -> dict:
    """A good envelope around a bad payload of some input type."""
    jid = f"bad-job-{n}"
    kind, payload = rng.choice(
        [
            ("job.submitted", job(jid, gpus=0)),
            ("job.submitted", job(jid, gpus=-1)),
            ("job.submitted", job(jid, gpus=3)),
            ("job.submitted", job(jid, gpus=gpus * 2)),
            ("job.submitted", job(jid, gpus=LIMITS.gpus * 2)),
            ("job.submitted", job(jid, gpus=1.5)),
            ("job.submitted", job(jid, gpus="2")),
            ("job.submitted", job(jid, duration=0)),
            ("job.submitted", job(jid, duration=-5)),
            ("job.submitted", job(jid, duration=10**12)),
            ("job.submitted", job(jid, priority=0)),
            ("job.submitted", job(jid, priority=-1)),
            ("job.submitted", job(jid, priority=1e30)),
            ("job.submitted", job(jid, priority="high")),
            ("job.submitted", job("", gpus=1)),
            ("job.submitted", job(f"new\nline-{n}")),
            ("job.submitted", job("i" * (LIMITS.id_chars + 1))),
            ("job.submitted", job(f"nul\x00{n}")),
            ("job.submitted", {**job(jid), "kind": "realtime"}),
            ("job.submitted", {**job(jid), "kind": None}),
            ("job.submitted", {"id": jid, "kind": "training", "priority": 1, "features": {"params": 7e9}}),
            ("job.submitted", {**job(jid), "features": "not an object"}),
            ("job.completed", {"id": f"ghost-{n}"}),
            ("job.cancelled", {"id": f"ghost-{n}"}),
            ("job.failed", {"id": f"ghost-{n}", "detail": "oom"}),
            ("job.completed", {}),
            ("app.registered", {"id": f"app-{n}", "priority": 1, "profile": [1] * 23}),
            ("app.registered", {"id": f"app-{n}", "priority": 1, "profile": [1] * 25}),
            ("app.registered", {"id": f"app-{n}", "priority": 1, "profile": [-1] * 24}),
            ("app.registered", {"id": f"app-{n}", "priority": 1, "current": [gpus + 5]}),
            ("app.registered", {"id": f"app-{n}", "priority": 1, "current": [0, 0]}),
            ("app.registered", {"id": f"app-{n}", "priority": 1, "min_gpus": 3, "max_gpus": 1}),
            ("app.registered", {"id": f"app-{n}", "priority": 1, "rps_per_gpu": 0}),
            ("app.registered", {"id": f"app-{n}", "priority": float("1e300")}),
            ("traffic.observed", {"app": f"ghost-app-{n}", "gpus": 2}),
            ("traffic.observed", {"app": "chat"}),
            ("traffic.observed", {"app": "chat", "requests_per_s": -3}),
            ("traffic.observed", {"app": "chat", "requests_per_s": 1e30}),
            ("traffic.observed", {"app": "chat", "gpus": LIMITS.gpus + 1}),
            ("node.status", {"node": 999, "state": "down"}),
            ("node.status", {"node": -1, "state": "down"}),
            ("node.status", {"node": 0, "state": "exploded"}),
            ("binding.reported", {"node": 0, "job_id": "x", "gpus": "all", "status": "bound"}),
            ("binding.reported", {"node": 0, "job_id": "x", "gpus": [0], "status": "maybe"}),
            ("pool.configured", {"gpus": 3, "gpus_per_node": 2}),
            ("pool.configured", {"gpus": 0}),
            ("pool.configured", {"gpus": gpus, "horizon": 10**6}),
            ("pool.configured", {"gpus": gpus, "time_decay": 1.5}),
        ]
    )
    return envelope(kind, payload, f"bad-{n}", at)


def hostile(rng: random.Random, n: int, at: datetime, gpus: int, reused: list[str]) -> bytes:
    """One bad message (the `n`-th), stamped `at`, for a pool of `gpus` GPUs; `reused`: event
    ids of good events already sent, one of which a bad message may reuse with another payload."""
    roll = rng.random()
    if roll < 0.25:
        return _raw(rng, n, at)
    if roll < 0.45:
        message = _envelope(rng, n, at)
    elif roll < 0.95 or not reused:
        message = _payload(rng, n, at, gpus)
    else:
        message = envelope("job.submitted", job(f"reuse-{n}"), rng.choice(reused), at)
    return orjson.dumps(message)


def topic_of(value: bytes) -> str:
    """The input topic a bad message is sent to: its type's (`Topics.of_type`) when that is an
    input topic; else the jobs topic. An attribute name of `Topics`."""
    try:
        kind = orjson.loads(value).get("type", "")
        topic = Topics().of_type(kind) if isinstance(kind, str) else None
    except (orjson.JSONDecodeError, AttributeError, KeyError):
        topic = None
    names = {getattr(Topics(), name): name for name in ("jobs", "traffic", "config", "bindings")}
    return names.get(topic, "jobs")
