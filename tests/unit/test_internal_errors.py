"""A pass the planner core raises on (a bug) stops neither the agent nor its restarts: its records
are dead-lettered naming the error, the frontier moves past them, and the ledger entry a replay
reads passes them over."""

from __future__ import annotations

from datetime import datetime, timezone

import orjson
from support.hostile import envelope, job

from gpualloc.agent.service.agent_service import AgentService
from gpualloc.agent.service.dispatcher import Dispatcher
from gpualloc.bus.topics import Record, Topics
from gpualloc.schemas.published import InputRejected, PassRecorded
from gpualloc.solvers.planner.interpreter import Pool
from gpualloc.solvers.release import RULES

T0 = datetime(2026, 12, 1, 8, tzinfo=timezone.utc)
RUN = {"policy": "heuristic", "effort": 0.05, "step_seconds": 10, "every": 0, "rules": RULES}
JOBS, CONFIG = Topics().jobs, Topics().config


def boom(problem):
    raise ZeroDivisionError("a bug in the hot path")


def configured(scheduler=boom) -> Dispatcher:
    """A configured pool whose hot path raises at its first plan."""
    d = Dispatcher("default", interpreter=Pool(scheduler=scheduler))
    d.handle([Record(CONFIG, 0, 0, "default", orjson.dumps(envelope("pool.configured", {"gpus": 8}, "c", T0)))], T0)
    d.seal(RUN)
    return d


def submissions(first: int = 0) -> list[Record]:
    return [
        Record(JOBS, 0, first + k, "default", orjson.dumps(envelope("job.submitted", job(f"j{k}"), f"e{k}", T0)))
        for k in range(3)
    ]


def letters(outputs) -> list[InputRejected]:
    return [InputRejected.model_validate(o.message["payload"]) for o in outputs]


def test_the_agent_dead_letters_a_pass_the_core_raises_on_and_counts_it():
    agent = AgentService("localhost:1")
    d = configured()
    out = agent._handle(d, submissions(), T0)
    assert [(r.offset, r.reason) for r in letters(out)] == [
        (k, "internal error: ZeroDivisionError: a bug in the hot path") for k in range(3)
    ]
    assert d.frontier[f"{JOBS}:0"] == 3
    counted = agent.metrics.registry.get_sample_value(
        "gpualloc_internal_errors_total", {"pool": "default", "error": "ZeroDivisionError"}
    )
    assert counted == 1


def test_the_ledger_entry_names_them_refused_and_a_replay_dead_letters_them_again():
    d = configured()
    records = submissions()
    published = AgentService("localhost:1")._handle(d, records, T0)
    *_, entry = d.seal(RUN)
    assert entry.message["payload"]["inputs"] == []
    assert sorted(entry.message["payload"]["refused"]) == [f"{JOBS}:0:{k}" for k in range(3)]
    again = configured()
    index = {(r.topic, r.partition, r.offset): r for r in records}
    replayed = again.replay(PassRecorded.model_validate(entry.message["payload"]), lambda *at: index[at])
    assert [o.message for o in replayed.outputs] == [o.message for o in published] and replayed.differs is None
    assert again.frontier == d.frontier == {f"{CONFIG}:0": 1, f"{JOBS}:0": 3}
