"""`gpualloc audit`: replay a pool's ledger from its first transaction through the planner core
and check that every published decision and commit is reproduced exactly and every committed
step is legal. Holds across agent restarts: the ledger records each transaction's inputs in the
order they were used, its commits and the adopted full-mode plans.

Holds across releases too: an entry of this release's planning rules is replayed exactly (its
messages and the facts it recorded); an entry of older rules, which this planner would plan
otherwise, is judged by the contract instead: its published commits against the online rules
R1-R5, together with the commits before and after them (nothing bound moves or is dropped), and
the replay held to the facts it recorded. The report says how many entries were judged each way."""

from __future__ import annotations

import time
from collections.abc import Mapping, Set
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer

from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.agent.service.reads import step_of
from gpualloc.bus import clients
from gpualloc.bus.admin import partition_counts
from gpualloc.bus.clients import Broker
from gpualloc.bus.history import partitions, read_history, read_range, reader
from gpualloc.bus.topics import Topics, decode
from gpualloc.schemas.commits import merge
from gpualloc.solvers.grid import to_grid
from gpualloc.solvers.legality import check_plan, online_violations
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import Commit
from gpualloc.solvers.release import RULES, NewerRelease

STALLED_AFTER_S = 300.0  # inputs waiting past the ledger this long: the pool's agent publishes nothing
AUDITED = ("allocation.decided", "plan.committed", "input.rejected", "job.failed")
VOLATILE = ("latency_ms",)  # measured by the shell at publish time, not decided


@dataclass
class Bounds:
    """Steps to report on: [first, last], each a step number or a time (None: open)."""

    first: int | datetime | None = None
    last: int | datetime | None = None

    def holds(self, step: int, step_at) -> bool:
        lo = step_at(self.first) if isinstance(self.first, datetime) else self.first
        hi = step_at(self.last) if isinstance(self.last, datetime) else self.last
        return (lo is None or step >= lo) and (hi is None or step <= hi)


@dataclass
class AuditResult:
    pool: str
    transactions: int = 0
    decisions: int = 0  # reproduced, within the bounds
    commits: int = 0
    mismatches: list[str] = field(default_factory=list)
    illegal: list[str] = field(default_factory=list)
    waiting: int = 0  # the pool's input records on the bus past the ledger's frontier
    replayed: int = 0  # entries of this release's rules, replayed exactly
    judged: int = 0  # entries of older rules, judged by the online rules and continuity
    waited_s: float = 0.0  # how long the oldest of them has been on the bus

    @property
    def stalled(self) -> bool:
        """Inputs on the bus and no transaction of the pool's agent, or none for the oldest of
        them for `STALLED_AFTER_S`: it publishes nothing (or no longer does)."""
        return self.waiting > 0 and (not self.transactions or self.waited_s > STALLED_AFTER_S)

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.illegal and not self.stalled

    def lines(self, shown: int = 20) -> list[str]:
        out = [f"mismatch: {m}" for m in self.mismatches[:shown]]
        out += [f"illegal: {v}" for v in self.illegal[:shown]]
        problems = len(self.mismatches) + len(self.illegal)
        if problems > 2 * shown:
            out.append(f"... {problems - len(out)} more")
        if self.stalled:
            out.append(
                stalled_line(self.pool, self.waiting)
                if not self.transactions
                else f"pool {self.pool!r}: {self.waiting:,} inputs on the bus past its ledger, the oldest "
                f"{self.waited_s:,.0f} s old: its agent publishes nothing"
            )
        out.append(
            f"audit {self.pool}: {self.decisions} decisions, {self.commits} commits reproduced; {problems} mismatches"
        )
        if self.judged:
            out.append(
                f"  {self.replayed} transactions replayed exactly (rules {RULES}); {self.judged} of older rules "
                "judged by R1-R5 and continuity with the commits around them"
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "transactions": self.transactions,
            "decisions": self.decisions,
            "commits": self.commits,
            "mismatches": self.mismatches,
            "illegal": self.illegal,
            "waiting": self.waiting,
            "waited_s": round(self.waited_s, 3),
            "replayed": self.replayed,
            "judged": self.judged,
            "stalled": self.stalled,
            "ok": self.ok,
        }


def stalled_line(pool: str, waiting: int) -> str:
    return f"pool {pool!r}: {waiting:,} inputs on the bus, no commit or decision published"


