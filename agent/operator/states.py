"""The one definition of a job's and an app's state that `status`, `explain`, `tail` and the
CLI read: a fold over the pool's messages in publication order (`Job`, `App`), and the words for
a live pool's apps (`app_row`). An input the agent refused (a dead letter, or a decision
`rejected` answering a second submission of a live job) never rewrites what the job or app is:
it is kept beside it as a `Refusal` naming the event it answers. Pure: no bus, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from gpualloc.agent.operator.words import span
from gpualloc.solvers.planner.need import observed_need
from gpualloc.solvers.planner.view import PoolView

REFUSALS_NAMED = 3  # refusals a job's or app's state names (the latest)


def original_of(letter: dict[str, Any]) -> dict[str, Any] | None:
    """The rejected record of a dead letter as JSON (None: not a JSON object, or cut short)."""
    try:
        original = orjson.loads(letter.get("original", ""))
    except orjson.JSONDecodeError:
        return None
    return original if isinstance(original, dict) else None


def names(message: dict[str, Any]) -> tuple[Any, ...]:
    """The job or app ids a message's payload names (`id`, `job_id`, `app`)."""
    p = message.get("payload")
    return tuple(p.get(k) for k in ("id", "job_id", "app") if p.get(k) is not None) if isinstance(p, dict) else ()


@dataclass(frozen=True)
class Refusal:
    """An input about a job or app that the agent refused while the job or app stayed as it was:
    the refused event's type and id, and why."""

    kind: str
    event_id: str | None
    reason: str

    def words(self) -> str:
        """`a second submission (event e7) was rejected: job id 'a' is already queued or running`."""
        what = {"job.submitted": "a second submission", "app.registered": "a later registration"}
        event = f" (event {self.event_id})" if self.event_id else ""
        return f"{what.get(self.kind, f'a {self.kind}')}{event} was rejected: {self.reason}"


def refusals_words(refused: list[Refusal]) -> str:
    """The latest `REFUSALS_NAMED` refusals, `; `-joined after a leading `; ` ("" when none)."""
    more = len(refused) - REFUSALS_NAMED
    text = "".join(f"; {r.words()}" for r in refused[-REFUSALS_NAMED:])
    return text + (f"; and {more} more refused" if more > 0 else "")


@dataclass
class Job:
    """A job's state as its messages, in publication order, tell it: `waiting`, `running`,
    `ended` or `rejected` (`unknown` before any message). `live` while it holds its id (decided
    other than `rejected`, started, or re-queued): a `rejected` decision then answers a second
    submission (its `input_event_id`), never the job, and is kept in `refused`."""

    state: str = "unknown"
    live: bool = False
    why: str = ""  # of an ended or rejected job
    gpus: list[int] = field(default_factory=list)  # while running
    since: int = 0  # its start step while running
    size: int = 0
    duration: int = 0
    requeue: bool = True
    sized: bool = False  # its GPU count was forecast
    failures: set[str] = field(default_factory=set)  # event ids of its failures (a re-size decision answers one)
    refused: list[Refusal] = field(default_factory=list)

    def submitted(self, p: dict[str, Any]) -> bool:
        """A `job.submitted`; False when the job is live (a second submission: its decision refuses it)."""
        if self.live:
            return False
        self.state = "waiting"
        self.size, self.duration = p.get("gpus") or 0, p.get("duration") or 0
        self.requeue = p.get("requeue", True) is not False
        return True

    def answers_another(self, p: dict[str, Any]) -> bool:
        """Does decision `p` refuse another submission of this live job, not the job itself?"""
        return p.get("action") == "rejected" and self.live and p.get("input_event_id") not in self.failures

    def decided(self, p: dict[str, Any]) -> bool:
        """An `allocation.decided`; False when it refused a second submission (kept in `refused`)."""
        if self.answers_another(p):
            self.refused.append(Refusal("job.submitted", p.get("input_event_id"), p.get("reason", "")))
            return False
        forecast = p.get("forecast") or {}
        self.size = forecast.get("gpus") or len(p.get("gpus") or ()) or self.size
        self.duration = forecast.get("duration") or self.duration
        self.sized = "gpus" in (forecast.get("forecast") or ())
        if p["action"] == "rejected":
            self.state, self.why, self.live = "rejected", p.get("reason", ""), False
        elif p["action"] == "start":
            self.state, self.live, self.gpus, self.since = "running", True, list(p["gpus"]), p.get("start_step") or 0
        else:
            self.state, self.live = "waiting", True
        return True

    def started(self, job_id: str, commit: dict[str, Any]) -> None:
        """A commit that starts it."""
        self.state, self.live = "running", True
        self.gpus, self.since = list(commit["assignments"].get(job_id, [])), commit["step"]

    def ended(self, why: str) -> None:
        self.state, self.why, self.live, self.gpus = "ended", why, False, []

    def failed(self, p: dict[str, Any], event_id: str | None) -> str:
        """A `job.failed`; what became of the job: `resized` (out of memory, sized by forecast:
        its next decision re-sizes it), `ended` or `requeued`."""
        if event_id:
            self.failures.add(event_id)
        reason = p.get("reason")
        self.gpus = []
        if reason == "out_of_memory" and self.sized and self.requeue:
            self.state = "waiting"
            return "resized"
        if reason == "time_limit" or not self.requeue:
            self.ended(f"failed ({reason})" if reason else "failed")
            return "ended"
        self.state = "waiting"
        return "requeued"

    def dead_letter(self, kind: str, event_id: str | None, reason: str) -> None:
        """A dead letter of a record naming it: a submission of a live job is a refusal beside
        it; a submission never decided rejects the job."""
        if kind != "job.submitted":
            return
        if self.live:
            self.refused.append(Refusal(kind, event_id, reason))
        elif self.state in ("unknown", "waiting"):
            self.state, self.why = "rejected", reason


