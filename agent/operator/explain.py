"""`gpualloc explain JOB`: a job's history from the bus (submitted, each decision with its reason,
start, completion, failure, re-size, dead letters of records naming it) and where it stands now,
as of the latest commit: waiting (its promised start in that commit's plan and the work holding
its block just before), running, ended, or rejected."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from gpualloc.agent.operator.tail import names, original_of
from gpualloc.agent.operator.words import Holders, at_step, now_words, promised, span, step_length
from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import partitions, read_range, reader
from gpualloc.bus.topics import Topics, decode
from gpualloc.schemas.commits import latest


async def history_of(bootstrap: Broker | str, topics: Topics, pool: str, job_id: str) -> list[dict[str, Any]]:
    """`gather` over the pool's inputs of jobs, decisions, commits and dead letters, in
    publication order."""
    names = [topics.jobs, topics.decisions, topics.commits, topics.deadletter]
    counts = await partition_counts(bootstrap, names)
    consumer = await clients.started(reader(bootstrap), "explain reader")
    try:
        records = await read_range(consumer, {tp: 0 for name in names for tp in partitions(counts, name)})
    finally:
        await consumer.stop()
    messages = []
    for r in sorted(records, key=lambda r: (r.timestamp, r.topic, r.offset)):
        try:
            messages.append(decode(r.value))
        except ValueError:
            continue
    return gather(job_id, pool, messages)


def gather(job_id: str, pool: str, messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Every message of `pool` naming `job_id` (inputs, decisions, the parts of commits that
    start it, dead letters of records naming it), then the pool's latest whole commit marked
    `latest` (with its time and the step length its commits show)."""
    out, commits, last_at = [], [], None
    for m in messages:
        if not isinstance(m, dict) or m.get("pool", "default") != pool:
            continue
        p = m.get("payload") or {}
        if m.get("type") == "plan.committed":
            commits.append(p)
            last_at = m.get("occurred_at")
            if job_id in p.get("started", ()):
                out.append(m)  # the part of its commit that holds the job
        elif m.get("type") == "input.rejected":
            original = original_of(p)
            if original is not None and job_id in names(original):
                out.append(m)
        elif job_id in names(m):
            out.append(m)
    if (whole := latest(commits)) is not None:
        length = step_length(c for c in commits if not c.get("reactive"))
        out.append(
            {
                "type": "plan.committed",
                "pool": pool,
                "occurred_at": last_at,
                "payload": whole,
                "latest": True,
                "step_seconds": None if length is None else length.total_seconds(),
            }
        )
    return out


def _time(at: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(at).replace("Z", "+00:00"))
    except ValueError:
        return None


def explain_lines(job_id: str, messages: list[dict[str, Any]]) -> list[str]:
    """Readable history, then where the job stands now; empty when no message names the job."""
    marked = next((m for m in messages if m.get("latest")), None)
    commit = marked["payload"] if marked else None
    seconds = marked.get("step_seconds") if marked else None
    length = timedelta(seconds=seconds) if seconds else None
    story = _Story(job_id, commit, length, _time(marked.get("occurred_at")) if marked else None)
    for m in messages:
        if not m.get("latest"):
            story.read(m)
    if not story.lines:
        return []
    return story.lines + [story.now()]