def pool_inputs(records, pool: str) -> list:
    """The input `records` that are `pool`'s (by the pool their envelope names)."""
    out = []
    for r in records:
        try:
            message = decode(r.value) if r.value is not None else None
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("pool", "default") == pool:
            out.append(r)
    return out


async def waiting_inputs(bootstrap: Broker | str, topics: Topics, pool: str) -> int:
    """The pool's input records on the bus (for a pool whose agent has recorded no transaction:
    all of them are waiting)."""
    counts = await partition_counts(bootstrap, list(topics.inputs))
    consumer = await clients.started(reader(bootstrap), "inputs reader")
    try:
        return len(
            pool_inputs(
                await read_range(consumer, {tp: 0 for name in topics.inputs for tp in partitions(counts, name)}), pool
            )
        )
    finally:
        await consumer.stop()


def _comparable(message: dict[str, Any]) -> dict[str, Any]:
    """A message as compared: without volatile fields, and a null field as one absent (so the
    messages of a release before that field was added still match)."""
    payload = {k: v for k, v in message.get("payload", {}).items() if k not in VOLATILE and v is not None}
    return {**message, "payload": payload}


async def published(consumer: AIOKafkaConsumer, topics: Topics, counts: dict[str, int], pool: str) -> dict[str, dict]:
    """The pool's published outputs by event id (committed transactions only)."""
    starts = {
        tp: 0
        for name in (topics.decisions, topics.commits, topics.deadletter, topics.jobs)
        for tp in partitions(counts, name)
    }
    out: dict[str, dict] = {}
    for r in await read_range(consumer, starts):
        try:
            message = decode(r.value) if r.value is not None else None
        except ValueError:
            continue
        if (
            isinstance(message, dict)
            and message.get("pool") == pool
            and message.get("type") in AUDITED
            and topics.of_type(message["type"]) == r.topic
        ):  # not an input that merely names an output's type
            source = (message.get("payload") or {}).get("source")
            if message["type"] == "job.failed" and source != "agent":
                continue  # a node agent's notice
            if message["type"] == "input.rejected" and source is not None:
                continue  # a shared group's member found no pool to read it
            out[message["event_id"]] = message
    return out


async def audit(bootstrap: Broker | str, topics: Topics, pool: str, bounds: Bounds = Bounds()) -> AuditResult:
    """The ledger is read before the outputs, so every output of an audited transaction is read
    too; outputs of transactions after it (an agent still running) are told apart by `_after`."""
    names = [topics.state, topics.ledger, *topics.inputs, topics.decisions, topics.commits, topics.deadletter]
    counts = await partition_counts(bootstrap, names)
    consumer = await clients.started(reader(bootstrap), "audit reader")
    try:
        history = await read_history(consumer, topics, counts, pool, use_snapshot=False)
        recorded = await published(consumer, topics, counts, pool)
        frontier = history.entries[-1].frontier if history.entries else {}
        later = await read_range(
            consumer,
            {
                tp: frontier.get(f"{tp.topic}:{tp.partition}", 0)
                for name in topics.inputs
                for tp in partitions(counts, name)
            },
        )
    finally:
        await consumer.stop()
    result = compare(pool, topics, history, recorded, bounds, _event_ids(later))
    waiting = pool_inputs(later, pool)
    result.waiting = len(waiting)
    if waiting:
        result.waited_s = time.time() - min(r.timestamp for r in waiting) / 1000
    return result