@dataclass
class App:
    """An app's registration as its messages, in publication order, tell it: `registered` by
    its latest registration no dead letter answers, `rejected` when a dead letter answers every
    one (`why`: the latest's reason), `unknown` before any. Refused registrations of a registered
    app are kept in `refused`."""

    registrations: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)  # (event id, payload)
    refusals: dict[str | None, Refusal] = field(default_factory=dict)  # by the refused registration's event id

    def registered(self, p: dict[str, Any], event_id: str | None) -> None:
        self.registrations.append((event_id, p))

    def dead_letter(self, kind: str, event_id: str | None, reason: str) -> None:
        if kind == "app.registered":
            self.refusals[event_id] = Refusal(kind, event_id, reason)

    @property
    def accepted(self) -> tuple[str | None, dict[str, Any]] | None:
        """The registration it is registered by: its latest one not refused."""
        return next((r for r in reversed(self.registrations) if r[0] not in self.refusals), None)

    @property
    def state(self) -> str:
        if self.accepted is not None:
            return "registered"
        return "rejected" if self.refusals else "unknown"

    @property
    def why(self) -> str:
        """Why it is rejected: its latest refusal's reason."""
        return next(reversed(self.refusals.values())).reason if self.refusals else ""

    @property
    def refused(self) -> list[Refusal]:
        return list(self.refusals.values())


