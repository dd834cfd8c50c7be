"""One pool's agent logic between the bus and the event interpreter, with no I/O and no clock.

The Kafka shell (`agent_service`) hands in raw records and the time; this returns the messages to
publish. What an event means is the interpreter's business (`gpualloc.solvers.planner.interpreter`);
this keeps the bus's: records are decoded and validated (`intake`), so a bad one becomes an
`input.rejected` for the dead-letter topic and never an exception; redeliveries and other pools'
events are dropped by event id; the ledger records each transaction; and every output carries a deterministic event id derived from
its cause, so consumers can de-duplicate redeliveries. Arrivals of one poll are decided in one
planning pass, named in their decisions (`pass_seq`, `pass_size`) so a replay can regroup them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, NamedTuple

import orjson

from gpualloc.agent.service.intake import read_record
from gpualloc.agent.service.ledger import SCHEDULE_BYTES, TxnLog, recordable
from gpualloc.agent.service.outbox import Output, decided, job_failed, rejection, requeued_decision
from gpualloc.agent.service.reads import PoolReads
from gpualloc.agent.service.seen_ids import SeenIds
from gpualloc.agent.service.snapshots import SNAPSHOT_BYTES, SnapshotRecords, snapshot_records
from gpualloc.bus.topics import Record, Topics
from gpualloc.schemas.commits import PART_BYTES, split, tentative_plan
from gpualloc.schemas.events import envelope
from gpualloc.schemas.published import (
    FullModeReport,
    PassFactsPart,
    PassRecorded,
    PlanCommitted,
    PoolSnapshot,
    RecordedCommit,
    Reservation,
)
from gpualloc.schemas.settings import AgentSettings, ForecastSettings
from gpualloc.solvers.grid import Schedule, batch_spans
from gpualloc.solvers.metrics import objective_of
from gpualloc.solvers.planner.effects import Decided, Effect, Event, Failed, Granted, Rejected, Requeued
from gpualloc.solvers.planner.facts import Facts, dump_change, load_change
from gpualloc.solvers.planner.full_mode import settled
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.planner.records import FULL_MODE, Commit, FullModePlan, Grant, is_blocker
from gpualloc.solvers.planner.snapshot import READABLE as SNAPSHOT_READABLE
from gpualloc.solvers.planner.snapshot import VERSION as SNAPSHOT_VERSION
from gpualloc.solvers.planner.snapshot import (
    SnapshotError,
    dump_pool,
    dump_schedule,
    joined,
    load_pool,
    load_schedule,
    pack_json,
    unpack,
)
from gpualloc.solvers.problem import Problem
from gpualloc.solvers.release import NewerRelease, refuse_newer

FACTS_BYTES = 200_000  # an entry's facts as JSON larger than this go, packed, in `pass.facts.part` records...
FACTS_PART_CHARS = 800_000  # ...of at most this many characters (base64: as many bytes) each


class Replayed(NamedTuple):
    """What a replayed ledger entry made, and where the facts this replay planned differ from
    the facts the entry recorded (None: they agree, or the entry recorded none), before the pool
    was held to the recorded ones."""

    outputs: list[Output]
    differs: str | None = None


@dataclass
class Dispatcher:
    pool: str
    topics: Topics = field(default_factory=Topics)
    interpreter: Pool = field(default_factory=Pool)
    seen_limit: int = AgentSettings().seen_limit
    keyed: bool = False  # a shared group's pool: its records are those keyed by its name (`handle`)
    dedup_steps: int = AgentSettings().dedup_steps
    seq: int = 0  # commits published
    txn: int = 0  # transactions sealed (ledger entries)
    seen: SeenIds = field(default_factory=SeenIds)  # event id -> (step it was seen at, payload digest)
    frontier: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> next offset to consume
    last_commit: Commit | None = None
    full_mode_report: FullModeReport | None = None  # full mode's state at the latest commit that said it
    on_commit: Callable[[Commit], None] | None = None  # sees every commit (audits check each one)
    part_bytes: int = PART_BYTES  # a commit's message larger than this is split into parts of at most this
    _log: TxnLog = field(default_factory=TxnLog)  # this transaction, for the ledger
    _before: Facts = field(default_factory=Facts)  # what was bound when this transaction began
    _seen_fit: int | None = None  # the ids the last snapshot kept when it could not keep them all
    _snapshot_parts: int = 1  # the records of the last snapshot taken or restored

    @property
    def reads(self) -> PoolReads:
        """The pool, to read: its clock, its boundary and its planner's view (every change goes
        through this dispatcher, which records it in the ledger)."""
        return self.interpreter

    def cut(self, now: datetime) -> Problem | None:
        """Cut the window for the next boundary's plan (`Pool.cut`): the problem to plan with the
        hot path, its plan handed back by `planned_ahead`; recorded in the ledger, so a replay
        cuts here too."""
        cut = self.interpreter.cut()
        if cut is None:
            return None
        self._log = self._log.cut_at(now)
        return cut.problem

    def planned_ahead(self, step: int, schedule: Schedule) -> None:
        """The plan of the cut made at `step` (ignored unless that cut still waits for it)."""
        self.interpreter.planned_ahead(step, schedule)

    def use(self, run: dict[str, Any]) -> None:
        """Plan as a recorded `run` did (`run_settings`): hot path, clock, full-mode cadence,
        de-duplication. `replay` takes up each entry's own run, so a replay plans as the agent
        that made the entry did, whatever its settings are now."""
        self.interpreter.use(
            run["policy"],
            run["effort"],
            run["step_seconds"],
            run["every"],
            ForecastSettings(**{"physics": 1, **run.get("forecast", {})}),  # entries without it: version 1
            run.get("replan_work", 0),  # entries without it were made by agents that always inserted
            run.get("rules", 1),  # entries without it were written by rules 1
        )
        self.dedup_steps = run.get("dedup_steps", self.dedup_steps)
        self.seen_limit = run.get("seen_limit", self.seen_limit)
        self.keyed = run.get("keyed", False)

    # ---- input ----------------------------------------------------------------------------
    def handle(self, records: list[Record], now: datetime, recorded: dict[str, int] | None = None) -> list[Output]:
        """Apply a poll's records in one planning pass; the messages to publish. A keyed pool
        (one of a shared group's) reads a partition it shares with other pools: their records
        are passed over, moving only the frontier (a replay, which reads only the pool's own,
        gives the frontier the pass `recorded`, so the messages it makes carry the same). All or nothing: the pass is read and planned
        first, and the de-duplication window, the frontier and the transaction's log take what
        it read only once the pool has planned it (`Pool.apply`, itself all or nothing), so a
        pass that raises leaves them as it found them and the same records handed in again are
        planned afresh."""
        frontier = dict(self.frontier)
        if self.keyed:
            for rec in records:
                if rec.key != self.pool:
                    frontier[f"{rec.topic}:{rec.partition}"] = rec.offset + 1
            records = [rec for rec in records if rec.key == self.pool]
            if not records:
                self.frontier = frontier
                return []
        for rec in records:
            if rec.topic in self.topics.inputs:
                frontier[f"{rec.topic}:{rec.partition}"] = rec.offset + 1
        log = self._log.read(records, now, self.topics.inputs)
        step = (
            self.interpreter.view.now if self.interpreter.view is not None else 0
        )  # the step the pass's ids are seen at
        taken: dict[str, str] = {}  # event id -> payload digest, of the events this pass takes
        rejected: list[Output] = []
        events: list[Event] = []
        for rec in records:
            read = read_record(rec, self.pool, self.keyed, self.seen, taken)
            if isinstance(read, str):
                rejected.append(self._reject(rec, read, now))
            elif read is not None:
                events.append(read)
        effects = self.interpreter.apply(events, now)
        for event_id, digest in taken.items():
            self.seen.add(event_id, step, digest)
        self.seen.keep_newest(self.seen_limit)
        self.frontier, self._log = (frontier if recorded is None else dict(recorded)), log
        return rejected + [o for effect in effects for o in self._outputs(effect, now)]

    def refuse(self, records: list[Record], reason: str, now: datetime) -> list[Output]:
        """Dead-letter `records` without planning them (a pass the planner raised on: a bug that
        would raise again on every restart), moving the frontier past them; the ledger entry
        names them with `reason`, so a replay dead-letters them again. A shared partition's
        records of other pools only move the frontier."""
        frontier, refused, out = dict(self.frontier), {}, []
        for rec in records:
            if rec.topic in self.topics.inputs:
                frontier[f"{rec.topic}:{rec.partition}"] = rec.offset + 1
            if not self.keyed or rec.key == self.pool:
                out.append(self._reject(rec, reason, now))
                refused[f"{rec.topic}:{rec.partition}:{rec.offset}"] = reason
        self.frontier, self._log = frontier, self._log.refusing(refused, now)
        return out

    def _outputs(self, effect: Effect, now: datetime) -> list[Output]:
        if isinstance(effect, Decided):
            return [decided(self.topics, self.pool, effect, now)]
        if isinstance(effect, Rejected):
            return [self._reject(effect.ref[0], effect.reason, now)]
        if isinstance(effect, Failed) and effect.by_gpualloc:
            return [self._job_failed(effect, now)]
        if isinstance(effect, Granted):
            return [self._reactive(effect.grant, now)]
        if isinstance(effect, Requeued):
            return [self._requeued(effect, now)]
        return []

    def _reactive(self, grant: Grant, now: datetime) -> Output:
        """The reactive commit of `grant`: the step it is for, the next seq, only the sets it changes
        (node agents bind them at once and keep every other holder as the step's commit left it)."""
        origin = self.interpreter.origin
        assert origin is not None  # a pool that grants has committed
        self.seq += 1
        payload = PlanCommitted(
            step=grant.step,
            seq=self.seq,
            step_start=origin + grant.step * self.interpreter.step_length,
            assignments={app_id: list(gpus) for app_id, gpus in grant.sets.items()},
            source="heuristic",
            objective=0.0,  # it carries no plan: the step's commit has the objective
            reactive=True,
            reasons={grant.app_id: grant.reason}
            | {donor: f"gave GPUs above its observed demand to {grant.app_id}" for donor in grant.given},
            frontier=dict(self.frontier),
        )
        return Output(
            self.topics.commits,
            self.pool,
            envelope("plan.committed", payload, now, f"{self.pool}:commit:{self.seq}", self.pool),
        )

    # ---- steps ----------------------------------------------------------------------------
    def commit(
        self,
        now: datetime,
        plan: FullModePlan | None = None,
        recorded: RecordedCommit | None = None,
        full_mode: str | None = None,
        report: FullModeReport | None = None,
    ) -> list[Output]:
        """Commit the current step: the hot path's plan, or `plan` (full mode's) when it is
        adopted, or what a ledger `recorded` (replays); `full_mode`: what became of full mode
        when it offered no plan (say, skipped and why); `report`: full mode's state, its last
        solve settled here when it offered `plan`. The message carries the whole tentative
        plan from this step on; too large for one message, it is split into parts (`commits.split`),
        returned in order, all for the same transaction."""
        if recorded is not None:
            schedule = load_schedule(recorded.schedule) if recorded.schedule is not None else None
            committed = self.interpreter.replay_commit(
                schedule, recorded.full_mode, recorded.bound, recorded.ahead, now=now
            )
            ahead, report = recorded.ahead, recorded.full_mode_report
        else:
            ahead = self.interpreter.ahead_ready()
            committed = self.interpreter.commit(plan, admit=_recordable, full_mode=full_mode, now=now)
            if report is not None and committed.adoption is not None:
                report = settled(report, committed.adoption, committed.commit.source == FULL_MODE)
        commit = committed.commit
        self.full_mode_report = report or self.full_mode_report
        self.last_commit, self.seq = commit, self.seq + 1
        planner, origin = self.interpreter.view, self.interpreter.origin
        assert planner is not None and origin is not None  # a pool that commits is configured
        self._forget_before(planner.now - self.dedup_steps)
        if self.on_commit is not None:
            self.on_commit(commit)
        window, schedule = commit.window, commit.schedule
        objective = objective_of(window, schedule)
        batch = {k: v for k, v in batch_spans(window, schedule).items() if not is_blocker(k)}
        payload = PlanCommitted(
            step=commit.step,
            seq=self.seq,
            step_start=origin + commit.step * self.interpreter.step_length,
            assignments={k: list(v) for k, v in commit.assignments.items()},
            # the plan's fields, which the model validates into its TentativePlan
            plan=tentative_plan(window.gpus, window.horizon, batch, schedule.realtime),  # type: ignore[arg-type]
            source=commit.source,
            objective=round(objective, 6),
            bound=committed.bound,
            started=list(commit.started),
            full_mode=committed.full_mode,
            full_mode_report=report,
            frontier=dict(self.frontier),
            reasons=commit.reasons,
            reservations={
                job_id: Reservation(start_step=step, first_gpu=(mask & -mask).bit_length() - 1, gpus=mask.bit_count())
                for job_id, (step, mask) in sorted(commit.reserved.items())
            }
            or None,
        )
        self._log = self._log.committed(
            RecordedCommit(
                seq=self.seq,
                full_mode=committed.full_mode,
                full_mode_report=report,
                bound=committed.bound,
                schedule=dump_schedule(commit.schedule) if commit.source == FULL_MODE else None,
                ahead=ahead,
            ),
            now,
        )
        message = envelope("plan.committed", payload, now, f"{self.pool}:commit:{self.seq}", self.pool)
        notices = [self._requeued(r, now) for r in committed.requeued]
        notices += [self._job_failed(failed, now) for failed in committed.expired]
        return notices + [Output(self.topics.commits, self.pool, part) for part in split(message, self.part_bytes)]

    def _forget_before(self, step: int) -> None:
        """De-duplicate over the last `dedup_steps` steps (and `seen_limit` ids): the same window
        live, after a restart and in a replay, so all three decide alike."""
        self.seen.forget_before(step)

    # ---- the ledger, snapshots and replays ----------------------------------------------------
    def seal(self, run: dict[str, Any]) -> list[Output]:
        """The ledger records of this transaction, its entry last (none when it consumed and
        committed nothing); `run`: the agent settings a replay needs. The entry records what the
        transaction changed of what is bound (`facts`), so a replay by any later release holds
        the pool to it; facts too large to share the entry's message go before it in
        `pass.facts.part` records."""
        log, self._log = self._log, TxnLog()
        if log.now is None:
            return []
        facts = dump_change(self.interpreter.changed(self._before))
        self._before = self.interpreter.facts()
        self.txn += 1
        raw = orjson.dumps(facts)
        packed = pack_json(raw) if len(raw) > FACTS_BYTES else ""
        pieces = [packed[i : i + FACTS_PART_CHARS] for i in range(0, len(packed), FACTS_PART_CHARS)]
        entry = PassRecorded(
            txn=self.txn,
            now=log.now,
            inputs=list(log.inputs),
            inline=dict(log.inline),
            commits=list(log.commits),
            cut=log.cut,
            frontier=dict(self.frontier),
            run=run,
            facts=None if pieces else facts,
            facts_parts=len(pieces),
            seq=self.seq,
            refused=dict(log.refused),
        )
        parts = [
            Output(
                self.topics.ledger,
                self.pool,
                envelope(
                    "pass.facts.part",
                    PassFactsPart(txn=self.txn, part=k, text=piece),
                    log.now,
                    f"{self.pool}:pass:{self.txn}:facts:{k}",
                    self.pool,
                ),
            )
            for k, piece in enumerate(pieces, 1)
        ]
        return [
            *parts,
            Output(
                self.topics.ledger,
                self.pool,
                envelope("pass.recorded", entry, log.now, f"{self.pool}:pass:{self.txn}", self.pool),
            ),
        ]

    def snapshot(self, now: datetime, ledger_partition: int, ledger_next: int, state_partition: int) -> list[Output]:
        """The pool's state after the sealed transaction, for the compacted state topic (see
        `snapshot_job`)."""
        return self.snapshot_taken(self.snapshot_job(now, ledger_partition, ledger_next, state_partition)())

    def snapshot_taken(self, taken: SnapshotRecords) -> list[Output]:
        """Note what a snapshot made by `snapshot_job` kept (on the thread that owns the
        dispatcher); its records, to send in one transaction."""
        self._seen_fit, self._snapshot_parts = taken.seen_fit, taken.parts
        return taken.records

    def snapshot_job(
        self, now: datetime, ledger_partition: int, ledger_next: int, state_partition: int
    ) -> Callable[[], SnapshotRecords]:
        """The snapshot of the state after the sealed transaction, as a function that may run in
        another thread while the pool goes on (it reads and writes nothing of the dispatcher; hand
        its result to `snapshot_taken`): the state is serialized now, compression (most of the
        cost) is left to the call, which gives its records, all for `state_partition` (the
        pool's): the `pool.snapshot` keyed `<pool>` with the first piece of the packed state and
        their number, then `pool.snapshot.part` records keyed `<pool>` NUL `<i>` with the others,
        pieces of at most `SNAPSHOT_BYTES` (the first the largest, so a size limit refuses the
        first record sent). One transaction writes them all, so on the compacted topic the latest
        `pool.snapshot` always finds its parts: a later value of a part's key comes only with a
        later snapshot. It carries the de-duplication window, as much of it as fits in the room
        the pool's state leaves in the records it needs (the newest ids; a restart may then take
        an old duplicate for new)."""
        if self.interpreter.cut_pending:
            raise ValueError("a snapshot holds no plan made ahead: take it after the cut's boundary has committed")
        window, before = len(self.seen), self._snapshot_parts
        seen = self.seen.newest(self._seen_fit)  # trimmed to what fitted last time: one compression, usually
        state = orjson.dumps(dump_pool(self.interpreter))
        txn, pool = self.txn, self.pool
        meta: dict[str, Any] = dict(  # PoolSnapshot's fields, with `parts` and `state`
            version=SNAPSHOT_VERSION,
            txn=txn,
            seq=self.seq,
            ledger_partition=ledger_partition,
            ledger_next=ledger_next,
            frontier=dict(self.frontier),
        )

        return functools.partial(
            snapshot_records,
            self.topics.state,
            pool,
            now,
            state,
            seen,
            window,
            before,
            meta,
            state_partition,
            SNAPSHOT_BYTES,
        )

    def restore(self, snap: PoolSnapshot, pieces: dict[int, str] | None = None) -> None:
        """Take up the state a snapshot holds, with `pieces`, its parts' pieces by part number
        (SnapshotError when this release cannot read it, or a part is missing)."""
        if snap.version > SNAPSHOT_VERSION:
            raise NewerRelease(
                f"snapshot of transaction {snap.txn}: written by a newer release (snapshot version {snap.version}; "
                f"this release writes {SNAPSHOT_VERSION})"
            )
        if snap.version not in SNAPSHOT_READABLE:
            raise SnapshotError(
                f"snapshot version {snap.version!r}: this release reads versions "
                f"{', '.join(map(str, SNAPSHOT_READABLE))}"
            )
        state = unpack(joined(snap.state, snap.parts, pieces or {}))
        load_pool(state["pool"], self.interpreter)
        self.seq, self.txn, self.frontier = snap.seq, snap.txn, dict(snap.frontier)
        self._snapshot_parts = snap.parts
        self._before = self.interpreter.facts()
        self.seen = SeenIds(
            (event_id, step, digest[0] if digest else None)  # no digest: older snapshots
            for event_id, step, *digest in state["seen"]
        )

    def replay(self, entry: PassRecorded, record_at: Callable[[str, int, int], Record]) -> Replayed:
        """Redo a recorded transaction: its inputs in the recorded order (`record_at` fetches a
        record by topic, partition and offset), then its commits as recorded, then hold the pool
        to the facts it recorded (what was bound stays bound, whichever release's rules wrote the
        entry). Returns the messages it made, which, for an entry of this release's rules, equal
        the ones published the first time but for latency_ms. NewerRelease for an entry written by
        a newer release."""
        refuse_newer(entry.run, f"ledger entry {entry.txn}")
        before = self._before
        self.use(entry.run)
        records = []
        for topic, partition, first, last in entry.inputs:
            inline = entry.inline.get(f"{topic}:{partition}:{first}")
            if inline is not None:
                records.append(Record(topic, partition, first, self.pool, inline.encode()))
            else:
                records.extend(record_at(topic, partition, offset) for offset in range(first, last + 1))
        out = self.handle(records, entry.now, entry.frontier) if records else []
        for where, reason in entry.refused.items():
            name, at, offset = where.rsplit(":", 2)
            out += self.refuse([record_at(name, int(at), int(offset))], reason, entry.now)
        self.frontier = dict(entry.frontier)  # with the records a keyed pool passed over
        out += [part for c in entry.commits for part in self.commit(entry.now, recorded=c)]
        if entry.cut:  # its plan, made elsewhere, is made here by the commit that carries it (the same
            self.cut(entry.now)  # function of the same window); one still to come is made by the live agent
        differs = None
        if entry.facts is not None:
            recorded = load_change(entry.facts)
            planned = dump_change(self.interpreter.changed(before))
            if planned != entry.facts:
                differs = _difference(entry.facts, planned)
            self.interpreter.hold(before, recorded)
        if entry.seq is not None:  # its reactive commits counted as published, whoever planned them
            self.seq = entry.seq
        self.seal(entry.run)
        return Replayed(out, differs)

    # ---- outputs --------------------------------------------------------------------------
    def _reject(self, rec: Record, reason: str, now: datetime) -> Output:
        return rejection(self.topics, rec, reason, now, self.pool)

    def _requeued(self, requeued: Requeued, now: datetime) -> Output:
        planner = self.interpreter.view
        assert planner is not None  # only a configured pool re-queues a start
        return requeued_decision(self.topics, self.pool, requeued, now, planner.now)

    def _job_failed(self, failed: Failed, now: datetime) -> Output:
        planner = self.interpreter.view
        assert planner is not None  # only a configured pool fails a job
        return job_failed(self.topics, self.pool, failed, now, planner.now)


def _recordable(schedule: Schedule) -> str | None:
    """`recordable` against this module's SCHEDULE_BYTES."""
    return recordable(schedule, SCHEDULE_BYTES)


def _difference(recorded: dict[str, Any], planned: dict[str, Any]) -> str:
    """The first difference between the facts an entry recorded and a replay's, in words."""
    for part in ("started", "ended", "apps", "committed"):
        mine, theirs = planned.get(part), recorded.get(part)
        if mine == theirs:
            continue
        if isinstance(mine, dict) or isinstance(theirs, dict):
            mine, theirs = mine or {}, theirs or {}
            key = min(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            return f"facts.{part}[{key!r}]: recorded {theirs.get(key)!r}, replayed {mine.get(key)!r}"
        return f"facts.{part}: recorded {theirs!r}, replayed {mine!r}"
    return "facts differ"