class _Story:
    """The job's state as its messages, in order, tell it."""

    def __init__(self, job_id: str, commit: dict[str, Any] | None, length: timedelta | None, committed_at) -> None:
        self.job_id, self.commit, self.length, self.committed_at = job_id, commit, length, committed_at
        self.lines: list[str] = []
        self.state = "waiting"  # waiting, running, ended, rejected
        self.why = ""  # of an ended or rejected job
        self.gpus: list[int] = []  # while running
        self.since = 0  # its start step while running
        self.size, self.duration, self.requeue, self.sized = 0, 0, True, False
        self.out_of_memory: int | None = None  # GPUs it ran out of memory at, until its fate is told
        self.decided: dict[str, Any] | None = None  # the latest decision, while it waits
        self.decided_late = False  # that decision came after the latest commit

    def at(self, step: int) -> str:
        return at_step(self.commit, self.length, step, relative=False)

    def read(self, m: dict[str, Any]) -> None:
        p, at, kind = m.get("payload") or {}, m.get("occurred_at", "?"), m.get("type")
        if self.out_of_memory is not None and kind != "allocation.decided":
            self._dropped()
        if kind == "job.submitted":
            self.size, self.duration = p.get("gpus") or 0, p.get("duration") or 0
            self.requeue = p.get("requeue", True) is not False
            size = f"{self.size} GPUs for {self.duration} steps" if self.size else "sized by features"
            self.lines.append(f"{at}  submitted: {p.get('kind')}, {size}, priority {p.get('priority')}")
        elif kind == "allocation.decided":
            self._decided(p, at)
        elif kind == "plan.committed":
            self.state, self.gpus, self.since = "running", list(p["assignments"].get(self.job_id, [])), p["step"]
            self.lines.append(
                f"{at}  started at {self.at(p['step'])} on GPUs {span(self.gpus)} (commit seq {p['seq']})"
            )
        elif kind in ("job.completed", "job.cancelled"):
            self.state, self.why = "ended", kind.split(".")[1]
            self.lines.append(f"{at}  {self.why}{_by(p)}" + (f": {p['detail']}" if p.get("detail") else ""))
        elif kind == "job.failed":
            self._failed(p, at)
        elif kind == "input.rejected":
            self._dead_letter(p, at)

    def _decided(self, p: dict[str, Any], at: str) -> None:
        forecast = p.get("forecast") or {}
        size = forecast.get("gpus") or len(p.get("gpus") or ()) or self.size
        self.duration = forecast.get("duration") or self.duration
        self.sized = "gpus" in (forecast.get("forecast") or ())
        resized = ""
        if self.out_of_memory is not None:
            resized = f"re-sized to {size} GPUs after running out of memory at {self.out_of_memory}; "
            self.out_of_memory = None
        self.size = size
        where = f" on GPUs {span(p['gpus'])}" if p.get("gpus") else ""
        when = f" at {self.at(p['start_step'])}" if p.get("start_step") is not None else ""
        self.lines.append(f"{at}  {resized}decided {p['action']}{where}{when}: {p['reason']}")
        if p["action"] == "rejected":
            self.state, self.why = "rejected", p["reason"]
        elif p["action"] == "start":
            self.state, self.gpus, self.since = "running", list(p["gpus"]), p.get("start_step") or 0
        else:
            self.state, self.decided = "waiting", p
            when_at = _time(at)
            self.decided_late = bool(self.committed_at and when_at and when_at > self.committed_at)

    def _failed(self, p: dict[str, Any], at: str) -> None:
        reason = p.get("reason")
        ran = f" on GPUs {span(self.gpus)}" if self.state == "running" and self.gpus else ""
        text = f"{at}  failed" + (f" ({reason})" if reason else "") + f"{ran}{_by(p)}"
        self.lines.append(text + (f": {p['detail']}" if p.get("detail") else ""))
        ran_at = len(self.gpus) if self.state == "running" and self.gpus else self.size
        self.gpus, self.decided = [], None
        if reason == "out_of_memory" and self.sized and self.requeue:
            self.state, self.out_of_memory = "waiting", ran_at  # re-sized by the decision that follows
        elif reason == "time_limit" or not self.requeue:
            self.state, self.why = "ended", f"failed ({reason})" if reason else "failed"
        else:
            self.state = "waiting"
            self.lines[-1] += "; re-queued (it allows it)"

    def _dropped(self) -> None:
        """Out of memory with no decision after it: the pool could give it no more GPUs."""
        self.state, self.why = "ended", f"failed (out_of_memory) at {self.out_of_memory} GPUs; not re-sized: dropped"
        self.out_of_memory = None

    def _dead_letter(self, p: dict[str, Any], at: str) -> None:
        original = original_of(p) or {}
        kind = original.get("type", "a record")
        self.lines.append(
            f"{at}  rejected {kind} ({p.get('topic')}:{p.get('partition')}:{p.get('offset')}): {p['reason']}"
        )
        if kind == "job.submitted" and self.state == "waiting" and self.decided is None:
            self.state, self.why = "rejected", p["reason"]

    def now(self) -> str:
        """Where the job stands as of the latest commit."""
        if self.out_of_memory is not None:
            self._dropped()
        c = self.commit
        return f"now: {now_words(c, self.length) if c else 'no commit yet'} - {self._where(c)}"

    def _where(self, c: dict[str, Any] | None) -> str:
        """The job's state in words, as of commit `c`."""
        if self.state == "rejected":
            return f"rejected, never planned: {self.why}"
        if self.state == "ended":
            return f"{self.why}; it holds no GPUs and is not planned"
        if self.state == "running":
            gpus = (c or {}).get("assignments", {}).get(self.job_id) or self.gpus
            text = f"running on GPUs {span(gpus)} since {self.at(self.since)}"
            end = self.since + self.duration
            if c and self.duration and c["step"] >= end:
                text += (
                    f", past its planned end at {self.at(end)} ({self.duration} steps): it keeps its GPUs until it ends"
                )
            return text
        if c is None:
            return "waiting"
        if self.decided is not None and self.decided_late:
            d = self.decided
            where = f" on GPUs {span(d['gpus'])}" if d.get("gpus") else ""
            when = f" at {at_step(c, self.length, d['start_step'])}" if d.get("start_step") is not None else ""
            return (
                f"waiting at {self.size} GPUs, {d['action']}{where}{when} by its decision after "
                f"that commit; the next commit plans it"
            )
        return waiting(self.job_id, c, self.length)


def _by(p: dict[str, Any]) -> str:
    return f" by {p['source']}" if p.get("source") else ""


def waiting(job_id: str, commit: dict[str, Any], length: timedelta | None = None) -> str:
    """Where the latest (whole) commit's tentative plan puts a waiting job, and what holds its
    block just before its start."""
    plan = commit.get("plan") or {"steps": 0, "holders": {}}
    found = Holders(plan).promise(job_id)
    if found is None:
        return (
            f"waiting; no block in the {plan['steps']}-step window of the latest commit (seq {commit['seq']}): "
            "higher-value work and real-time demand fill it"
        )
    return "waiting, " + promised(found, commit, length, {})
