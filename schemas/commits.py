"""The tentative plan of `plan.committed` and the parts of one commit (docs/contract/events.md).

A commit's plan is per holder (job or app) a list of rectangles `[gpu_from, gpu_to, step_from,
step_to]`, both half-open, steps counted from the commit's step: a batch block is one rectangle
(one per contiguous GPU range of it), an app's GPU sets over time are the runs of each of its
contiguous GPU ranges. Its size so grows with holders and their changes, not with GPUs x steps.
A commit too large for one Kafka message is split into parts (`part` i of `parts` n, one seq),
each holding a disjoint set of holders (a holder's rectangles alone too many for a part go on
over the next parts); `merge` and `Parts` put them back together and `commit_grid` rebuilds the
GPU x step grid for readers that want one. Pure functions of plain JSON data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from gpualloc.schemas.gpu_runs import gpu_runs

PART_BYTES = 900_000  # a part's message, as JSON: under the broker's default limit (1 MiB) with room for the record

Rect = list[int]  # [gpu_from, gpu_to, step_from, step_to)


def set_rects(masks: Iterable[int]) -> list[Rect]:
    """An app's GPU sets over steps 0, 1, ... as rectangles: each contiguous GPU range with the
    steps it stays the same range; ordered by first step, then GPU."""
    out: list[Rect] = []
    open_: dict[tuple[int, int], int] = {}  # range -> the step it began
    prev, t = None, 0
    for t, mask in enumerate([*masks, 0]):
        if mask == prev:
            continue
        prev, now = mask, gpu_runs(mask)
        current = set(now)
        for r in [r for r in open_ if r not in current]:
            out.append([r[0], r[1], open_.pop(r), t])
        for r in now:
            open_.setdefault(r, t)
    out.sort(key=lambda r: (r[2], r[0]))
    return out


def tentative_plan(
    gpus: int, steps: int, batch: Mapping[str, tuple[int, int, int]], realtime: Mapping[str, list[int]]
) -> dict[str, Any]:
    """The `plan` of a commit: `batch` job -> (step_from, step_to, GPU mask), `realtime` app ->
    its GPU mask per step, all over a window of `steps` steps from the commit's step. Holders
    that hold nothing in the window are left out; batch first, then apps (the grid's order)."""
    holders: dict[str, list[Rect]] = {}
    for job_id, (start, end, mask) in batch.items():
        if start < end:
            holders.setdefault(job_id, []).extend([lo, hi, start, end] for lo, hi in gpu_runs(mask))
    for app_id, masks in realtime.items():
        if rects := set_rects(masks):
            holders.setdefault(app_id, []).extend(rects)
    return {"gpus": gpus, "steps": steps, "holders": {h: r for h, r in holders.items() if r}}


def commit_grid(payload: Mapping[str, Any]) -> list[list[str | None]]:
    """The GPU x step grid (job or app id, or None) of a whole commit's plan, from its step on
    ([] for a commit without a plan)."""
    plan = payload.get("plan")
    if plan is None:
        return []
    grid: list[list[str | None]] = [[None] * plan["steps"] for _ in range(plan["gpus"])]
    for holder, rects in plan["holders"].items():
        for g0, g1, t0, t1 in rects:
            for g in range(g0, g1):
                grid[g][t0:t1] = [holder] * (t1 - t0)
    return grid


# ---- parts ---------------------------------------------------------------------------------


def split(message: dict[str, Any], limit: int = PART_BYTES) -> list[dict[str, Any]]:
    """A `plan.committed` message as the messages of its parts, each under `limit` bytes as
    JSON: the message itself when it fits. Part 1 keeps the event id, part i the id + `:i`;
    every part repeats the commit's other fields. Holders are taken in plan order (then those
    only assigned), each with its assignment, its place in `started` and its rectangles."""
    if len(orjson.dumps(message)) <= limit:
        return [message]
    p = message["payload"]
    plan = p.get("plan") or {"gpus": 0, "steps": 0, "holders": {}}
    bare = {
        **message,
        "event_id": message["event_id"] + ":9999999",
        "payload": {
            **p,
            "assignments": {},
            "started": [],
            "plan": {**plan, "holders": {}},
            "part": 9_999_999,
            "parts": 9_999_999,
        },
    }
    room = limit - len(orjson.dumps(bare))
    if room <= 0:
        raise ValueError(f"plan.committed: its fields but the holders take {limit - room} bytes, more than {limit}")
    holders, assignments, started = plan["holders"], p["assignments"], set(p.get("started", ()))
    ids = list(dict.fromkeys([*holders, *assignments, *p.get("started", ())]))
    parts: list[tuple[dict[str, Any], list[str], dict[str, list[Any]]]] = [({}, [], {})]
    used = 0

    def close() -> None:
        nonlocal used
        parts.append(({}, [], {}))
        used = 0

    for h in ids:
        key = len(orjson.dumps(h)) + 2  # the id, its colon or comma, a separator
        fixed = (key + len(orjson.dumps(assignments[h])) if h in assignments else 0) + (key if h in started else 0)
        rects = holders.get(h, [])
        first = key + 2 + len(orjson.dumps(rects[0])) + 1 if rects else 0
        if fixed + first > room:
            raise ValueError(
                f"plan.committed: holder {h!r} alone needs {fixed + first} bytes, more than a part's {room}"
            )
        if used + fixed + first > room:
            close()
        a, s, hs = parts[-1]
        if h in assignments:
            a[h] = assignments[h]
        if h in started:
            s.append(h)
        used += fixed
        for k, rect in enumerate(rects):
            cost = len(orjson.dumps(rect)) + 1 + (key + 2 if h not in parts[-1][2] else 0)
            if used + cost > room:
                close()
                cost = len(orjson.dumps(rect)) + 1 + key + 2
            parts[-1][2].setdefault(h, []).append(rect)
            used += cost
    if not any(parts[-1]):
        parts.pop()
    n = len(parts)
    return [
        {
            **message,
            "event_id": message["event_id"] if i == 1 else f"{message['event_id']}:{i}",
            "payload": {
                **p,
                "assignments": a,
                "started": s,
                "plan": {**plan, "holders": hs} if p.get("plan") else None,
                "part": i,
                "parts": n,
            },
        }
        for i, (a, s, hs) in enumerate(parts, 1)
    ]


def merge(parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The whole commit of its parts' payloads (any order): assignments, `started` and each
    holder's rectangles put together, `part` and `parts` 1. ValueError when they are not all the
    parts of one commit."""
    parts = sorted(parts, key=lambda p: p.get("part", 1))
    first = parts[0]
    n = first.get("parts", 1)
    if [p.get("part", 1) for p in parts] != list(range(1, n + 1)) or any(
        (p["seq"], p.get("parts", 1)) != (first["seq"], n) for p in parts
    ):
        raise ValueError(
            f"parts: commit seq {first['seq']} needs parts 1-{n} exactly once each, got "
            f"{[(p['seq'], p.get('part', 1)) for p in parts]}"
        )
    assignments: dict[str, Any] = {}
    started: list[str] = []
    holders: dict[str, list[Any]] = {}
    for p in parts:
        assignments.update(p["assignments"])
        started += p.get("started", [])
        for h, rects in ((p.get("plan") or {}).get("holders") or {}).items():
            holders.setdefault(h, []).extend(rects)
    plan = first.get("plan")
    return {
        **first,
        "assignments": assignments,
        "started": started,
        "plan": None if plan is None else {**plan, "holders": holders},
        "part": 1,
        "parts": 1,
    }


class Parts:
    """The parts of one pool's commits as they are read (any order, repeats harmless): `add`
    gives a commit whole once all its parts are in. Keeps the parts of at most `keep` unfinished
    commits (the oldest dropped first), so a reader that started mid-commit stays bounded."""

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self._waiting: dict[int, dict[int, Mapping[str, Any]]] = {}

    def add(self, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        n = payload.get("parts", 1)
        if n == 1:
            return dict(payload)
        got = self._waiting.setdefault(payload["seq"], {})
        got[payload.get("part", 1)] = payload
        if len(got) < n:
            while len(self._waiting) > self.keep:
                del self._waiting[min(self._waiting)]
            return None
        del self._waiting[payload["seq"]]
        return merge(list(got.values()))


def folded(base: Mapping[str, Any], reactive: Mapping[str, Any]) -> dict[str, Any]:
    """`base` (a step's commit, whole) with a later reactive commit of the same step applied: the
    holders it names take its sets, the rest keep theirs; its seq, reasons added."""
    return {
        **base,
        "seq": reactive["seq"],
        "assignments": {**base["assignments"], **reactive["assignments"]},
        "reasons": {**base.get("reasons", {}), **reactive.get("reasons", {})},
    }


def current(wholes: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Of one pool's whole commits, what holds now: the non-reactive one with the highest seq
    with the reactive commits of its step that came after it applied (None when there is none,
    or when a reactive commit of a later step shows that step's own commit is not among them)."""
    ordered = sorted(wholes, key=lambda c: c["seq"])
    base = next((k for k in range(len(ordered) - 1, -1, -1) if not ordered[k].get("reactive")), None)
    if base is None:
        return None
    out = dict(ordered[base])
    for c in ordered[base + 1 :]:
        if c["step"] != out["step"]:
            return None  # a later step's commit is missing: this one no longer holds
        out = folded(out, c)
    return out


def latest(payloads: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What holds now among one pool's `plan.committed` payloads: the latest whole commit (all its
    parts there) with the reactive commits of its step applied (`current`); None when none is whole."""
    by_seq: dict[int, dict[int, Mapping[str, Any]]] = {}
    for p in payloads:
        by_seq.setdefault(p["seq"], {})[p.get("part", 1)] = p
    wholes = [
        merge(list(got.values())) for got in by_seq.values() if len(got) == next(iter(got.values())).get("parts", 1)
    ]
    return current(wholes)