def compare(
    pool: str,
    topics: Topics,
    history,
    recorded: dict[str, dict],
    bounds: Bounds = Bounds(),
    later: Set[str] = frozenset(),
) -> AuditResult:
    """Replay `history` (the whole ledger) and hold what it makes against `recorded`; `later`:
    ids of the input events after the ledger's frontier (what a running agent took since)."""
    result = AuditResult(pool, transactions=len(history.entries))
    commits: list[Commit] = []
    down: list[int] = []  # the GPUs of nodes down or drained at each commit (a mask)

    def seen(commit: Commit) -> None:
        commits.append(commit)
        planner = d.reads.view
        assert planner is not None  # Dispatcher.commit: a pool that commits is configured
        down.append(planner.closed)
        if not judging and bounds.holds(commit.step, d.reads.step_at):  # a judged entry's are the record's
            for v in check_plan(commit.window, to_grid(commit.window, commit.schedule)):
                result.illegal.append(f"step {commit.step}: {v}")

    d = Dispatcher(pool, topics, Pool(), on_commit=seen)
    reproduced: set[str] = set()
    grants: dict[int, dict[str, list[int]]] = {}  # step -> app -> its set after the step's reactive commits
    older: list[PublishedStep] = []  # the commits of older rules' entries, as published
    older_down: dict[int, int] = {}  # their steps' GPUs of nodes down or drained
    judging = False  # the entry replayed is of older rules: its published commits are judged, not the replay's
    for entry in history.entries:
        step, seq, frontier = step_of(d.reads) or 0, d.seq, dict(d.frontier)
        judging = entry.run.get("rules", 1) < RULES
        mark = len(commits)
        try:
            replayed = d.replay(entry, history.record_at)
        except (LookupError, NewerRelease) as e:
            result.mismatches.append(f"transaction {entry.txn}: {e}")
            break
        if judging:  # planned by other rules: its own messages are the record, judged below
            result.judged += 1
            older_down.update((c.step, mask) for c, mask in zip(commits[mark:], down[mark:]))  # the pool's nodes
            del commits[mark:], down[mark:]
            mine = _of_entry(recorded, entry, seq, frontier, step, step_of(d.reads) or 0, history) - reproduced
            reproduced |= mine
            older += _published_commits([recorded[i] for i in mine if i in recorded], grants)
            d.seq = max(
                (recorded[i]["payload"]["seq"] for i in mine if i in recorded and ":commit:" in i), default=d.seq
            )
            continue
        result.replayed += 1
        if replayed.differs is not None:
            result.mismatches.append(f"transaction {entry.txn}: {replayed.differs}")
        for o in replayed.outputs:
            m = o.message
            assert m is not None  # a replay makes no tombstones (only snapshots do)
            event_id, kind = m["event_id"], m["type"]
            if kind == "plan.committed" and m["payload"].get("reactive"):
                grants.setdefault(m["payload"]["step"], {}).update(m["payload"]["assignments"])
            at = m["payload"]["step"] if kind == "plan.committed" else step
            within = d.reads.view is None or bounds.holds(at, d.reads.step_at)
            theirs = recorded.get(event_id)
            reproduced.add(event_id)
            if theirs is None:
                if within:
                    result.mismatches.append(
                        f"{kind} {event_id} (transaction {entry.txn}): made by the replay, never published"
                    )
            elif _comparable(theirs) != _comparable(m):
                if within:
                    result.mismatches.append(
                        f"{kind} {event_id} (transaction {entry.txn}): "
                        f"{_difference(_comparable(theirs), _comparable(m))}"
                    )
            elif within:
                result.decisions += kind == "allocation.decided"
                result.commits += kind == "plan.committed" and m["payload"].get("part", 1) == 1  # one a commit
    for event_id, m in recorded.items():
        if event_id not in reproduced and not _after(m, d, later):
            result.mismatches.append(f"{m['type']} {event_id}: published, but the ledger's replay does not make it")
    planner = d.reads.view
    if planner is not None:
        apps = {a: s.spec for a, s in planner.apps.items()}
        limits = {
            a: (
                s.min_gpus,
                planner.config.gpus if s.max_gpus is None else s.max_gpus,
                s.cap(planner.config.swap_cap),
            )
            for a, s in apps.items()
        }
        steps = sorted([*(PublishedStep(c.step, c.assignments, c.started) for c in commits), *older], key=_step)
        visible = [
            replace(c, assignments={**c.assignments, **{a: tuple(g) for a, g in grants.get(c.step, {}).items()}})
            for c in steps
            if bounds.holds(c.step, d.reads.step_at)
        ]
        down_at = [0] * (max((c.step for c in steps), default=0) + 1)
        for step, mask in [*((c.step, mask) for c, mask in zip(commits, down)), *older_down.items()]:
            down_at[step] = mask
        restarts: dict[str, list[int]] = {}
        for c in steps:
            for job_id in c.started:  # a job started again after failing is a fresh start
                restarts.setdefault(job_id, []).append(c.step)
        result.illegal += online_violations(
            visible,
            limits,
            set(apps),
            down_at,
            restarts,
            node_size=planner.config.node_size,
            pool=(planner.config.gpus, {a: s.priority for a, s in apps.items()}),
        )
    return result