class Fold:
    """Every live job's and every app's state in the messages read so far (`read`, in
    publication order), keyed by pool and id. A job that ended or was rejected is dropped (its id
    is free: a later submission is a new job), so a long follow keeps what is live."""

    def __init__(self) -> None:
        self.jobs: dict[tuple[str, str], Job] = {}
        self.apps: dict[tuple[str, str], App] = {}

    def job(self, pool: str, job_id: str) -> Job:
        return self.jobs.setdefault((pool, job_id), Job())

    def app(self, pool: str, app_id: str) -> App:
        return self.apps.setdefault((pool, app_id), App())

    def read(self, m: dict[str, Any]) -> None:
        pool, p, kind = m.get("pool", "default"), m.get("payload") or {}, m.get("type")
        event_id = m.get("event_id")
        ids = [p.get("id") if kind != "allocation.decided" else p.get("job_id")]
        if kind == "job.submitted" and isinstance(p.get("id"), str):
            self.job(pool, p["id"]).submitted(p)
        elif kind == "allocation.decided" and isinstance(p.get("job_id"), str):
            self.job(pool, p["job_id"]).decided(p)
        elif kind == "plan.committed":
            for job_id in p.get("started", ()):
                self.job(pool, job_id).started(job_id, p)
        elif kind in ("job.completed", "job.cancelled") and isinstance(p.get("id"), str):
            self.job(pool, p["id"]).ended(kind.split(".")[1])
        elif kind == "job.failed" and isinstance(p.get("id"), str):
            self.job(pool, p["id"]).failed(p, event_id)
        elif kind == "app.registered" and isinstance(p.get("id"), str):
            self.app(pool, p["id"]).registered(p, event_id)
        elif kind == "input.rejected":
            ids = [self.dead_letter(p)]
        for job_id in ids:
            if not isinstance(job_id, str) or not isinstance(pool, str):
                continue
            job = self.jobs.get((pool, job_id))
            if job is not None and not job.live and job.state in ("ended", "rejected"):
                del self.jobs[(pool, job_id)]

    def dead_letter(self, letter: dict[str, Any]) -> str | None:
        """A dead letter of a submission or a registration; the job id it names (None: none)."""
        original = original_of(letter)
        if original is None:
            return None
        kind, pool, event_id = original.get("type"), original.get("pool", "default"), original.get("event_id")
        who = next((n for n in names(original) if isinstance(n, str)), None)
        if who is None or not isinstance(pool, str):
            return None
        reason = letter.get("reason", "")
        if kind == "job.submitted":
            self.job(pool, who).dead_letter(kind, event_id, reason)
            return who
        if kind == "app.registered":
            self.app(pool, who).dead_letter(kind, event_id, reason)
        return None


def app_row(
    planner: PoolView, app_id: str, gpus: list[int], step: int, commit_reason: str | None, displaced: float
) -> dict[str, Any]:
    """A live app as `status` and `explain` tell it: its bounds, the `gpus` it holds now, its
    observed need in the committed `step` (the contract's, as the reactive grants and the
    shortfall metric read it; None: nothing observed) and what it is short of within its
    ceiling, the forecast the next plan counts on (labelled so, with the quantile it is read
    at), and the latest commit's words for it (`commit_reason`); `displaced`: the queue's
    `displaced()`, computed once for all apps."""
    cfg, app = planner.config, planner.apps[app_id]
    room = planner.headroom(app.spec, displaced)
    need = observed_need(app, step)
    ceiling = app.spec.ceiling(cfg.gpus)
    return {
        "id": app_id,
        "priority": app.spec.priority,
        "min_gpus": app.spec.min_gpus,
        "max_gpus": app.spec.max_gpus,
        "need": need,
        "held": len(gpus),
        "gpus": span(gpus),
        "shortfall": max(0, min(need or 0, ceiling) - len(gpus)),
        "forecast": {
            "steps": planner.window_demand(app_id, displaced),
            "from_step": planner.now,
            "quantile": room.quantile,
        },
        "headroom": room.why,
        "commit_reason": commit_reason,
    }


def app_words(row: dict[str, Any]) -> str:
    """An app's row in one line: `need 3 (observed), held 2 (GPUs 8-9), SHORT 1  (min 1, max 4)`."""
    need = "none observed" if row["need"] is None else f"{row['need']} (observed)"
    top = row["max_gpus"] if row["max_gpus"] is not None else "pool"
    return (
        f"need {need}, held {row['held']}"
        + (f" (GPUs {row['gpus']})" if row["gpus"] else "")
        + (f", SHORT {row['shortfall']}" if row["shortfall"] else "")
        + f"  (min {row['min_gpus']}, max {top})"
    )


def forecast_words(row: dict[str, Any], shown: int = 6) -> str:
    """The forecast the next plan counts on, labelled a forecast, with the quantile `--json` gives."""
    f = row["forecast"]
    steps = f["steps"]
    if not steps:
        return "forecast: none"
    ahead = ", ".join(str(g) for g in steps[:shown]) + (", ..." if len(steps) > shown else "")
    return (
        f"forecast from step {f['from_step']} at demand quantile {f['quantile']:g}: {ahead} GPUs "
        f"(peak {max(steps)} over {len(steps)} steps)"
    )
