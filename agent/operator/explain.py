"""`gpualloc explain JOB`: a job's history from the bus (submitted, each decision with its reason,
start, completion or failure) and, for a job still waiting, its promised start in the latest
commit's plan and the jobs whose planned blocks hold its GPUs before then."""

from __future__ import annotations

from typing import Any

from gpualloc.agent.bus import clients
from gpualloc.agent.bus.admin import partition_counts
from gpualloc.agent.bus.clients import Broker
from gpualloc.agent.bus.history import partitions, read_range, reader
from gpualloc.agent.bus.topics import Topics, decode
from gpualloc.agent.operator.tail import span as _span
from gpualloc.schemas.commits import latest


async def history_of(bootstrap: Broker | str, topics: Topics, pool: str, job_id: str) -> list[dict[str, Any]]:
    """Every message of `pool` naming `job_id` (inputs, decisions, commits that start it), and the
    pool's latest commit, in publication order per topic."""
    names = [topics.jobs, topics.decisions, topics.commits]
    counts = await partition_counts(bootstrap, names)
    consumer = await clients.started(reader(bootstrap), "explain reader")
    try:
        records = await read_range(consumer, {tp: 0 for name in names for tp in partitions(counts, name)})
    finally:
        await consumer.stop()
    out, commits = [], []
    for r in sorted(records, key=lambda r: (r.timestamp, r.topic, r.offset)):
        try:
            m = decode(r.value)
        except ValueError:
            continue
        if not isinstance(m, dict) or m.get("pool", "default") != pool:
            continue
        p = m.get("payload") or {}
        if m.get("type") == "plan.committed":
            commits.append(p)
            if job_id in p.get("started", ()):
                out.append(m)  # the part of its commit that holds the job
        elif p.get("id") == job_id or p.get("job_id") == job_id:
            out.append(m)
    if (whole := latest(commits)) is not None:
        out.append({"type": "plan.committed", "pool": pool, "payload": whole, "latest": True})
    return out


def explain_lines(job_id: str, messages: list[dict[str, Any]]) -> list[str]:
    """Readable history; empty when no message names the job."""
    lines, started, ended = [], False, False
    latest = None
    for m in messages:
        p, at, kind = m.get("payload") or {}, m.get("occurred_at", "?"), m.get("type")
        if m.get("latest"):
            latest = m
            continue
        if kind == "job.submitted":
            size = f"{p['gpus']} GPUs for {p['duration']} steps" if p.get("gpus") else "sized by features"
            lines.append(f"{at}  submitted: {p.get('kind')}, {size}, priority {p.get('priority')}")
        elif kind == "allocation.decided":
            where = f" on GPUs {_span(p.get('gpus', []))}" if p.get("gpus") else ""
            when = f" at step {p['start_step']}" if p.get("start_step") is not None else ""
            lines.append(f"{at}  decided {p['action']}{where}{when}: {p['reason']}")
        elif kind == "plan.committed":
            started, ended = True, False
            lines.append(
                f"{at}  started at step {p['step']} on GPUs {_span(p['assignments'].get(job_id, []))} "
                f"(commit seq {p['seq']})"
            )
        elif kind in ("job.completed", "job.cancelled", "job.failed"):
            ended = kind != "job.failed"
            started = started and kind != "job.failed"
            who = f" by {p['source']}" if p.get("source") else ""
            lines.append(f"{at}  {kind.split('.')[1]}{who}" + (f": {p['detail']}" if p.get("detail") else ""))
    if lines and not started and not ended and latest is not None:
        lines += waiting(job_id, latest["payload"])
    return lines


def waiting(job_id: str, commit: dict[str, Any]) -> list[str]:
    """Where the latest (whole) commit's tentative plan puts a waiting job, and who holds its
    block first."""
    plan, step = commit.get("plan") or {"steps": 0, "holders": {}}, commit["step"]
    rects = plan["holders"].get(job_id, [])
    if not rects:
        return [
            f"now (step {step}): waiting; no block in the {plan['steps']}-step window of the "
            f"latest commit (seq {commit['seq']}): higher-value work and real-time demand fill it"
        ]
    start = min(t0 for _, _, t0, _ in rects)
    block = [(g0, g1) for g0, g1, t0, _ in rects if t0 == start]
    gpus = [g for g0, g1 in block for g in range(g0, g1)]
    holders: dict[str, int] = {}
    for owner, theirs in plan["holders"].items():
        for g0, g1, t0, t1 in theirs:
            if owner != job_id and t0 < start and any(g0 < b1 and b0 < g1 for b0, b1 in block):
                holders[owner] = max(holders.get(owner, 0), step + min(t1, start))
    held = ", ".join(f"{owner} until step {until}" for owner, until in sorted(holders.items(), key=lambda kv: kv[1]))
    line = f"now (step {step}): promised start at step {step + start} on GPUs {_span(gpus)}"
    return [line + (f"; before then its block is held by {held}" if held else "; its block is free until then")]