def _of_entry(
    recorded: dict[str, dict],
    entry: Any,
    seq: int,
    frontier: dict[str, int],
    first: int,
    last: int,
    history: Any,
) -> set[str]:
    """The event ids of the messages an entry published: its commits (its step commits by seq,
    its reactive ones by the frontier they carry, which is the entry's, or, where the entry names
    it, every seq after `seq` up to its own), the decisions of its inputs, the rejections of its
    records (past `frontier`), and the agent's failure notices of the steps it covered (`first`
    to `last`)."""
    inputs: set[str] = set()
    for topic, partition, lo, hi in entry.inputs:
        for offset in range(lo, hi + 1):
            inline = entry.inline.get(f"{topic}:{partition}:{lo}")
            value = inline.encode() if inline is not None else history.record_at(topic, partition, offset).value
            inputs.add(_event_id(value))
    steps = {c.seq for c in entry.commits}
    out = set()
    for event_id, m in recorded.items():
        p, kind = m.get("payload") or {}, m.get("type")
        if kind == "plan.committed":
            mine = (
                seq < p.get("seq", 0) <= entry.seq
                if entry.seq is not None
                else p.get("seq") in steps
                or (bool(p.get("reactive")) and p.get("seq", 0) > seq and p.get("frontier") == entry.frontier)
            )
        elif kind == "allocation.decided":
            mine = p.get("input_event_id") in inputs
        elif kind == "input.rejected":
            where = f"{p.get('topic')}:{p.get('partition')}"
            mine = (
                frontier.get(where, 0) <= p.get("offset", -1) < entry.frontier.get(where, 0)
                or f"{where}:{p.get('offset')}" in entry.inline
            )
        else:
            at = event_id.rsplit(":", 1)[-1]
            mine = at.isdigit() and first <= int(at) <= last
        if mine:
            out.add(event_id)
    return out


@dataclass(frozen=True)
class PublishedStep:
    """A step's commit as published, as the online rules read it."""

    step: int
    assignments: dict[str, tuple[int, ...]]
    started: tuple[str, ...]


def _step(c: PublishedStep) -> int:
    return c.step


def _published_commits(messages: list[dict], grants: dict[int, dict[str, list[int]]]) -> list[PublishedStep]:
    """The step commits among `messages` (their parts merged) as the online rules read them; the
    reactive ones folded into `grants` (step -> app -> its set after them)."""
    parts: dict[int, list[Mapping[str, Any]]] = {}
    for m in messages:
        if m.get("type") != "plan.committed":
            continue
        p = m["payload"]
        if p.get("reactive"):
            grants.setdefault(p["step"], {}).update(p["assignments"])
        else:
            parts.setdefault(p["seq"], []).append(p)
    out = []
    for seq in sorted(parts):
        whole = merge(parts[seq])
        assignments = {holder: tuple(gpus) for holder, gpus in whole["assignments"].items()}
        out.append(PublishedStep(whole["step"], assignments, tuple(whole.get("started", ()))))
    return out


def _event_ids(records) -> set[str]:
    return {event_id for r in records if (event_id := _event_id(r.value))}


def _event_id(value: bytes | None) -> str:
    """A record's event id ("" when it has none to read)."""
    try:
        return str(decode(value)["event_id"]) if value is not None else ""
    except (ValueError, TypeError, KeyError):
        return ""


def _after(message: dict[str, Any], d: Dispatcher, later: Set[str]) -> bool:
    """Was `message` published by a transaction after the audited ledger (an agent still running
    while the audit reads)? Its cause lies beyond what the replay consumed or committed."""
    p, kind = message.get("payload") or {}, message.get("type")
    if kind == "plan.committed":
        return p.get("seq", 0) > d.seq
    if kind == "allocation.decided":
        return p.get("input_event_id") in later
    if kind == "input.rejected":
        return p.get("offset", 0) >= d.frontier.get(f"{p.get('topic')}:{p.get('partition')}", 0)
    if kind == "job.failed":
        step = message.get("event_id", "").rsplit(":", 1)[-1]
        now = step_of(d.reads)
        return now is None or not step.isdigit() or int(step) >= now
    return False


def _difference(theirs: dict, ours: dict) -> str:
    for key in sorted(set(theirs) | set(ours)):
        if theirs.get(key) != ours.get(key):
            if isinstance(theirs.get(key), dict) and isinstance(ours.get(key), dict):
                return f"{key}.{_difference(theirs[key], ours[key])}"
            return f"{key}: published {_short(theirs.get(key))}, replayed {_short(ours.get(key))}"
    return "differs"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
