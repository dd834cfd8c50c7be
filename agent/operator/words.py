"""What `explain` and `status` say alike: a step with its wall-clock time, a GPU set as runs, and
where the latest commit's plan puts a queued job with the work that stands between it and its
start. Pure: a function of the messages read from the bus (times count from the latest commit's
`step_start`, never from the reader's clock)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

BUCKET = 8  # GPUs per bucket of the holders' index (`Holders`)
NAMED = 3  # holders a reason names at most (the rest counted)


def span(gpus: Iterable[int]) -> str:
    """GPUs as runs, `0-3,8-11,13` (sorted)."""
    runs: list[list[int]] = []
    for g in sorted(gpus):
        if runs and runs[-1][1] == g - 1:
            runs[-1][1] = g
        else:
            runs.append([g, g])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def step_length(commits: Iterable[dict[str, Any]]) -> timedelta | None:
    """A step's wall length, from two commit payloads' `step_start` at different steps (the
    agent's own clock, compressed or not); None from fewer."""
    first = last = None
    for c in commits:
        if first is None or c["step"] < first["step"]:
            first = c
        if last is None or c["step"] > last["step"]:
            last = c
    if first is None or last is None or first["step"] == last["step"]:
        return None
    return (_time(last["step_start"]) - _time(first["step_start"])) / (last["step"] - first["step"])


def _time(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value.replace("Z", "+00:00"))


def clock(commit: dict[str, Any], length: timedelta | None, step: int, relative: bool = True) -> str:
    """When `step` starts, told from the latest `commit` (its `step_start`) and a step's `length`:
    `14:05:00 UTC, in 12 min` (`relative`: counted from the commit's step start; "12 min before"
    for an earlier step); "" when `length` is unknown and `step` is not the commit's."""
    if step != commit["step"] and length is None:
        return ""
    ref = _time(commit["step_start"])
    at = ref + (step - commit["step"]) * (length or timedelta())
    when = at.strftime("%H:%M:%S UTC") if at.date() == ref.date() else at.strftime("%Y-%m-%d %H:%M UTC")
    if step == commit["step"] or not relative:
        return when
    delta = at - ref
    return f"{when}, in {duration(delta)}" if delta > timedelta() else f"{when}, {duration(-delta)} before"


def duration(delta: timedelta) -> str:
    """`45 s`, `12 min`, `3 h 20 min`, `2 d 4 h` (whole parts only)."""
    s = round(delta.total_seconds())
    if s < 120:
        return f"{s} s"
    m = s // 60
    if m < 120:
        return f"{m} min"
    h = m // 60
    if h >= 48:
        return f"{h // 24} d {h % 24} h" if h % 24 else f"{h // 24} d"
    return f"{h} h {m % 60} min" if m % 60 else f"{h} h"


def at_step(commit: dict[str, Any] | None, length: timedelta | None, step: int, relative: bool = True) -> str:
    """`step 30 (14:05:00 UTC, in 12 min)`; `step 30` without a commit to tell the time from."""
    when = clock(commit, length, step, relative) if commit is not None else ""
    return f"step {step} ({when})" if when else f"step {step}"


def now_words(commit: dict[str, Any], length: timedelta | None, detail: str = "") -> str:
    """The pool's now, one definition for every command: the latest commit's step, when it began,
    and when the next one starts (`detail`: more about the commit)."""
    nxt = clock(commit, length, commit["step"] + 1).split(",")[0]
    return (
        f"step {commit['step']} committed at {clock(commit, length, commit['step'])} (seq {commit['seq']}{detail})"
        + (f"; step {commit['step'] + 1} starts at {nxt}" if nxt else "")
    )


class Holders:
    """A plan's rectangles indexed by GPU bucket, so each queued job's blockers cost its block's
    size, not the plan's."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.index: dict[int, list[tuple[str, int, int, int, int]]] = {}
        for holder, rects in plan["holders"].items():
            for g0, g1, t0, t1 in rects:
                for b in range(g0 // BUCKET, (g1 - 1) // BUCKET + 1):
                    self.index.setdefault(b, []).append((holder, g0, g1, t0, t1))

    def promise(self, job_id: str) -> tuple[int, list[int], dict[str, int], int] | None:
        """Where the plan puts `job_id`: its first step (of the plan), its GPUs there, the holders
        of its block in the step before (each with the step its hold there began), and the step
        its block is wholly free from (its start when someone holds it just before); None when
        the plan has no block for it."""
        rects = self.plan["holders"].get(job_id)
        if not rects:
            return None
        start = min(t0 for _, _, t0, _ in rects)
        block = [(g0, g1) for g0, g1, t0, _ in rects if t0 == start]
        before: dict[str, int] = {}
        free = 0
        seen: set[tuple[str, int, int, int, int]] = set()
        for b0, b1 in block:
            for b in range(b0 // BUCKET, (b1 - 1) // BUCKET + 1):
                for r in self.index.get(b, ()):
                    holder, g0, g1, t0, t1 = r
                    if holder == job_id or r in seen or not (g0 < b1 and b0 < g1 and t0 < start):
                        continue
                    seen.add(r)
                    free = max(free, min(t1, start))
                    if t1 >= start:  # holds it in the step before the start
                        before[holder] = min(before.get(holder, t0), t0)
        return start, [g for b0, b1 in block for g in range(b0, b1)], before, free


def blockers(before: dict[str, int], priority: dict[str, float], offset: int) -> str:
    """The holders of a block just before its start, longest holding first, at most `NAMED` named
    (plan steps shifted by `offset`): `a (priority 9, now), b (priority 5, from step 12) and 4
    others`."""
    ranked = sorted(before.items(), key=lambda kv: (kv[1], kv[0]))
    named = [
        f"{h} ({f'priority {priority[h]:g}, ' if h in priority else ''}{f'from step {offset + t}' if t else 'now'})"
        for h, t in ranked[:NAMED]
    ]
    more = len(ranked) - NAMED
    if more > 0:
        return ", ".join(named) + f" and {more} other{'s' if more > 1 else ''}"
    return " and ".join([", ".join(named[:-1]), named[-1]]) if len(named) > 1 else named[0]


def promised(
    found: tuple[int, list[int], dict[str, int], int],
    commit: dict[str, Any],
    length: timedelta | None,
    priority: dict[str, float],
) -> str:
    """A `Holders.promise` of the latest `commit`'s plan in words: the start with its time, the
    GPUs, and what stands between the job and its start."""
    start, gpus, before, free = found
    step = commit["step"]
    text = f"planned at {at_step(commit, length, step + start)} on GPUs {span(gpus)}: "
    if before:
        return text + f"until then its block is held by {blockers(before, priority, step)}"
    if free:
        return text + f"its block is free from step {step + free}"
    return text + "its block is free until then"


def reserved_words(job_id: str, commit: dict[str, Any] | None, length: timedelta | None) -> str | None:
    """The reservation `job_id` holds in `commit` in words (None: none): `reserved from step 40
    (14:00:00 UTC, in 3 h) on GPUs 0-7: no work placed later may delay its start`."""
    r = ((commit or {}).get("reservations") or {}).get(job_id)
    if r is None:
        return None
    gpus = span(range(r["first_gpu"], r["first_gpu"] + r["gpus"]))
    return (
        f"reserved from {at_step(commit, length, r['start_step'])} on GPUs {gpus}: "
        "no work placed later may delay its start"
    )
