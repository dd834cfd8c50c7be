"""`gpualloc explain ID`: a job's or an app's history from the bus and where it stands now, as of
the latest commit, in the states `states` defines. A job: submitted, each decision with its
reason, start, completion, failure, re-size, dead letters of records naming it; now waiting (its
promised start in that commit's plan and the work holding its block just before), running,
ended or rejected, with the later submissions refused beside it. An app: its registrations (or
their dead letters), its latest observations, the reasons of its recent commits; now what the
live pool (`status`'s view) says of it: bounds, GPUs held, observed need and shortfall, and the
forecast the next plan counts on."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from gpualloc.agent.operator.states import App, Job, app_words, forecast_words, names, original_of, refusals_words
from gpualloc.agent.operator.tail import flow, in_time_order
from gpualloc.agent.operator.words import Holders, at_step, now_words, promised, reserved_words, span, step_length
from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import partitions, read_range, reader
from gpualloc.bus.topics import Topics, decode
from gpualloc.schemas.commits import latest


async def history_of(bootstrap: Broker | str, topics: Topics, pool: str, job_id: str) -> list[dict[str, Any]]:
    """`gather` over the pool's inputs of jobs and apps, decisions, commits and dead letters, in
    publication order (each record's Kafka timestamp)."""
    names = [topics.jobs, topics.traffic, topics.decisions, topics.deadletter, topics.commits]
    counts = await partition_counts(bootstrap, names)
    consumer = await clients.started(reader(bootstrap), "explain reader")
    try:
        records = await read_range(consumer, {tp: 0 for name in names for tp in partitions(counts, name)})
    finally:
        await consumer.stop()
    messages = []
    for r in in_time_order(records, flow(topics)):
        try:
            messages.append(decode(r.value))
        except ValueError:
            continue
    return gather(job_id, pool, messages)


def gather(job_id: str, pool: str, messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Every message of `pool` naming `job_id`, a job's or an app's id (inputs, decisions, the
    parts of commits that start it or give reasons for it, dead letters of records naming it),
    then the pool's latest whole commit marked `latest` (with its time and the step length its
    commits show)."""
    out, commits, last_at = [], [], None
    for m in messages:
        if not isinstance(m, dict) or m.get("pool", "default") != pool:
            continue
        p = m.get("payload") or {}
        if m.get("type") == "plan.committed":
            commits.append(p)
            last_at = m.get("occurred_at")
            if job_id in p.get("started", ()) or job_id in (p.get("reasons") or {}):
                out.append(m)  # the part of its commit that starts the job, or says why the app holds what it does
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


def is_app(name: str, messages: list[dict[str, Any]]) -> bool:
    """Do the gathered `messages` tell of an app by this name (a registration, a dead letter of
    one, an observation) rather than a job?"""
    for m in messages:
        p, kind = m.get("payload") or {}, m.get("type")
        if kind == "input.rejected":
            kind = (original_of(p) or {}).get("type")
        if kind in ("app.registered", "traffic.observed"):
            return True
        if kind in ("job.submitted", "allocation.decided"):
            return False
    return False


def _latest(messages: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, timedelta | None, Any]:
    """The latest whole commit `gather` marked, a step's length and the commit's time."""
    marked = next((m for m in messages if m.get("latest")), None)
    commit = marked["payload"] if marked else None
    seconds = marked.get("step_seconds") if marked else None
    length = timedelta(seconds=seconds) if seconds else None
    return commit, length, _time(marked.get("occurred_at")) if marked else None


def explain_lines(job_id: str, messages: list[dict[str, Any]]) -> list[str]:
    """Readable history, then where the job stands now; empty when no message names the job."""
    commit, length, committed_at = _latest(messages)
    story = _Story(job_id, commit, length, committed_at)
    for m in messages:
        if not m.get("latest"):
            story.read(m)
    if not story.lines:
        return []
    return story.lines + [story.now()]


class _Story:
    """The job's history in words, its state kept by `states.Job`."""

    def __init__(self, job_id: str, commit: dict[str, Any] | None, length: timedelta | None, committed_at) -> None:
        self.job_id, self.commit, self.length, self.committed_at = job_id, commit, length, committed_at
        self.lines: list[str] = []
        self.job = Job()
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
            event = f" (event {m['event_id']})" if m.get("event_id") else ""
            if not self.job.submitted(p):
                self.lines.append(f"{at}  submitted again{event} while it is {self.job.state}")
                return
            size = f"{self.job.size} GPUs for {self.job.duration} steps" if self.job.size else "sized by features"
            self.lines.append(f"{at}  submitted: {p.get('kind')}, {size}, priority {p.get('priority')}{event}")
        elif kind == "allocation.decided":
            self._decided(p, at)
        elif kind == "plan.committed":
            self.job.started(self.job_id, p)
            self.lines.append(
                f"{at}  started at {self.at(p['step'])} on GPUs {span(self.job.gpus)} (commit seq {p['seq']})"
            )
        elif kind in ("job.completed", "job.cancelled"):
            self.job.ended(kind.split(".")[1])
            self.lines.append(f"{at}  {self.job.why}{_by(p)}" + (f": {p['detail']}" if p.get("detail") else ""))
        elif kind == "job.failed":
            self._failed(p, at, m.get("event_id"))
        elif kind == "input.rejected":
            self._dead_letter(p, at)

    def _decided(self, p: dict[str, Any], at: str) -> None:
        if self.job.answers_another(p):
            self.job.decided(p)
            self.lines.append(f"{at}  {self.job.refused[-1].words()}; it stays {self.job.state}")
            return
        self.job.decided(p)
        resized = ""
        if self.out_of_memory is not None:
            resized = f"re-sized to {self.job.size} GPUs after running out of memory at {self.out_of_memory}; "
            self.out_of_memory = None
        where = f" on GPUs {span(p['gpus'])}" if p.get("gpus") else ""
        when = f" at {self.at(p['start_step'])}" if p.get("start_step") is not None else ""
        self.lines.append(f"{at}  {resized}decided {p['action']}{where}{when}: {p['reason']}")
        if self.job.state == "waiting":
            self.decided = p
            when_at = _time(at)
            self.decided_late = bool(self.committed_at and when_at and when_at > self.committed_at)

    def _failed(self, p: dict[str, Any], at: str, event_id: str | None) -> None:
        reason = p.get("reason")
        running = self.job.state == "running" and self.job.gpus
        ran = f" on GPUs {span(self.job.gpus)}" if running else ""
        text = f"{at}  failed" + (f" ({reason})" if reason else "") + f"{ran}{_by(p)}"
        self.lines.append(text + (f": {p['detail']}" if p.get("detail") else ""))
        ran_at = len(self.job.gpus) if running else self.job.size
        self.decided = None
        fate = self.job.failed(p, event_id)
        if fate == "resized":
            self.out_of_memory = ran_at  # re-sized by the decision that follows
        elif fate == "requeued":
            self.lines[-1] += "; re-queued (it allows it)"

    def _dropped(self) -> None:
        """Out of memory with no decision after it: the pool could give it no more GPUs."""
        self.job.ended(f"failed (out_of_memory) at {self.out_of_memory} GPUs; not re-sized: dropped")
        self.out_of_memory = None

    def _dead_letter(self, p: dict[str, Any], at: str) -> None:
        original = original_of(p) or {}
        kind = original.get("type", "a record")
        self.lines.append(f"{at}  rejected {kind} ({_where_from(original, p)}): {p['reason']}")
        if kind == "job.submitted":
            self.job.dead_letter(kind, original.get("event_id"), p["reason"])

    def now(self) -> str:
        """Where the job stands as of the latest commit."""
        if self.out_of_memory is not None:
            self._dropped()
        c = self.commit
        head = now_words(c, self.length) if c else "no commit yet"
        return f"now: {head} - {self._where(c)}{refusals_words(self.job.refused)}"

    def _where(self, c: dict[str, Any] | None) -> str:
        """The job's state in words, as of commit `c`."""
        job = self.job
        if job.state == "rejected":
            return f"rejected, never planned: {job.why}"
        if job.state == "ended":
            return f"{job.why}; it holds no GPUs and is not planned"
        if job.state == "running":
            gpus = (c or {}).get("assignments", {}).get(self.job_id) or job.gpus
            text = f"running on GPUs {span(gpus)} since {self.at(job.since)}"
            end = job.since + job.duration
            if c and job.duration and c["step"] >= end:
                text += (
                    f", past its planned end at {self.at(end)} ({job.duration} steps): it keeps its GPUs until it ends"
                )
            return text
        if c is None:
            return "waiting"
        if self.decided is not None and self.decided_late:
            d = self.decided
            where = f" on GPUs {span(d['gpus'])}" if d.get("gpus") else ""
            when = f" at {at_step(c, self.length, d['start_step'])}" if d.get("start_step") is not None else ""
            return (
                f"waiting at {job.size} GPUs, {d['action']}{where}{when} by its decision after "
                f"that commit; the next commit plans it"
            )
        return waiting(self.job_id, c, self.length)


def _where_from(original: dict[str, Any], letter: dict[str, Any]) -> str:
    """The rejected record's event id, when it has one, and where it was: `event e7, gpualloc.jobs:0:12`."""
    event = f"event {original['event_id']}, " if isinstance(original.get("event_id"), str) else ""
    return f"{event}{letter.get('topic')}:{letter.get('partition')}:{letter.get('offset')}"


def _by(p: dict[str, Any]) -> str:
    return f" by {p['source']}" if p.get("source") else ""


def waiting(job_id: str, commit: dict[str, Any], length: timedelta | None = None) -> str:
    """Where the latest (whole) commit's tentative plan puts a waiting job, and what holds its
    block just before its start."""
    plan = commit.get("plan") or {"steps": 0, "holders": {}}
    found = Holders(plan).promise(job_id)
    reservation = reserved_words(job_id, commit, length)
    held = "" if reservation is None else f"{reservation}; "
    if found is None:
        return (
            f"waiting; {held}no block in the {plan['steps']}-step window of the latest commit (seq {commit['seq']}): "
            + ("it starts past the window" if reservation else "higher-value work and real-time demand fill it")
        )
    return f"waiting, {held}" + promised(found, commit, length, {})


RECENT = 5  # of an app's observations and commit reasons, the latest told


def explain_app_lines(app_id: str, messages: list[dict[str, Any]], row: dict[str, Any] | None) -> list[str]:
    """An app's registrations (each dead letter answering one with its reason), its latest
    observations, the reasons of its recent commits, then where it stands now: `row`, its
    entry in `status`'s view of the live pool (None: the pool holds no such app)."""
    commit, length, _ = _latest(messages)
    app, out = App(), []
    observed: list[str] = []
    reasons: list[str] = []
    for m in messages:
        if m.get("latest"):
            continue
        p, at, kind = m.get("payload") or {}, m.get("occurred_at", "?"), m.get("type")
        if kind == "app.registered":
            app.registered(p, m.get("event_id"))
            top = p.get("max_gpus") if p.get("max_gpus") is not None else "pool"
            out.append(
                f"{at}  registration published (event {m.get('event_id')}): priority {p.get('priority')}, "
                f"{p.get('min_gpus', 0)}-{top} GPUs"
                + (f", swap cap {p['swap_cap']}" if p.get("swap_cap") is not None else "")
            )
        elif kind == "input.rejected":
            original = original_of(p) or {}
            app.dead_letter(str(original.get("type")), original.get("event_id"), p.get("reason", ""))
            out.append(
                f"{at}  rejected {original.get('type', 'a record')} ({_where_from(original, p)}): {p.get('reason')}"
            )
        elif kind == "traffic.observed":
            seen = f"{p['gpus']} GPUs" if p.get("gpus") is not None else f"{p.get('requests_per_s')} requests/s"
            observed.append(f"{at}  observed {seen}")
        elif kind == "plan.committed" and app_id in (p.get("reasons") or {}):
            what = "reactive commit" if p.get("reactive") else "commit"
            gpus = p.get("assignments", {}).get(app_id)
            held = f", GPUs {span(gpus)}" if gpus else ""
            reasons.append(f"{at}  {what} of step {p['step']} (seq {p['seq']}{held}): {p['reasons'][app_id]}")
    if not out and not observed and row is None:
        return []
    out += observed[-RECENT:] + reasons[-RECENT:]
    head = f"now: {now_words(commit, length) if commit else 'no commit yet'} - "
    if row is not None:
        out.append(head + f"registered: {app_words(row)}{refusals_words(app.refused)}")
        out.append(f"  {forecast_words(row)}")
    elif app.state == "rejected":
        out.append(head + f"rejected, never registered: {app.why}")
    elif app.state == "registered":
        out.append(head + "registration published, not yet taken by the agent")
    else:
        out.append(head + "not registered")
    return out
